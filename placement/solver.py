"""CP-SAT placement of a pipeline x data-parallel host grid onto ToR groups.

The job's hosts form a grid: row ``r`` holds the hosts of pipeline stage ``r`` (its DP
rings run along the row, in column order, closing from the last column to the first);
column ``c`` holds one pipeline (its send/recv hops run down the column). Hosts inside a
ToR group are interchangeable, so a placement is a ToR group per cell, and the model
works on counts per (stage, ToR group), which keeps it small at any cluster size.

Cost (bytes per iteration crossing ToR groups, in integer units)::

    w_row * sum_r ring_crossings(r)  +  w_col * sum_r mismatches(r, r+1)  +  w_wrap * mismatches(R-1, 0)

(the last term is the hop from the last stage back to the first that interleaved
pipelines with virtual stages make).

A ring over k ToR groups crosses the spine at least k times (k >= 2) and exactly k
times when each group's hosts are one contiguous arc of the ring. The model places
each (stage, group) as one interval of columns (CP-SAT optional intervals and
NoOverlap per row), so rings cross exactly k times and pipeline hops stay inside a
group where the intervals of consecutive stages overlap.

A second, smaller model drops the column positions (matched pipeline hops <=
min of the two counts): a relaxation of every placement, not only interval ones, whose
proven bound is the lower bound the planner reports the gap against.

The structure follows the OR-Tools CP-SAT samples: greedy solution -> model -> hint ->
solve -> decode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

__all__ = ["GridProblem", "GridSolution", "grid_cost", "grid_uplinks", "solve_grid", "grid_lower_bound"]


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
    """

    rows: int
    cols: int
    free: tuple
    w_row: int
    w_col: int
    w_wrap: int = 0


@dataclass(frozen=True)
class GridSolution:
    """``cells[R, C]``: ToR group index per grid cell, its cost, and the solver's report."""

    cells: np.ndarray
    cost: int
    status: str
    solve_time_s: float


def grid_cost(problem: GridProblem, cells: np.ndarray) -> int:
    """Exact cost of any assignment ``cells[R, C]`` (ring crossings counted cyclically)."""
    cost = 0
    if problem.cols > 1:
        crossings = (cells != np.roll(cells, -1, axis=1)).sum()
        cost += problem.w_row * int(crossings)
    if problem.rows > 1:
        cost += problem.w_col * int((cells[:-1] != cells[1:]).sum())
        cost += problem.w_wrap * int((cells[-1] != cells[0]).sum())
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


