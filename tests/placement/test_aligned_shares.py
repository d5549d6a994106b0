"""Aligned shares: pods' group splits between two sub-bands chosen along the band."""

from __future__ import annotations

import itertools

import numpy as np

from rankmap.placement.aligned_shares import _edge_cost, aligned_shares
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.nested_bands_layout import nested_band_cells
from rankmap.placement.tier_search import tier_costs


def _cost(shares, order, heights, w_tor=1.0, w_pod=1.0):
    """Edge cost of ``shares`` along ``order`` (every pod edge but the band's last)."""
    total, hosts, upper = 0.0, 0, 0
    for i in order[:-1]:
        upper += sum(n for _, n in shares[i][0])
        hosts += sum(n for _, n in shares[i][0] + shares[i][1])
        total += float(_edge_cost(np.array([upper]), hosts, *heights, w_tor, w_pod)[0])
    return total


def test_pod_edges_line_up_where_each_pod_alone_cannot_split_evenly():
    # Sub-bands of 2 + 2 rows of 9 hosts; pods of groups (6, 4, 4, 4) and (4, 6, 4, 4): 18 hosts
    # each, 9 : 9 impossible by whole groups. The least: 10 : 8 in one pod and 8 : 10 in the
    # other, the edge between them at column 5 above and 4 below (or 4 and 5), no step inside
    # a sub-band (whole columns): 1 hop across the pod tier.
    pods = [[(0, 6), (1, 4), (2, 4), (3, 4)], [(4, 4), (5, 6), (6, 4), (7, 4)]]
    shares = aligned_shares(pods, [2, 2], 9, [0, 1])
    upper = [sum(n for _, n in s[0]) for s in shares]
    assert sum(upper) == 18 and upper in ([10, 8], [8, 10])
    assert _cost(shares, [0, 1], (2, 2)) == 1.0


def test_matches_brute_force_on_random_bands():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(40):
        n_pods = int(rng.integers(2, 5))
        pods, g = [], 0
        for _ in range(n_pods):
            k = int(rng.integers(2, 5))
            pods.append([(g + j, int(rng.integers(2, 9))) for j in range(k)])
            g += k
        heights = [int(rng.integers(1, 4)), int(rng.integers(1, 4))]
        hosts = sum(n for pod in pods for _, n in pod)
        if hosts % sum(heights):
            continue
        cols = hosts // sum(heights)
        order = [int(i) for i in rng.permutation(n_pods)]
        found = aligned_shares(pods, heights, cols, order)
        best = None
        for choice in itertools.product(*[range(1 << len(p)) for p in pods]):
            shares = [[[p[j] for j in range(len(p)) if c >> j & 1], [p[j] for j in range(len(p)) if not c >> j & 1]]
                      for p, c in zip(pods, choice)]
            if sum(n for s in shares for _, n in s[0]) != heights[0] * cols:
                continue
            cost = _cost(shares, order, heights)
            best = cost if best is None or cost < best else best
        if best is None:
            assert found is None
            continue
        checked += 1
        assert sum(n for s in found for _, n in s[0]) == heights[0] * cols
        assert sorted(x for s in found for x in s[0] + s[1]) == sorted(x for p in pods for x in p)
        assert _cost(found, order, heights) == best
    assert checked >= 10


def test_aligned_band_layout_crosses_the_pod_tier_less():
    # One band of 3 + 3 rows of 8 hosts; pods of groups (2, 2, 2, 2), (6, 5, 6, 3), (6, 7, 4, 5).
    p = GridProblem(6, 8, (2, 2, 2, 2, 6, 5, 6, 3, 6, 7, 4, 5), 5, 1, 0, ((0,) * 4 + (1,) * 4 + (2,) * 4,),
                    (1.0, 1.0))
    plain = nested_band_cells(p, 3, 2, [[3, 3]])
    aligned = nested_band_cells(p, 3, 2, [[3, 3]], aligned=True)
    assert aligned.tolist() == [[4, 4, 5, 5, 9, 9, 8, 8],
                                [4, 4, 5, 5, 9, 9, 8, 8],
                                [4, 4, 5, 9, 9, 9, 8, 8],
                                [6, 6, 7, 11, 11, 10, 0, 1],
                                [6, 6, 7, 11, 11, 10, 0, 2],
                                [6, 6, 7, 11, 10, 10, 1, 2]]
    # Pod tier: rows cross 2, 2, 2, 3, 3, 3 pod edges (cyclic), 15 x 5 = 75, and 3 hops (column
    # 3 between rows 1 and 2, columns 6 and 7 between the sub-bands): 78; the ToR tier is 162
    # both ways. The splits nearest each pod's half leave pod 2's edges further apart: 88.
    assert tier_costs(p, aligned) == (162, 78)
    assert tier_costs(p, plain) == (162, 88)
    assert nested_band_cells(p, 3, 2, [[3, 3]], aligned=True).tobytes() == aligned.tobytes()
