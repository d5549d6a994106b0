"""A constructive placement for the host grid: whole ToR groups per stage, in a snake.

Most of a placement's cost is ring crossings, and a stage (grid row) that takes k whole
groups crosses exactly k times, so the heuristic fills each row with the fewest whole
groups that sum exactly to the row (subset-sum by dynamic programming). When no exact
subset exists, one group is split: the rest of it starts the next row. Rows are laid
boustrophedon (even rows left to right, odd rows right to left), so the two pieces of a
split group sit in the same columns of consecutive stages and their pipeline hops stay
inside the group.
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.subset_sum import distinct_sizes, min_count_subset, min_counts, pick_subset

__all__ = ["snake_cells"]


def snake_cells(rows: int, cols: int, free: tuple, cost, tries: int = 64, seed: int = 0) -> np.ndarray | None:
    """The cheapest of ``tries`` snake placements, or None if the hosts cannot fill the grid.

    Which exact subset fills a row decides what is left for later rows, so the first try
    prefers large groups and each further try prefers groups in a seeded random order.
    Each try is made twice: carrying the rest of a split group into the next row, and
    leaving it unused when spare hosts allow.

    Parameters
    ----------
    rows, cols : int
    free : tuple of int
        ``free[K]``: usable hosts per ToR group.
    cost : callable
        ``cost(cells) -> comparable`` (a number or a tuple) to minimise.
    """
    if sum(free) < rows * cols:
        return None
    rng = np.random.default_rng(seed)
    best, best_cost = None, None
    if len(set(free)) == 1:
        tries = 1  # all groups alike: every preference order gives the same layout
    for t in range(tries):
        rank = np.argsort(-np.asarray(free), kind="stable") if t == 0 else rng.permutation(len(free))
        for waste in (False, True):
            cells = _one_snake(rows, cols, free, rank, waste)
            c = cost(cells)
            if best_cost is None or c < best_cost:
                best, best_cost = cells, c
    return best


def _one_snake(rows: int, cols: int, free: tuple, rank: np.ndarray, waste: bool = False) -> np.ndarray:
    """One snake; with ``waste``, the rest of a split group is left unused whenever the other
    free hosts still cover the rows to come (it would otherwise cost a piece of its own)."""
    remaining = {int(g): free[g] for g in rank if free[g] > 0}
    cells = np.empty((rows, cols), dtype=np.int64)
    carry: tuple[int, int] | None = None
    for r in range(rows):
        pieces: list[tuple[int, int]] = []
        need = cols
        if carry is not None:
            take = min(carry[1], need)
            pieces.append((carry[0], take))
            need -= take
            carry = (carry[0], carry[1] - take) if carry[1] > take else None
        if carry is not None:  # a group larger than a row spills on
            _lay(cells, r, pieces)
            continue
        pieces += _fill(remaining, need)
        last_g, last_n = pieces[-1]
        used = sum(n for _, n in pieces)
        if used > cols:  # the last group was split: the rest opens the next row
            pieces[-1] = (last_g, last_n - (used - cols))
            carry = (last_g, used - cols)
            if waste and sum(remaining.values()) >= (rows - r - 1) * cols:
                carry = None
        _lay(cells, r, pieces)
    return cells


def _order(remaining: dict[int, int]) -> list[tuple[int, int]]:
    # Insertion order of `remaining` is this try's preference; the first try is by size.
    return list(remaining.items())


def _fill(remaining: dict[int, int], need: int) -> list[tuple[int, int]]:
    """Whole groups for one row: an exact subset if any, else the fewest groups with one split."""
    exact = min_count_subset(_order(remaining), need)
    if exact is not None:
        return [(g, remaining.pop(g)) for g in exact]
    best: list[tuple[int, int]] | None = None
    for split_g, split_f in distinct_sizes(_order(remaining)):
        # The split group supplies `short` (1 .. f-1) hosts of this row; whole groups the rest.
        others = [(g, f) for g, f in _order(remaining) if g != split_g]
        counts = min_counts(others, need)
        lo = max(1, need - sum(f for _, f in others))
        shorts = np.arange(lo, min(split_f, need + 1))
        if shorts.size == 0:
            continue
        short = int(shorts[np.argmin(counts[need - shorts])])
        if counts[need - short] > len(others):
            continue
        if best is None or counts[need - short] + 1 < len(best):
            best = [(g, remaining[g]) for g in pick_subset(others, need - short)] + [(split_g, split_f)]
    for g, _ in best:
        remaining.pop(g)
    return best


def _lay(cells: np.ndarray, r: int, pieces: list[tuple[int, int]]) -> None:
    row = np.concatenate([np.full(n, g, dtype=np.int64) for g, n in pieces])
    cells[r] = row if r % 2 == 0 else row[::-1]
