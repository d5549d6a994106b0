"""The grid placement problem in cost units, and the exact cost of any cell placement.

The job's hosts form a grid (:mod:`rankmap.placement.host_grid`): row ``r`` holds the hosts
of pipeline stage ``r`` (its DP rings run along the row, in column order, closing from the
last column to the first); column ``c`` holds one pipeline (its send/recv hops run down
the column). Hosts inside a ToR group are interchangeable, so a placement is
``cells[R, C]``, a ToR group index per cell. Its cost (bytes per iteration crossing ToR
groups, in integer units)::

    w_row * sum_r ring_crossings(r)  +  w_col * sum_r mismatches(r, r+1)  +  w_wrap * mismatches(R-1, 0)

(the last term is the hop from the last stage back to the first that interleaved
pipelines with virtual stages make). This module holds no solver: it is what the
constructive layouts, the lower bounds and the CP-SAT model share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankmap.job.traffic import GroupTraffic
from rankmap.placement.status import SolverStatus

__all__ = ["GridProblem", "GridPins", "GridSolution", "grid_cost", "grid_uplinks", "scaled_problem", "span_problem",
           "expand_spans"]


@dataclass(frozen=True)
class GridProblem:
    """A placement problem on a rows x cols host grid.

    Attributes
    ----------
    rows, cols : int
        Pipeline stages spanning hosts (R) and hosts per stage (C).
    free : tuple of int
        ``free[K]``: usable hosts per ToR group.
    w_row : int
        Cost of one ring crossing between two hosts of a row (integer units).
    w_col : int
        Cost of one pipeline hop between two hosts of a column in different groups.
    w_wrap : int
        Cost of one hop from the last row back to the first (interleaved 1F1B), 0 without.
    domains : tuple of tuple of int
        ``domains[L-1][K]``: per level above the ToR groups that a job can cross (pods,
        ...), the domain index of each ToR group; empty on a flat fabric.
    weights : tuple of float
        ``weights[L]``: tier weights, level 0 (leaving a ToR group) first
        (:mod:`rankmap.placement.tier_weights`).
    """

    rows: int
    cols: int
    free: tuple
    w_row: int
    w_col: int
    w_wrap: int = 0
    domains: tuple = ()
    weights: tuple = (1.0,)


@dataclass(frozen=True)
class GridPins:
    """Cells and rows of the grid that must lie in a given ToR group (typed pins).

    Attributes
    ----------
    rows : dict of int to int
        ``{row: group}``: the whole row (pipeline stage) in ToR group index ``group``
        (from stage pins).
    cells : dict of (int, int) to int
        ``{(row, col): group}``: one cell in ToR group index ``group`` (from rank pins).

    Examples
    --------
    >>> pins = GridPins(rows={1: 2}, cells={(0, 3): 1})
    >>> bool(pins), bool(GridPins()), pins.holds(np.array([[0, 0, 0, 1], [2, 2, 2, 2]]))
    (True, False, True)
    """

    rows: dict = field(default_factory=dict)
    cells: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rows or self.cells)

    def holds(self, cells: np.ndarray) -> bool:
        """Whether ``cells[R, C]`` meets every pin."""
        return (all((cells[r] == g).all() for r, g in self.rows.items())
                and all(cells[rc] == g for rc, g in self.cells.items()))


@dataclass(frozen=True)
class GridSolution:
    """``cells[R, C]``: ToR group index per grid cell, its cost (units), the status, and the
    seconds CP-SAT took (0 when no solver ran)."""

    cells: np.ndarray
    cost: int
    status: SolverStatus
    solve_time_s: float


def grid_cost(problem: GridProblem, cells: np.ndarray) -> int:
    """Exact cost (integer units) of any assignment ``cells[R, C]`` (ring crossings counted
    cyclically).

    Examples
    --------
    Two rows of four over two groups: each row crosses twice, two of four hops cross.

    >>> grid_cost(GridProblem(2, 4, (4, 4), 10, 1), np.array([[0, 0, 1, 1], [0, 1, 1, 0]]))
    42
    """
    # Slices, not np.roll: the search scores hundreds of thousands of small grids, where each
    # numpy call's overhead is the cost (the counts are the same).
    cells = np.asarray(cells)
    cost = 0
    if problem.cols > 1:
        crossings = np.count_nonzero(cells[:, 1:] != cells[:, :-1]) + np.count_nonzero(cells[:, 0] != cells[:, -1])
        cost += problem.w_row * int(crossings)
    if problem.rows > 1:
        cost += problem.w_col * int(np.count_nonzero(cells[:-1] != cells[1:]))
        cost += problem.w_wrap * int(np.count_nonzero(cells[-1] != cells[0]))
    return cost


def grid_uplinks(problem: GridProblem, cells: np.ndarray) -> np.ndarray:
    """``load[K]``: cost units through each ToR group's uplinks (a crossing loads both ends)."""
    K = len(problem.free)
    load = np.zeros(K, dtype=np.int64)
    if problem.cols > 1:
        nxt = np.roll(cells, -1, axis=1)
        cross = cells != nxt
        load += problem.w_row * (np.bincount(cells[cross], minlength=K) + np.bincount(nxt[cross], minlength=K))
    if problem.rows > 1:
        for w, top, bottom in ((problem.w_col, cells[:-1], cells[1:]), (problem.w_wrap, cells[-1:], cells[:1])):
            cross = top != bottom
            load += w * (np.bincount(top[cross], minlength=K) + np.bincount(bottom[cross], minlength=K))
    return load


