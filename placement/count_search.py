"""Local search on the hosts each row (DP ring) takes from each ToR group, scored on every tier.

On a fabric of several tiers the cost of a placement is mostly decided by ``counts[R, K]``,
the hosts of row r in ToR group g: ring crossings per level follow from which domains a
row uses, and laying each row's hosts in one global group order
(:func:`rankmap.placement.tier_model.decode_counts`) makes every domain one arc of the
ring. The search improves counts by exchanges that keep every row at C hosts and every
group within its free hosts, each scored by the exact tier cost of its decoded placement:

- exchange: row r gives ``a`` hosts of group g to row q, which gives ``a`` hosts of group
  h back (``a`` the smaller piece, so at least one piece disappears);
- move: row r moves a piece of group g to a group h with spare hosts;
- stage swap: rows r and q trade places (pipeline hops follow the row order).

First improvement in a fixed scan order, at most ``max_rounds`` scans and ``max_evals``
scored placements: deterministic (a count, not a clock, ends the search).
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from rankmap.placement.count_screen import CountScreen
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_model import decode_counts

__all__ = ["counts_of", "count_search", "SCREEN_MOVES", "SCREEN_CELLS"]

# Moves screened at once, at most, and host cells per chunk (each move holds eight rows of
# C hosts per decoding while screened: ~50 MB per chunk at 2**16 cells, where 512 moves of
# 6,250-host rows took ~230 MB more at 50,000 hosts).
SCREEN_MOVES = 512
SCREEN_CELLS = 1 << 16


def counts_of(problem: GridProblem, cells: np.ndarray) -> np.ndarray:
    """``counts[R, K]``: hosts of each row in each ToR group."""
    K = len(problem.free)
    return np.stack([np.bincount(row, minlength=K) for row in cells]).astype(np.int64)


def _moves(counts: np.ndarray, spare: np.ndarray):
    """Candidate count matrices one exchange, move or stage swap away, in a fixed order."""
    R, K = counts.shape
    for r in range(R):
        for g in np.nonzero(counts[r])[0]:
            for q in range(R):
                if q == r:
                    continue
                for h in np.nonzero(counts[q])[0]:
                    if h == g or counts[r, h] == 0 and counts[q, g] == 0 and q < r:
                        continue
                    a = min(counts[r, g], counts[q, h])
                    t = counts.copy()
                    t[r, g] -= a
                    t[q, g] += a
                    t[q, h] -= a
                    t[r, h] += a
                    yield t
            for h in np.nonzero(spare)[0]:
                a = min(counts[r, g], spare[h])
                t = counts.copy()
                t[r, g] -= a
                t[r, h] += a
                yield t
    for r in range(R):
        for q in range(r + 1, R):
            t = counts.copy()
            t[[r, q]] = t[[q, r]]
            yield t


def count_search(problem: GridProblem, cells: np.ndarray, key: Callable, max_rounds: int = 30,
                 max_evals: int | None = None) -> np.ndarray:
    """The best decoded placement reached from ``cells[R, C]`` by count exchanges.

    Parameters
    ----------
    problem : GridProblem
    cells : ndarray
        ``cells[R, C]``: a placement within capacities (the start).
    key : callable
        ``key(cells) -> comparable``: lower is better (the planner's ranking).
    max_rounds : int
        Improving steps at most (each scans the moves from the start of the order).
    max_evals : int, optional
        Placements scored at most (unlimited when None).

    Returns
    -------
    ndarray
        ``cells[R, C]``, ``cells`` itself when nothing beats it.

    Examples
    --------
    Two pods of one group each; rows of 2 split over both pods get whole.

    >>> p = GridProblem(2, 2, (2, 2), 10, 1, domains=((0, 1),), weights=(1.0, 1.0))
    >>> from rankmap.placement.tier_search import tier_cost
    >>> count_search(p, np.array([[0, 1], [0, 1]]), lambda c: tier_cost(p, c)).tolist()
    [[1, 1], [0, 0]]
    """
    free = np.asarray(problem.free)

    first = getattr(key, "first", None)  # key(c)[0] alone, when the key offers it

    def score(counts: np.ndarray, above=None) -> tuple:
        """(key, cells) of the better decoding; (None, None) when ``first`` shows both
        decodings worse than ``above`` (no full key needed)."""
        decoded = decode_counts(problem, counts)
        if first is not None and above is not None:
            decoded = [c for c in decoded if first(c) <= above[0]]
            if not decoded:
                return None, None
        keyed = [(key(c), i) for i, c in enumerate(decoded)]
        k, i = min(keyed)
        return k, decoded[i]

    best_cells, best_key = cells, key(cells)
    counts = counts_of(problem, cells)
    current_key, current_cells = score(counts)
    if current_key < best_key:
        best_cells, best_key = current_cells, current_key
    evals = 0
    screen = getattr(key, "first_name", None) == "tiers"   # key.first is the tier cost
    for _ in range(max_rounds):
        spare = free - counts.sum(axis=0)
        for t in _screened(problem, counts, _moves(counts, spare), screen, current_key):
            evals += 1
            if max_evals is not None and evals > max_evals:
                return best_cells
            if t is None:                       # both decodings screened out: as score's None
                continue
            k, c = score(t, current_key)
            if k is not None and k < current_key:
                counts, current_key = t, k
                if k < best_key:
                    best_cells, best_key = c, k
                break
        else:
            break
    return best_cells


def _screened(problem: GridProblem, counts: np.ndarray, moves, screen: bool, above: tuple):
    """``moves`` (from ``counts``) in order, each replaced by None where both its decodings
    cost more than ``above[0]`` on the tier cost
    (:class:`~rankmap.placement.count_screen.CountScreen`, a chunk at a time): the moves that
    ``score`` would turn down on ``key.first`` alone. Chunks grow from 8 moves to
    :data:`SCREEN_MOVES` (fewer on wide rows, :data:`SCREEN_CELLS`), so that an early
    improvement wastes little. ``moves`` unchanged without ``screen``."""
    if not screen:
        yield from moves
        return
    costs = CountScreen(problem, counts).costs
    size = 8
    while True:
        chunk = list(itertools.islice(moves, size))
        if not chunk:
            return
        ok = (costs(np.stack(chunk)) <= above[0]).any(axis=0)
        yield from (t if keep else None for t, keep in zip(chunk, ok))
        size = min(4 * size, SCREEN_MOVES, max(8, SCREEN_CELLS // problem.cols))