def _params(time_limit_s: float, seed: int, workers: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    p = solver.parameters
    # A deterministic time budget (not wall time) keeps results identical across runs
    # and machine load; several workers run interleaved, which is also deterministic.
    p.max_deterministic_time = time_limit_s
    p.max_time_in_seconds = 20 * time_limit_s
    p.random_seed = seed
    p.num_workers = workers
    p.interleave_search = workers > 1
    return solver


class _Counts:
    """Variables shared by both models: presence, counts, ring crossings per row."""

    def __init__(self, model: cp_model.CpModel, problem: GridProblem):
        R, C, K = problem.rows, problem.cols, len(problem.free)
        self.pres = [[model.NewBoolVar(f"p{r}_{g}") for g in range(K)] for r in range(R)]
        self.x = [[model.NewIntVar(0, min(C, problem.free[g]), f"x{r}_{g}") for g in range(K)] for r in range(R)]
        for r in range(R):
            for g in range(K):
                # Linear form of "x > 0 iff present": keeps the LP relaxation tight
                # (a row of C hosts needs at least C / max(free) groups).
                model.Add(self.x[r][g] >= self.pres[r][g])
                model.Add(self.x[r][g] <= min(C, problem.free[g]) * self.pres[r][g])
            model.Add(sum(self.x[r]) == C)
        for g in range(K):
            model.Add(sum(self.x[r][g] for r in range(R)) <= problem.free[g])
        self.crossings = []
        fits_one = C <= max(problem.free, default=0)
        for r in range(R):
            k = sum(self.pres[r])
            if not fits_one:  # no group holds a whole row: every row crosses k >= 2 times
                self.crossings.append(k)
                continue
            single = model.NewBoolVar(f"single{r}")
            model.Add(k == 1).OnlyEnforceIf(single)
            self.crossings.append(k - single)  # k groups >= 2 -> k crossings, one group -> 0

    def limit_matches(self, model: cp_model.CpModel, problem: GridProblem, matched) -> None:
        """Cut valid for every placement: a group cut into j pieces keeps at most
        (j - 1) * free/2 pipeline hops inside itself (each hop needs the group in two
        consecutive rows, and sum_i min(p_i, p_i+1) <= sum_i p_i - max_i p_i <= (j-1) f/2).
        ``used`` is at least the fraction of the group's hosts in use, so a group the job
        must use completely counts as one piece in the LP relaxation too."""
        R, K = problem.rows, len(problem.free)
        for g in range(K):
            f = problem.free[g]
            if R < 2 or f == 0:
                continue
            used = model.NewBoolVar(f"used{g}")
            for r in range(R):
                model.Add(used >= self.pres[r][g])
            model.Add(f * used >= sum(self.x[r][g] for r in range(R)))
            pieces = sum(self.pres[r][g] for r in range(R))
            model.Add(2 * sum(matched[r][g] for r in range(R - 1)) <= f * (pieces - used))
            if len(matched) > R - 1:  # with the wrap the rows form a cycle: sum of mins <= f
                model.Add(sum(m[g] for m in matched) <= f * (pieces - used))

    def objective(self, problem: GridProblem, matched) -> cp_model.LinearExpr:
        """``matched[R-1][K]`` hops kept inside groups between rows r, r+1, then (with
        ``w_wrap``) one more row of them for the wrap from the last row to the first."""
        ring = problem.w_row * sum(self.crossings) if problem.cols > 1 else 0
        if problem.rows < 2:
            return ring
        chain = problem.w_col * sum(problem.cols - sum(m) for m in matched[:problem.rows - 1])
        wrap = problem.w_wrap * sum(problem.cols - sum(m) for m in matched[problem.rows - 1:])
        return ring + chain + wrap

    @staticmethod
    def pairs(problem: GridProblem) -> list[tuple[int, int]]:
        """Row pairs whose hops count: (r, r+1), and (R-1, 0) for the interleaved wrap."""
        R = problem.rows
        out = [(r, r + 1) for r in range(R - 1)]
        return out + ([(R - 1, 0)] if problem.w_wrap and R > 1 else [])


def solve_grid(problem: GridProblem, hint: np.ndarray | None, time_limit_s: float = 10.0, seed: int = 0,
               workers: int = 1, pins: dict | None = None, primary: str = "bytes") -> GridSolution | None:
    """Best interval placement found within the budget, never worse than a valid ``hint``.

    Parameters
    ----------
    problem : GridProblem
    hint : ndarray or None
        ``hint[R, C]``: a feasible assignment (within capacities and pins) whose groups are
        contiguous in every row; the solver's starting solution.
    time_limit_s : float
        CP-SAT deterministic time budget (roughly seconds of one core).
    pins : dict, optional
        ``{(row, col): group}`` cells that must lie in a ToR group, and ``{row: group}``
        rows that must lie wholly in one.
    primary : str
        "bytes" (cross-ToR cost) or "spread" (first the most ToR groups any row spans,
        then cost).

    Returns
    -------
    GridSolution or None
        ``status`` is CP-SAT's (OPTIMAL, FEASIBLE) or "HINT" if the solver found nothing
        better than the hint; None if pins leave no solution within the budget.
    """
    pins = pins or {}
    R, C, K = problem.rows, problem.cols, len(problem.free)
    model = cp_model.CpModel()
    v = _Counts(model, problem)
    start = [[model.NewIntVar(0, C, f"s{r}_{g}") for g in range(K)] for r in range(R)]
    end = [[model.NewIntVar(0, C, f"e{r}_{g}") for g in range(K)] for r in range(R)]
    for r in range(R):
        intervals = []
        for g in range(K):
            intervals.append(model.NewOptionalIntervalVar(start[r][g], v.x[r][g], end[r][g], v.pres[r][g], f"i{r}_{g}"))
            # An absent interval gets a fixed position, so it adds no symmetric copies.
            model.Add(start[r][g] == 0).OnlyEnforceIf(v.pres[r][g].Not())
        model.AddNoOverlap(intervals)
    matched = []
    for r, q in v.pairs(problem):
        row = []
        for g in range(K):
            ov = model.NewIntVar(0, C, f"ov{r}_{q}_{g}")
            model.Add(ov <= v.x[r][g])
            model.Add(ov <= v.x[q][g])
            model.Add(ov <= end[r][g] - start[q][g])
            model.Add(ov <= end[q][g] - start[r][g])
            row.append(ov)
        matched.append(row)
    v.limit_matches(model, problem, matched)
    for where, g in pins.items():
        if isinstance(where, tuple):  # cell (row, col) inside group g's interval of that row
            r, c = where
            model.Add(v.pres[r][g] == 1)
            model.Add(start[r][g] <= c)
            model.Add(end[r][g] >= c + 1)
        else:  # the whole row in group g
            model.Add(v.x[where][g] == C)
    objective = v.objective(problem, matched)
    if primary == "spread":
        spread = model.NewIntVar(0, K, "spread")
        for r in range(R):
            model.Add(spread >= sum(v.pres[r]))
        bound = problem.w_row * R * K + (problem.w_col + problem.w_wrap) * R * C + 1
        objective = spread * bound + objective
    model.Minimize(objective)
    hint_cost = grid_cost(problem, hint) if hint is not None else None
    if hint is not None:
        _add_hint(model, v, start, end, hint)
    solver = _params(time_limit_s, seed, workers)
    t0 = time.perf_counter()
    status = solver.Solve(model)
    if status == cp_model.OPTIMAL and not pins:
        solver = _canonical(model, solver, objective, v, start, time_limit_s, workers)
    elapsed = time.perf_counter() - t0
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None if hint is None else GridSolution(hint, hint_cost, "HINT", elapsed)
    cells = np.empty((R, C), dtype=np.int64)
    for r in range(R):
        for g in range(K):
            if solver.Value(v.pres[r][g]):
                s = solver.Value(start[r][g])
                cells[r, s:s + solver.Value(v.x[r][g])] = g
    cost = grid_cost(problem, cells)
    if hint_cost is not None and cost > hint_cost and not pins and primary == "bytes":
        return GridSolution(hint, hint_cost, "HINT", elapsed)  # a guard on decoding; not expected
    return GridSolution(cells, cost, solver.StatusName(status), elapsed)


def _canonical(model, solver, objective, v: _Counts, start, time_limit_s: float, workers: int):
    """Among the optimal placements, take the one minimising fixed pseudo-random weights of
    the counts and positions, so that a proven plan does not depend on the seed or the
    number of workers (ties between distinct optima are then vanishingly rare).

    Returns the solver holding the chosen solution: the tie-break's if it proved its own
    optimum, else the first one (still optimal, then possibly seed-dependent)."""
    best = int(round(solver.ObjectiveValue()))
    values = [[(solver.Value(x), solver.Value(s)) for x, s in zip(xs, ss)] for xs, ss in zip(v.x, start)]
    model.Add(objective == best)
    rng = np.random.default_rng(20240229)
    weights = rng.integers(1, 1000, size=(len(v.x), len(v.x[0]), 2)).tolist()
    model.Minimize(sum(w[0] * x + w[1] * s for xs, ss, ws in zip(v.x, start, weights) for x, s, w in zip(xs, ss, ws)))
    model.ClearHints()
    for xs, ss, vals in zip(v.x, start, values):
        for x, s, (xv, sv) in zip(xs, ss, vals):
            model.AddHint(x, xv)
            model.AddHint(s, sv)
    tie = _params(time_limit_s, 0, workers)
    return tie if tie.Solve(model) == cp_model.OPTIMAL else solver


def _add_hint(model, v: _Counts, start, end, hint: np.ndarray) -> None:
    R, C = hint.shape
    for r in range(R):
        for g in range(len(v.x[r])):
            cols = np.nonzero(hint[r] == g)[0]
            model.AddHint(v.pres[r][g], bool(cols.size))
            model.AddHint(v.x[r][g], int(cols.size))
            s = int(cols[0]) if cols.size else 0
            model.AddHint(start[r][g], s)
            model.AddHint(end[r][g], s + int(cols.size))


def grid_lower_bound(problem: GridProblem, time_limit_s: float = 5.0, seed: int = 0,
                     workers: int = 1, hint: np.ndarray | None = None) -> tuple[int, bool]:
    """A lower bound on the cost of every placement of ``problem``.

    Relaxation: a row that uses k >= 2 groups crosses at least k times; of the hops
    between rows r and r+1, at most ``sum_g min(x[r,g], x[r+1,g])`` stay inside a group.

    A placement ``hint[R, C]`` gives the search a start; when the relaxation's bound meets
    it, the search stops at once.

    Returns
    -------
    (int, bool)
        The proven bound (integer units) and whether it is the relaxation's optimum.
    """
    R, K = problem.rows, len(problem.free)
    model = cp_model.CpModel()
    v = _Counts(model, problem)
    matched = []
    for r, q in v.pairs(problem):
        row = []
        for g in range(K):
            m = model.NewIntVar(0, problem.cols, f"m{r}_{q}_{g}")
            model.Add(m <= v.x[r][g])
            model.Add(m <= v.x[q][g])
            row.append(m)
        matched.append(row)
    v.limit_matches(model, problem, matched)
    model.Minimize(v.objective(problem, matched))
    if hint is not None:
        counts = np.stack([np.bincount(row, minlength=K) for row in hint])  # counts[R, K]
        for r in range(R):
            for g in range(K):
                model.AddHint(v.x[r][g], int(counts[r, g]))
                model.AddHint(v.pres[r][g], bool(counts[r, g]))
        for i, (r, q) in enumerate(v.pairs(problem)):
            for g in range(K):
                model.AddHint(matched[i][g], int(min(counts[r, g], counts[q, g])))
    solver = _params(time_limit_s, seed, workers)
    status = solver.Solve(model)
    if status == cp_model.INFEASIBLE:
        raise ValueError("grid problem is infeasible")
    return int(np.floor(solver.BestObjectiveBound() + 1e-9)), status == cp_model.OPTIMAL
