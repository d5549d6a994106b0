"""The tier cost of many count matrices one or two rows away from a current one, at once.

The count search (:mod:`rankmap.placement.count_search`) scores placements decoded from
``counts[R, K]`` (:func:`rankmap.placement.tier_model.decode_counts`: each row laid in one
global group order, plainly or as a snake with every odd row reversed). Its moves change at
most two rows (an exchange or a stage swap between rows r and q, a move to a spare group in
row r), and a row's layout depends on its own counts and, in the snake, on its parity. The
grid cost is a sum of per-row ring terms and per-pair pipeline terms (rows a and a + 1, the
last row and the first for the wrap hop), so a move changes only the ring terms of its rows
and the pipeline terms of the (at most four) pairs that touch them. This module scores
``N`` moves from those terms alone: ``O(N C)`` cells instead of ``O(N R C)``, in integers
exactly as :func:`rankmap.placement.grid_problem.grid_cost` counts them, the levels weighed
in the order :func:`rankmap.placement.tier_search.tier_cost` uses, so the values are equal to
the last bit.
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_model import decode_counts, group_order
from rankmap.placement.tier_search import level_maps

__all__ = ["CountScreen"]


class CountScreen:
    """Per-row and per-pair terms of the two decodings of ``counts[R, K]``, at every level.

    Examples
    --------
    >>> from rankmap.placement.tier_search import tier_cost
    >>> p = GridProblem(3, 2, (2, 2, 2), 5, 1, domains=((0, 0, 1),), weights=(1.0, 2.0))
    >>> counts = np.array([[2, 0, 0], [0, 1, 1], [0, 1, 1]])
    >>> moved = counts.copy(); moved[[0, 1]] = moved[[1, 0]]          # a stage swap
    >>> CountScreen(p, counts).costs(moved[None]).tolist()
    [[68.0], [68.0]]
    >>> [tier_cost(p, c) for c in decode_counts(p, moved)]
    [68.0, 68.0]
    """

    def __init__(self, problem: GridProblem, counts: np.ndarray):
        self.problem, self.counts = problem, counts
        L = len(problem.weights)
        # group and domain indices in the narrowest integer type: the moves' cells are
        # gathered and compared in bulk, and narrow cells halve to quarter the memory traffic
        small = np.int16 if len(problem.free) <= np.iinfo(np.int16).max else np.int64
        self.maps = level_maps(problem.domains[:L - 1], len(problem.free)).astype(small)   # (L, K)
        self.order = group_order(problem).astype(small)
        self.layouts = np.stack(decode_counts(problem, counts)).astype(small)     # (2, R, C): plain, snake
        R = problem.rows
        pairs = np.arange(R)                                                      # pair a: rows a, (a + 1) % R
        self.pair_w = np.where(pairs < R - 1, problem.w_col, problem.w_wrap) if R > 1 else np.zeros(R, int)
        self.ring = np.stack([[_ring(m[x]) for m in self.maps] for x in self.layouts])      # (2, L, R)
        below = self.layouts[:, (pairs + 1) % R]
        self.hop = np.stack([[(m[x] != m[y]).sum(axis=-1) for m in self.maps]
                             for x, y in zip(self.layouts, below)])                         # (2, L, R)
        self.units = (problem.w_row * self.ring.sum(axis=2)
                      + (self.pair_w * self.hop).sum(axis=2))                               # (2, L)

    def costs(self, moves: np.ndarray) -> np.ndarray:
        """``cost[2, N]``: the tier cost (units) of the plain and snake decodings of each of
        ``moves[N, R, K]``, each at most two rows away from ``counts``."""
        p, R = self.problem, self.problem.rows
        N = moves.shape[0]
        changed = (moves != self.counts).any(axis=2)                                # (N, R)
        r = np.argmax(changed, axis=1)
        q = R - 1 - np.argmax(changed[:, ::-1], axis=1)
        rows = np.stack([r, q], axis=1)                                             # (N, 2)
        picked = moves[np.arange(N)[:, None], rows][:, :, self.order]               # (N, 2, K)
        plain = np.repeat(np.tile(self.order, 2 * N), picked.ravel()).reshape(N, 2, -1)
        window = np.stack([(r - 1) % R, r, (r + 1) % R, (q - 1) % R, q, (q + 1) % R], axis=1)  # (N, 6)
        # pairs (r-1, r), (r, r+1), (q-1, q), (q, q+1), each named by its upper row: the
        # window's rows 0-1, 1-2, 3-4, 4-5
        slots = window[:, [0, 1, 3, 4]]                                             # (N, 4)
        fresh = np.ones((N, 4), dtype=bool) if R > 1 else np.zeros((N, 4), dtype=bool)
        for j in range(1, 4):
            fresh[:, j] &= (slots[:, :j] != slots[:, j:j + 1]).all(axis=1)
        one = (q == r)[:, None]                                                     # (N, 1)
        out = np.zeros((2, N))
        for x in range(2):
            new = plain.copy()
            if x == 1:                                                              # the snake: odd rows reversed
                odd = (rows % 2 == 1)
                new[odd] = new[odd][:, ::-1]
            cells = self._rows(x, window, rows, new)                                # (N, 6, C)
            for lv, (w, m) in enumerate(zip(p.weights, self.maps)):
                seen, laid = (cells, new) if lv == 0 else (m[cells], m[new])          # level 0: the groups
                ring = _ring(laid)                                             # (N, 2)
                ring_delta = np.where(one, ring[:, :1], ring.sum(axis=1, keepdims=True))[:, 0]
                before = self.ring[x, lv]                                          # (R,)
                ring_delta = ring_delta - np.where(one[:, 0], before[r], before[r] + before[q])
                crossed = seen[:, [0, 1, 3, 4]] != seen[:, [1, 2, 4, 5]]            # (N, 4, C)
                hops = crossed.sum(axis=2) - self.hop[x, lv, slots]                # (N, 4)
                units = (self.units[x, lv] + p.w_row * ring_delta
                         + (np.where(fresh, hops, 0) * self.pair_w[slots]).sum(axis=1))
                out[x] = out[x] + w * units.astype(np.float64)
        return out

    def _rows(self, x: int, index: np.ndarray, rows: np.ndarray, new: np.ndarray) -> np.ndarray:
        """``cells[N, S, C]``: the layout-``x`` row at each ``index[N, S]`` after each move
        (``new[N, 2, C]`` at its changed ``rows[N, 2]``, the current row elsewhere), gathered
        at once from the current rows followed by the new ones."""
        N, R = index.shape[0], self.problem.rows
        source = np.concatenate([self.layouts[x], new.reshape(2 * N, -1)])         # (R + 2N, C)
        at = index.copy()
        for j in (1, 0):                                                          # row r wins where r == q
            at = np.where(index == rows[:, j:j + 1], R + 2 * np.arange(N)[:, None] + j, at)
        return source[at]


def _ring(cells: np.ndarray) -> np.ndarray:
    """Ring crossings of each row of ``cells[..., C]`` (cyclic; 0 for rows of one host)."""
    if cells.shape[-1] < 2:
        return np.zeros(cells.shape[:-1], dtype=np.int64)
    return (cells[..., 1:] != cells[..., :-1]).sum(axis=-1) + (cells[..., 0] != cells[..., -1])