#: Cost units of the smaller of the DP and PP weights in :func:`scaled_problem`.
_UNITS_OF_SMALLER = 1_000_000


def scaled_problem(caps: tuple, rows: int, cols: int, traffic: dict[str, GroupTraffic],
                   edges: tuple[int, int, int]) -> tuple[GridProblem, float]:
    """The grid problem in integer cost units, and the unit in bytes.

    One ring crossing between two hosts of a row carries ``edges[0]`` DP ring edges (one per
    DP group on the host: ``gpn`` with one DP member per host and group, ``gpn / m`` when each
    host holds ``m`` consecutive members of every DP group); one pipeline hop between two hosts
    of a column carries ``edges[1]`` PP hops, one wrap hop ``edges[2]`` (see
    :func:`rankmap.placement.problem.edges_per_crossing`).

    Parameters
    ----------
    caps : tuple of int
        ``caps[K]``: hosts the job may use per ToR group.
    rows, cols : int
        The host grid's size.
    traffic : dict of str to GroupTraffic
        From :func:`rankmap.job.traffic.job_traffic` (``dp`` and ``pp`` are read).
    edges : tuple of int
        Rank-level DP ring edges per ring crossing, PP hops per pipeline hop and wrap hops per
        wrap hop between two hosts.

    Returns
    -------
    (GridProblem, float)
        The problem, and bytes per cost unit.
    """
    w_row = edges[0] * traffic["dp"].edge_bytes if cols > 1 else 0.0
    w_col = edges[1] * traffic["pp"].edge_bytes if rows > 1 else 0.0
    w_wrap = edges[2] * traffic["pp"].wrap_bytes if rows > 1 else 0.0
    positive = [w for w in (w_row, w_col) if w > 0]
    # Integer units for CP-SAT: the smaller weight becomes exactly 1e6 units (its float quotient
    # can read 999999.99..., which flooring would turn into a 1e-6 loss); the others are floored,
    # so bound * unit stays a valid lower bound in bytes.
    unit = min(positive) / 1e6 if positive else 1.0
    units = [_UNITS_OF_SMALLER if positive and w == min(positive) else int(w // unit) for w in (w_row, w_col, w_wrap)]
    return GridProblem(rows, cols, tuple(caps), *units), unit



def span_problem(problem: GridProblem, span: int) -> GridProblem | None:
    """The grid in units of ``span`` consecutive columns: the hosts one CP x EP group spans,
    kept whole under one ToR group. None if the columns do not divide or the groups cannot
    hold the spans whole.

    Examples
    --------
    >>> span_problem(GridProblem(2, 4, (5, 4), 10, 1), 2)
    GridProblem(rows=2, cols=2, free=(2, 2), w_row=10, w_col=2, w_wrap=0, domains=(), weights=(1.0,))
    """
    if problem.cols % span:
        return None
    caps = tuple(f // span for f in problem.free)
    if sum(caps) * span < problem.rows * problem.cols:
        return None
    return GridProblem(problem.rows, problem.cols // span, caps, problem.w_row, problem.w_col * span,
                       problem.w_wrap * span, problem.domains, problem.weights)


def expand_spans(cells: np.ndarray, span: int) -> np.ndarray:
    """Span cells ``[R, C/span]`` -> host cells ``[R, C]``."""
    return np.repeat(cells, span, axis=1)
