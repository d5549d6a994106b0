"""Local search on single cells of a grid placement, scored on every tier from each cell's neighbours.

A placement ``cells[R, C]`` (:mod:`rankmap.placement.grid_problem`) costs, per tier level,
one ``w_row`` per ring crossing between row neighbours (cyclic), one ``w_col`` per pipeline
hop between column neighbours and one ``w_wrap`` per wrap hop (last row to first),
weighted by the tier's weight (:func:`rankmap.placement.tier_search.tier_cost`). Changing
one cell's ToR group changes only the terms of the edges at that cell, so the gain of
every change is read from the cell's (at most four) neighbours, for all cells at once with
numpy:

- move: a cell takes the ToR group of one of its neighbours, where that group has a free
  host left (the group's hosts in use stay within ``free``);
- swap: two cells trade ToR groups (counts unchanged), each taking the group the other
  leaves; pairs are formed among the cells that gain most from the exchange, and an
  exchange between neighbours is scored exactly (the edge between them does not change).

What it smooths are the ragged edges that the layouts leave where the stages of a band end
at different columns: a column whose stages alternate between two pods costs a hop at each
change, where stacking the same cells costs one (a swap); a cell cut off from its group's
block next to a group with a free host (a move). Steps that come from the counts (a pod of
190 hosts over 4 stages cannot end in one column) stay: they need the counts changed
(:mod:`rankmap.placement.count_search`).

Each sweep takes the improving changes, best first, whose cells and neighbours no earlier
change of the same sweep touched (so every gain is exact when applied), then scores the
grid again. The number of sweeps is a count, not a clock: the same input gives the same
output. The result is never costlier than the start (:func:`improve` checks the whole
cost and keeps the cheaper).

References
----------
Local search by 1-exchange (moves) and 2-exchange (swaps) neighbourhoods for graph
partitioning: B. W. Kernighan and S. Lin, "An efficient heuristic procedure for
partitioning graphs", Bell System Technical Journal 49 (1970); C. M. Fiduccia and
R. M. Mattheyses, "A linear-time heuristic for improving network partitions", DAC 1982.
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_search import level_maps, tier_cost

__all__ = ["improve", "move_gains", "LOCAL_SEARCH_SWEEPS"]

# Sweeps at most per call (each scores every cell once): the search stops earlier when a
# sweep changes nothing.
LOCAL_SEARCH_SWEEPS = 60
# Directions of a cell's neighbours: left, right (ring), up, down (pipeline).
_DIRS = ((0, -1), (0, 1), (-1, 0), (1, 0))


def _edge_weights(problem: GridProblem) -> np.ndarray:
    """``w[4, R]``: cost units of the edge from a cell of row r to its neighbour in each of
    :data:`_DIRS` (0 where there is none; the wrap hop joins the last row and the first)."""
    R, C = problem.rows, problem.cols
    w = np.zeros((4, R))
    if C > 1:
        w[0], w[1] = problem.w_row, problem.w_row
    if R > 1:
        w[2, 1:], w[3, :-1] = problem.w_col, problem.w_col
        w[2, 0], w[3, -1] = problem.w_wrap, problem.w_wrap
    return w


def _neighbours(cells: np.ndarray) -> np.ndarray:
    """``nb[4, R, C]``: the ToR group of each cell's neighbour in each of :data:`_DIRS`
    (rows and columns cyclic; edges that do not exist have weight 0)."""
    return np.stack([np.roll(cells, (-dr, -dc), axis=(0, 1)) for dr, dc in _DIRS])


def _local_cost(maps: np.ndarray, weights: np.ndarray, ew: np.ndarray, nb: np.ndarray,
                label: np.ndarray) -> np.ndarray:
    """``cost[...]``: weighted cost of the edges at each cell were it in ToR group ``label[...]``
    (``nb[4, ...]`` its neighbours' groups, ``ew[4, R, 1]`` the edge weights broadcast)."""
    total = np.zeros(label.shape)
    for lv in range(maps.shape[0]):
        m = maps[lv]
        differ = m[nb] != m[label][None]                     # (4, ...)
        total += weights[lv] * (differ * ew).sum(axis=0)
    return total


def move_gains(problem: GridProblem, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gain (cost units) of moving each cell to each neighbour's ToR group, neighbours unchanged.

    Parameters
    ----------
    problem : GridProblem
    cells : ndarray
        ``cells[R, C]``: ToR group index per cell.

    Returns
    -------
    (ndarray, ndarray)
        ``gain[4, R, C]`` (positive: cheaper) and ``target[4, R, C]``, the group of the
        neighbour in each of :data:`_DIRS`, rows and columns taken cyclically (gain 0
        where it is the cell's own group).

    Examples
    --------
    One row of four over two groups, ``0 1 0 1``: any cell taking its left neighbour's
    group saves two of the four ring crossings.

    >>> p = GridProblem(1, 4, (4, 4), 10, 1)
    >>> gain, target = move_gains(p, np.array([[0, 1, 0, 1]]))
    >>> gain[0, 0].tolist(), target[0, 0].tolist()
    ([20.0, 20.0, 20.0, 20.0], [1, 0, 1, 0])
    """
    maps = level_maps(problem.domains, len(problem.free))
    weights = np.asarray(problem.weights, dtype=float)
    ew = _edge_weights(problem)[:, :, None]                   # (4, R, 1)
    nb = _neighbours(cells)                                   # (4, R, C)
    here = _local_cost(maps, weights, ew, nb, cells)          # (R, C)
    gain = np.stack([here - _local_cost(maps, weights, ew, nb, nb[d]) for d in range(4)])
    gain[nb == cells[None]] = 0.0
    return gain, nb


def _pair_weight(problem: GridProblem, x: tuple, y: tuple, a: int, b: int, maps: np.ndarray,
                 weights: np.ndarray) -> float:
    """Weighted cost of the edges joining cells ``x`` and ``y`` (groups ``a`` and ``b``): the
    part of two one-cell gains that a swap of neighbours does not earn."""
    R, C = problem.rows, problem.cols
    ew = _edge_weights(problem)
    differ = sum(w for w, m in zip(weights, maps) if m[a] != m[b])
    total = 0.0
    for d, (dr, dc) in enumerate(_DIRS):
        if ((x[0] + dr) % R, (x[1] + dc) % C) == y:
            total += ew[d, x[0]]
    return float(total * differ)


def _sweep(problem: GridProblem, cells: np.ndarray, free: np.ndarray) -> int:
    """One sweep of moves then swaps on ``cells`` (in place); the number of changes made."""
    R, C = cells.shape
    gain, target = move_gains(problem, cells)
    maps, weights = level_maps(problem.domains, len(problem.free)), np.asarray(problem.weights, dtype=float)
    spare = free - np.bincount(cells.ravel(), minlength=free.size)
    locked = np.zeros((R, C), dtype=bool)  # cells changed in this sweep and their neighbours

    def lock(r: int, c: int) -> None:
        for dr, dc in ((0, 0),) + _DIRS:
            locked[(r + dr) % R, (c + dc) % C] = True

    def is_locked(r: int, c: int) -> bool:
        return bool(locked[r, c])

    changes = 0
    d, r, c = np.nonzero(gain > 1e-9)
    order = np.lexsort((c, r, d, -gain[d, r, c]))
    for i in order:                                            # moves into spare hosts, best first
        rr, cc, g = int(r[i]), int(c[i]), int(target[d[i], r[i], c[i]])
        if spare[g] > 0 and not is_locked(rr, cc):
            spare[g] -= 1
            spare[cells[rr, cc]] += 1
            cells[rr, cc] = g
            lock(rr, cc)
            changes += 1
    # swaps: for each pair of groups (a, b), cells of a that gain by taking b against cells of
    # b that gain by taking a, best with best
    best = {}
    d, r, c = np.nonzero(gain != 0.0)
    for i in np.lexsort((c, r, d, -gain[d, r, c])):
        rr, cc = int(r[i]), int(c[i])
        key = (int(cells[rr, cc]), int(target[d[i], rr, cc]))
        best.setdefault(key, {}).setdefault((rr, cc), float(gain[d[i], rr, cc]))  # best gain per cell
    for (a, b) in sorted(best):
        if a > b or (b, a) not in best:
            continue
        xs = sorted(best[(a, b)].items(), key=lambda t: (-t[1], t[0]))
        ys = sorted(best[(b, a)].items(), key=lambda t: (-t[1], t[0]))
        used = set()
        for x, gx in xs:
            if gx <= 0 or is_locked(*x) or cells[x] != a:
                continue
            for y, gy in ys:
                if gx + gy <= 1e-9:
                    break
                if y in used or is_locked(*y) or cells[y] != b:
                    continue
                if gx + gy - 2 * _pair_weight(problem, x, y, a, b, maps, weights) <= 1e-9:
                    continue
                cells[x], cells[y] = b, a
                lock(*x)
                lock(*y)
                used.add(y)
                changes += 1
                break
    return changes


def improve(problem: GridProblem, cells: np.ndarray, max_sweeps: int = LOCAL_SEARCH_SWEEPS) -> np.ndarray:
    """``cells`` improved by moves and swaps of single cells (module docstring).

    Parameters
    ----------
    problem : GridProblem
    cells : ndarray
        ``cells[R, C]``: a placement within ``problem.free``.
    max_sweeps : int
        Sweeps at most (a count: the result does not depend on the machine's speed).

    Returns
    -------
    ndarray
        A new ``cells[R, C]`` within ``problem.free`` whose tier cost is at most that of
        ``cells`` (``cells`` itself, copied, when nothing helps).

    Examples
    --------
    Two stages alternating between two pods in one column: stacking them saves two hops.

    >>> p = GridProblem(4, 2, (4, 4), 10, 1, domains=((0, 1),), weights=(1.0, 1.0))
    >>> start = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
    >>> improve(p, start).tolist()
    [[0, 0], [0, 0], [1, 1], [1, 1]]
    """
    free = np.asarray(problem.free, dtype=np.int64)
    best = cells.copy()
    work = cells.copy()
    for _ in range(max_sweeps):
        if not _sweep(problem, work, free):
            break
    if tier_cost(problem, work) < tier_cost(problem, best):
        best = work
    return best
