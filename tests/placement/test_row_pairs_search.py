"""Two DP rings' ToR groups shared out again (:mod:`rankmap.placement.row_pairs_search`)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from rankmap.placement.count_search import counts_of
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.objectives import ranking
from rankmap.placement.row_pairs_search import _crossings, repartition, row_pairs_search
from rankmap.placement.tier_search import tier_cost

# The benchmark's EP job at 12,288 GPUs on 50% busy hosts (tiered_instance("ep", 12288, 0.5,
# seed=2)) in whole spans of 2 hosts: 8 rings of 46 spans on 24 ToR groups of 11-18 spans in 6
# pods of 4. The plan before this search (its rings 6 and 7): 5 pieces over 3 pods, and 3
# pieces in one pod.
EP_SPANS = GridProblem(8, 46, (16, 15, 16, 16, 11, 17, 13, 16, 15, 17, 16, 17, 16, 18, 14, 15, 15, 14, 15, 18, 17, 18,
                               14, 14), 80422667, 2000000, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))
EP_ROWS = {0: {5: 17, 6: 13, 7: 16}, 1: {16: 15, 18: 13, 19: 18}, 2: {21: 18, 22: 14, 23: 14},
           3: {1: 15, 17: 14, 20: 17}, 4: {0: 16, 2: 16, 3: 14}, 5: {9: 17, 10: 12, 11: 17},
           6: {4: 10, 8: 15, 10: 4, 14: 14, 15: 3}, 7: {12: 16, 13: 18, 15: 12}}


def _counts(rows: dict, K: int) -> np.ndarray:
    counts = np.zeros((len(rows), K), dtype=np.int64)
    for r, row in rows.items():
        for g, n in row.items():
            counts[r, g] = n
    return counts


def _row_cost(problem: GridProblem, row: np.ndarray) -> float:
    """Tier-weighted ring crossings of one row of counts, by hand: k >= 2 domains cross k times."""
    pods = {problem.domains[0][g] for g in np.flatnonzero(row)}
    pieces = np.count_nonzero(row)
    return problem.weights[0] * (pieces if pieces > 1 else 0) + problem.weights[1] * (len(pods) if len(pods) > 1 else 0)


def test_two_rings_trade_a_group_for_two_pieces_with_a_spare_host():
    counts = _counts(EP_ROWS, 24)
    assert _row_cost(EP_SPANS, counts[6]) + _row_cost(EP_SPANS, counts[7]) == (5 + 3) + 3
    moved = repartition(EP_SPANS, counts, 6, 7)
    assert (moved.sum(axis=1) == 46).all() and (moved.sum(axis=0) <= np.asarray(EP_SPANS.free)).all()
    assert (np.delete(moved, [6, 7], axis=0) == np.delete(counts, [6, 7], axis=0)).all()
    # 4 pieces over 3 pods and 3 pieces in one pod: one crossing fewer (group 4 takes its spare span)
    assert _row_cost(EP_SPANS, moved[6]) + _row_cost(EP_SPANS, moved[7]) == (4 + 3) + 3


def _brute_two_rows(problem: GridProblem, counts: np.ndarray, r: int, q: int) -> float:
    """Least crossings of rows r, q over every split of the groups' hosts (own enumeration)."""
    free = np.asarray(problem.free) - np.delete(counts, [r, q], axis=0).sum(axis=0)
    groups = [g for g in range(len(free)) if free[g] > 0]
    best = np.inf
    for a in itertools.product(*[range(free[g] + 1) for g in groups]):
        if sum(a) != problem.cols:
            continue
        for b in itertools.product(*[range(free[g] - x + 1) for g, x in zip(groups, a)]):
            if sum(b) != problem.cols:
                continue
            row_r, row_q = np.zeros(len(free), dtype=int), np.zeros(len(free), dtype=int)
            row_r[groups], row_q[groups] = a, b
            best = min(best, _row_cost(problem, row_r) + _row_cost(problem, row_q))
    return best


def _random_two_rows(rng: random.Random) -> tuple[GridProblem, np.ndarray]:
    """Two rows drawn host by host from random groups (some spare hosts left), every group with
    free hosts in one of the rows; 1-3 pods, tier weights 1 and 1-3."""
    K, C = rng.randint(3, 6), rng.randint(3, 6)
    pool = [g for g in range(K) for _ in range(rng.randint(1, 4))]
    while len(pool) < 2 * C:
        pool.append(rng.randrange(K))
    rng.shuffle(pool)
    counts = np.zeros((2, K), dtype=np.int64)
    for i, g in enumerate(pool[:2 * C]):
        counts[i // C, g] += 1
    free = counts.sum(axis=0) + np.array([rng.randint(0, 1) for _ in range(K)]) * (counts.sum(axis=0) > 0)
    pods = tuple(sorted(rng.randrange(3) for _ in range(K)))
    weights = (1.0, float(rng.randint(1, 3)))
    return GridProblem(2, C, tuple(int(f) for f in free), 10, 1, 0, (pods,), weights), counts


@pytest.mark.parametrize("seed", range(12))
def test_repartition_reaches_the_two_rows_optimum_over_the_groups_they_hold(seed):
    # Every group with free hosts is in one of the rows (then the patterns cover every split):
    # the repartition's crossings equal the brute-force least.
    problem, counts = _random_two_rows(random.Random(seed))
    now = _row_cost(problem, counts[0]) + _row_cost(problem, counts[1])
    moved = repartition(problem, counts, 0, 1)
    got = now if moved is None else _row_cost(problem, moved[0]) + _row_cost(problem, moved[1])
    assert got == _brute_two_rows(problem, counts, 0, 1)
    if moved is not None:
        assert got < now and (moved.sum(axis=1) == problem.cols).all()
        assert (moved.sum(axis=0) <= np.asarray(problem.free)).all()


def test_repartition_improves_some_random_pairs():
    # The random pairs above are not at their optimum already (else the test would only check
    # None): 39 of 40 draws improve.
    improved = sum(repartition(*_random_two_rows(random.Random(seed)), 0, 1) is not None for seed in range(40))
    assert improved == 39


def test_crossings_count_domains_per_level():
    problem = GridProblem(1, 6, (2, 2, 2, 2), 10, 1, 0, ((0, 0, 1, 1),), (1.0, 3.0))
    present = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 0]], dtype=bool)
    # two groups of one pod: 2; two groups in two pods: 2 + 3 * 2; one group: 0
    assert _crossings(problem, np.arange(4), present).tolist() == [2.0, 8.0, 0.0]


def test_search_never_returns_worse_and_keeps_capacities():
    problem = EP_SPANS
    cells = np.concatenate([np.repeat(np.flatnonzero(row), row[row > 0])[None] for row in _counts(EP_ROWS, 24)])
    key = ranking(problem, ("tiers", "uplink"))
    out = row_pairs_search(problem, cells, key)
    assert key(out) <= key(cells)
    assert tier_cost(problem, out) < tier_cost(problem, cells)
    assert (counts_of(problem, out).sum(axis=0) <= np.asarray(problem.free)).all()
