"""The split-row bound (rankmap.placement.split_rows_bound) against brute-force optima, and
the split-row layout (rankmap.placement.split_rows_layout) against hand-computed costs."""

import random

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.perimeter_bound import perimeter_lower_bound
from rankmap.placement.split_rows_bound import split_rows_lower_bound, split_rows_tier_bound
from rankmap.placement.split_rows_layout import split_rows_cells, split_rows_starts
from rankmap.placement.tier_search import tier_bound, tier_cost, tier_costs


def _brute(rows: int, cols: int, free: tuple, w_row: int, w_col: int) -> float | None:
    """The least one-tier cost over every placement (groups within ``free``); None when none fits."""
    K, n = len(free), rows * cols
    codes = np.arange(K ** n)
    seq = (codes[:, None] // K ** np.arange(n)[None, :]) % K                      # (M, R*C)
    counts = np.stack([(seq == g).sum(axis=1) for g in range(K)], axis=1)         # (M, K)
    seq = seq[(counts <= np.asarray(free)[None, :]).all(axis=1)].reshape(-1, rows, cols)
    if not len(seq):
        return None
    cost = w_row * (seq != np.roll(seq, -1, axis=2)).sum(axis=(1, 2)) if cols > 1 else np.zeros(len(seq))
    if rows > 1:
        cost = cost + w_col * (seq[:, :-1] != seq[:, 1:]).sum(axis=(1, 2))
    return float(cost.min())


def _instances(n: int, seed: int):
    """``n`` random one-tier instances small enough to brute-force, every eighth one 4 x 3 on groups
    of 4 or 5 hosts (the bound's setting): ``(R, C, free, w_row, w_col, best)``."""
    rng = random.Random(seed)
    while n:
        if n % 8 == 0:
            K, R, C = 3, 4, 3                   # 3 ** 12 placements: the third remainder shows
            free = tuple(rng.randint(4, 5) for _ in range(K))
        else:
            K, R, C = rng.choice([2, 3, 4]), rng.randint(1, 5), rng.randint(1, 4)
            free = tuple(rng.randint(0, 9) for _ in range(K))
        if K ** (R * C) > 150_000 and (R, C) != (4, 3):
            continue
        w_row, w_col = rng.randint(0, 9), rng.randint(0, 9)
        best = _brute(R, C, free, w_row, w_col)
        if best is not None:
            n -= 1
            yield R, C, free, w_row, w_col, best


def test_split_rows_bound_never_exceeds_the_optimum_and_beats_the_perimeter_bound_somewhere():
    stronger = 0
    for R, C, free, w_row, w_col, best in _instances(96, seed=6):
        bound = split_rows_lower_bound(R, C, free, w_row, w_col)
        assert bound <= best + 1e-9, (R, C, free, w_row, w_col)
        stronger += bound > perimeter_lower_bound(R, C, free, w_row, w_col)
    assert stronger >= 1


def test_split_rows_bound_sees_the_third_remainder():
    # 4 rings of 3 on three groups of 4: one whole ring each, the remainders 1 + 1 + 1 share a
    # split row whose two neighbours keep two of its hops: 3 crossings (10) + 7 hops = 37.
    args = (4, 3, (4, 4, 4), 10, 1)
    assert split_rows_lower_bound(*args) == _brute(*args) == 37 > perimeter_lower_bound(*args)
    # a spare host: the remainders may pair up (2 crossings, 6 hops), as the bound allows
    assert split_rows_lower_bound(4, 3, (5, 4, 4), 10, 1) == _brute(4, 3, (5, 4, 4), 10, 1) == 26


def test_split_rows_tier_bound_never_exceeds_brute_force_on_two_tiers():
    rng = random.Random(3)
    checked = 0
    while checked < 25:
        K, R, C = 4, rng.randint(2, 4), rng.randint(2, 3)
        if K ** (R * C) > 20_000:
            continue
        free = tuple(rng.randint(C, 2 * C) for _ in range(K))
        if sum(free) < R * C:
            continue
        problem = GridProblem(R, C, free, rng.randint(1, 9), rng.randint(1, 9), 0, ((0, 0, 1, 1),), (1.0, 2.0))
        best = _brute_two_tiers(problem)
        assert split_rows_tier_bound(problem) <= best + 1e-6, problem
        assert split_rows_tier_bound(problem) >= 0
        checked += 1


def _brute_two_tiers(problem: GridProblem) -> float:
    R, C, K = problem.rows, problem.cols, len(problem.free)
    codes = np.arange(K ** (R * C))
    seq = (codes[:, None] // K ** np.arange(R * C)[None, :]) % K
    counts = np.stack([(seq == g).sum(axis=1) for g in range(K)], axis=1)
    seq = seq[(counts <= np.asarray(problem.free)[None, :]).all(axis=1)].reshape(-1, R, C)
    return min(tier_cost(problem, c) for c in seq)


def test_split_rows_layout_keeps_whole_rings_and_shares_remainders():
    # 3 groups of 48, rings of 36 (the megascale-3tier shape at pp 32, scaled to 4 stages):
    # rows a, b, (a|b|c), c: hops 36 + 24 + 24, 3 ring crossings.
    cells = split_rows_cells(4, 36, (48, 48, 48), [0, 1, 2])
    assert [sorted(set(r)) for r in cells.tolist()] == [[0], [1], [0, 1, 2], [2]]
    problem = GridProblem(4, 36, (48, 48, 48), 26, 1)
    assert tier_costs(problem, cells) == (3 * 26 + 36 + 24 + 24,)
    assert split_rows_cells(4, 36, (48, 48, 40), [0, 1, 2]) is None        # too few hosts


def test_split_rows_start_beats_the_bands_on_the_default_deep_pipeline():
    # megascale-3tier's free hosts (24 ToR groups, 6 pods), pp 32 x dp 36 of gpt3-175b
    # (w_row / w_col = 26.35): the layout and the tier bound, measured (the plan before this
    # module cost 2.154e9, the per-tier bound was 1.798e9).
    free = (46, 52, 45, 49, 48, 51, 53, 50, 47, 48, 43, 48, 42, 48, 45, 49, 49, 48, 47, 54, 52, 43, 50, 45)
    problem = GridProblem(32, 36, free, 26349306, 1000000, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))
    (cells,) = split_rows_starts(problem)
    assert (np.bincount(cells.ravel(), minlength=24) <= np.asarray(free)).all()
    assert tier_cost(problem, cells) == 2097575016.0 < 2154321546.0
    assert split_rows_tier_bound(problem) == 1844527098.0 > tier_bound(problem, 0)
