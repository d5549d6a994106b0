"""Split-row layouts: each ToR group's whole rows, its remainder in rows shared by a few groups.

Notation as in :mod:`rankmap.placement.grid_problem`: R rows (DP rings, one per pipeline
stage) of C hosts, ``free[K]`` hosts per ToR group. For deep pipelines whose rings are
narrower than a ToR group (C <= free), a group of ``f`` hosts holds ``floor(f / C)`` whole
rings, which cross nothing, and a remainder ``f mod C``. The remainders of consecutive
groups (in a pod order) are packed into shared ("split") rows of C hosts; a split row sits
between the whole rows of two groups it holds pieces of, so that the pieces keep their
pipeline hops inside their groups::

    ... | whole row of a | split row (a, b, c) | whole row of c | ...

Each such set of groups costs about ``w_row * pieces + w_col * (C - piece_a) + w_col *
(C - piece_c)`` against ``w_col * C`` per boundary between whole rows. Band layouts
(:mod:`rankmap.placement.band_layout`) instead split nearly every row, and the nested bands
(:mod:`rankmap.placement.nested_bands_layout`) split the rows at every group boundary.

The group order decides which remainders share a row and which pods a split row spans;
:func:`split_rows_starts` tries seeded random orders (pods shuffled, groups shuffled within
each pod, so that split rows mostly stay inside a pod) and keeps the cheapest by
:func:`~rankmap.placement.tier_search.tier_cost`.

References
----------
MegaScale (NSDI 2024): data-intensive ranks under one ToR group; Arnold (arXiv 2509.15940):
minimise the pods a DP or PP group spans.
"""

from __future__ import annotations

import random

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_search import tier_cost

__all__ = ["split_rows_cells", "split_rows_starts", "SPLIT_ROWS_TRIES"]

# Random group orders tried (about 0.1 ms each on 32 x 36 cells).
SPLIT_ROWS_TRIES = 2000


def split_rows_cells(rows: int, cols: int, free: tuple, order: list) -> np.ndarray | None:
    """The split-row layout ``cells[R, C]`` of the groups in ``order`` (module docstring).

    Groups are taken in ``order`` until R * C hosts are placed (``free[g]`` each at most):
    a group's whole rows are held back until the split row its remainder fills is complete,
    then laid as ``whole rows..., split row, last whole row``. None when the groups in
    ``order`` hold fewer than R * C hosts or ``cols`` < 1.

    Examples
    --------
    Three groups of 48 hosts, rows of 36: a whole row each and one split row of 12 + 12 + 12.

    >>> split_rows_cells(4, 36, (48, 48, 48), [0, 1, 2])[:, ::12].tolist()
    [[0, 0, 0], [1, 1, 1], [0, 1, 2], [2, 2, 2]]
    """
    need = rows * cols
    if cols < 1 or sum(free[g] for g in order) < need:
        return None
    out, piece, whole = [], [], []
    for g in order:
        left = min(free[g], need)
        need -= left
        whole += [g] * (left // cols)
        left %= cols
        while left:
            take = min(left, cols - len(piece))
            piece += [g] * take
            left -= take
            if len(piece) == cols:
                out += [[w] * cols for w in whole[:-1]] + [piece] + [[w] * cols for w in whole[-1:]]
                piece, whole = [], []
        if need == 0:
            break
    out += [[w] * cols for w in whole] + ([piece] if piece else [])
    if len(out) != rows or any(len(r) != cols for r in out):
        return None
    return np.asarray(out, dtype=np.int64)


def split_rows_starts(problem: GridProblem, tries: int = SPLIT_ROWS_TRIES, seed: int = 0) -> list:
    """The cheapest split-row layout (by tier cost) over ``tries`` seeded random group orders.

    Returns a list of at most one ``cells[R, C]``; empty when rings are wider than every
    group (no whole rows to keep; the band layouts cover that case) or no order fits.
    """
    R, C = problem.rows, problem.cols
    used = [g for g, f in enumerate(problem.free) if f > 0]
    if not used or C > max(problem.free[g] for g in used) or R < 2:
        return []
    dom = problem.domains[0] if problem.domains else (0,) * len(problem.free)
    pods = sorted({dom[g] for g in used})
    members = {d: [g for g in used if dom[g] == d] for d in pods}
    rng = random.Random(seed)
    best, best_cost = None, float("inf")
    for _ in range(tries):
        order = []
        for d in rng.sample(pods, len(pods)):
            order += rng.sample(members[d], len(members[d]))
        cells = split_rows_cells(R, C, problem.free, order)
        if cells is None:
            continue
        cost = tier_cost(problem, cells)
        if cost < best_cost:
            best, best_cost = cells, cost
    return [] if best is None else [best]
