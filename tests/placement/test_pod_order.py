"""Pod order along a band: the subset dynamic programme against brute force, and a laid band."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.nested_bands_layout import nested_band_cells
from rankmap.placement.pod_order import MAX_EXACT_PODS, pod_order
from rankmap.placement.tier_search import tier_costs


def _steps(lay: list, heights: list[int], w_tor: float, w_pod: float) -> float:
    """Hops stepping across edges, counted from a lay: ``lay[P]`` (in band order) of
    ``[m][(group, hosts)]``; independent of the module's tables."""
    cost, totals = 0.0, [0] * len(heights)
    for k, pod in enumerate(lay):
        for j, (share, h) in enumerate(zip(pod, heights)):
            for t, (_, n) in enumerate(share):
                totals[j] += n
                last_piece = t == len(share) - 1
                if last_piece and k == len(lay) - 1:
                    continue                                  # the row's end
                if totals[j] % h:
                    cost += w_tor + (w_pod if last_piece else 0.0)
        if k < len(lay) - 1:
            for j in range(len(heights) - 1):
                cost += w_pod * abs(totals[j] // heights[j] - -(-totals[j + 1] // heights[j + 1]))
    return cost


def _brute(shares: list, heights: list[int], w_tor: float, w_pod: float) -> float:
    best = np.inf
    for order in itertools.permutations(range(len(shares))):
        per_pod = [itertools.product(*(itertools.permutations(s) for s in shares[i])) for i in order]
        for choice in itertools.product(*per_pod):
            best = min(best, _steps([[list(s) for s in pod] for pod in choice], heights, w_tor, w_pod))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_order_is_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    heights = [int(h) for h in rng.integers(1, 5, size=int(rng.integers(1, 3)))]
    shares, g = [], 0
    for _ in range(n):
        pod = []
        for _ in heights:
            k = int(rng.integers(1, 3)) if n < 4 else 1
            pod.append([(g + t, int(rng.integers(1, 9))) for t in range(k)])
            g += k
        shares.append(pod)
    w_tor, w_pod = float(rng.integers(1, 4)), float(rng.integers(1, 4))
    order, pieces = pod_order(shares, heights, w_tor, w_pod)
    assert sorted(order) == list(range(n))
    for i in range(n):                                        # same pieces, reordered
        assert all(sorted(pieces[i][j]) == sorted(shares[i][j]) for j in range(len(heights)))
    got = _steps([pieces[i] for i in order], heights, w_tor, w_pod)
    assert got == _brute(shares, heights, w_tor, w_pod)


def test_too_many_pods_keep_the_callers_order():
    shares = [[[(i, 3)]] for i in range(MAX_EXACT_PODS + 1)]
    assert pod_order(shares, [3]) is None


def test_laid_band_steps_once():
    # One band of 3 rows x 4 columns; pods of groups (2, 3), (3) and (1, 3) hosts: the pod
    # edges after 5 and 9 hosts (pods 0, 2, 1 as the band takes them); only the one after 5
    # steps (a hop on each tier): group 3 (1 host) below group 0. Rows cross 4 ToR groups and
    # 3 pods each (w_row 1): ToR tier 12 + 1, pod tier 9 + 1.
    p = GridProblem(3, 4, (2, 3, 3, 1, 3), 1, 1, 0, ((0, 0, 1, 2, 2),), (1.0, 1.0))
    cells = nested_band_cells(p, 3, 1, [[3]])
    assert cells.tolist() == [[1, 0, 4, 2], [1, 0, 4, 2], [1, 3, 4, 2]]
    assert tier_costs(p, cells) == (13, 10)
