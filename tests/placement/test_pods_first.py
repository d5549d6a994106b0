"""Pods first: whole DP rings and stage runs to pods, then ToR groups inside each pod."""

from __future__ import annotations

import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pods_first import PAIR_FILLS, _fill_pod, pods_first_starts, whole_rows_first
from rankmap.placement.tier_search import level_problem, tier_bound, tier_cost


def _brute(problem: GridProblem) -> float:
    """The least tier cost over every label sequence within capacities."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    best = None
    for flat in itertools.product(range(K), repeat=R * C):
        if (np.bincount(flat, minlength=K) > np.asarray(problem.free)).any():
            continue
        cost = tier_cost(problem, np.asarray(flat).reshape(R, C))
        best = cost if best is None or cost < best else best
    return best


def test_whole_rows_first_keeps_one_ring_per_pod_and_spans_the_rest():
    # 3 rings of 4 hosts; pods {0: groups of 3 and 3, 1: 4 and 1, 2: 2}: rings whole in pods 0
    # and 1, the third on the largest remainders (group 1's 2 hosts in pod 0, group 4's 2 in
    # pod 2), between pod 0's ring and nothing else: 2 pods, 2 groups.
    p = GridProblem(3, 4, (3, 3, 4, 1, 2), 10, 1, domains=((0, 0, 1, 1, 2),), weights=(1.0, 1.0))
    cells = whole_rows_first(p)
    assert cells.tolist() == [[2, 2, 2, 2], [0, 0, 0, 1], [1, 1, 4, 4]]
    dom = np.asarray(p.domains[0])
    assert [len(set(dom[r].tolist())) for r in cells] == [1, 1, 2]
    # ToR tier: rings cross 0 + 2 + 2 times (40), hops 4 + 4 (8); pod tier: the third ring
    # crosses twice (20), hops 4 + 2 (6)
    assert tier_cost(p, cells) == 40 + 8 + 20 + 6


def test_pods_first_reaches_the_brute_force_optimum_on_a_deep_pipeline():
    # 4 stages of 2 hosts; two pods of two ToR groups of 2 hosts, pipeline hops heavy: the
    # optimum gives each pod a whole pipeline (column), two stages per group: rings cross
    # 2 x 4 times on each tier (8 + 8), the two columns change group once each (2 x 10)
    p = GridProblem(4, 2, (2, 2, 2, 2), 1, 10, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
    pod = level_problem(p, 1)
    best = _brute(p)
    starts = pods_first_starts(p, pod, lambda c: tier_cost(p, c))
    assert min(tier_cost(p, c) for c in starts) == best == 8 + 8 + 2 * 10
    assert tier_bound(p, 0) <= best


def test_pods_first_starts_stay_within_every_group():
    rng = np.random.default_rng(5)
    for _ in range(20):
        K, R, C = 8, int(rng.integers(2, 7)), int(rng.integers(2, 9))
        free = tuple(int(x) for x in rng.integers(1, 9, size=K))
        if sum(free) < R * C:
            continue
        p = GridProblem(R, C, free, int(rng.integers(1, 9)), int(rng.integers(1, 9)),
                        domains=(tuple(g // 2 for g in range(K)),), weights=(1.0, 2.0))
        for cells in pods_first_starts(p, level_problem(p, 1), lambda c: tier_cost(p, c)):
            assert cells.shape == (R, C) and cells.min() >= 0
            assert (np.bincount(cells.ravel(), minlength=K) <= np.asarray(free)).all()


def test_bands2_fill_keeps_each_tor_group_in_one_sub_band():
    # A pod holding 4 shared rows (8, 8, 7, 7 hosts) with groups of 9, 7, 8, 6 hosts: the top
    # sub-band (16 hosts) takes the 9 and the 7 exactly, the bottom (14) the 8 and the 6.
    from rankmap.placement.pods_first import _fill_bands, _row_bands
    mask = np.zeros((4, 10), dtype=bool)
    mask[0:2, :8] = True
    mask[2:4, :7] = True
    cells = np.full(mask.shape, -1)
    groups = np.array([10, 11, 12, 13])
    assert _fill_bands(cells, groups, np.array([9, 7, 8, 6]), _row_bands(mask, [0, 1, 2, 3], 2))
    assert set(cells[0:2][mask[0:2]].tolist()) == {10, 11} and set(cells[2:4][mask[2:4]].tolist()) == {12, 13}
    # column by column: the 9-host group fills columns 0-3 of both rows and one more cell
    assert cells[0:2, :4].tolist() == [[10] * 4, [10] * 4] and (cells == 10).sum() == 9
    assert not _fill_bands(np.full(mask.shape, -1), groups, np.array([5, 5, 5, 5]), _row_bands(mask, [0, 1, 2, 3], 2))


def test_pairs_fill_stacks_two_groups_per_column_strip():
    # One pod of groups of 6, 3, 2 and 1 hosts, 4 stages of 3 hosts. "pairs-ac": the groups
    # of 6 and 2 share columns 0-1 (6 above, 2 below), those of 3 and 1 column 2: each
    # group cuts each of its rows once and keeps its pipeline hops inside.
    p = GridProblem(4, 3, (6, 3, 2, 1), 10, 1, domains=((0, 0, 0, 0),), weights=(1.0, 1.0))
    pods = np.zeros((4, 3), dtype=np.int64)
    cells = np.full((4, 3), -1, dtype=np.int64)
    assert _fill_pod(p, pods, cells, 0, np.arange(4), "pairs-ac")
    assert cells.tolist() == [[0, 0, 1], [0, 0, 1], [0, 0, 1], [2, 2, 3]]
    q = GridProblem(4, 3, (12,), 10, 1)
    assert any(c.tolist() == cells.tolist() for c in pods_first_starts(p, q, lambda c: 0, PAIR_FILLS))
