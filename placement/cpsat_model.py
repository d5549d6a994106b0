"""CP-SAT placement of the host grid onto ToR groups: build, hint, solve, decode.

Hosts inside a ToR group are interchangeable, so the model works on counts per (stage,
ToR group), which keeps it small at any cluster size; the cost it minimises is
:func:`rankmap.placement.grid_problem.grid_cost`.

A ring over k ToR groups crosses the spine at least k times (k >= 2) and exactly k
times when each group's hosts are one contiguous arc of the ring. The model places
each (stage, group) as one interval of columns (CP-SAT optional intervals and
NoOverlap per row), so rings cross exactly k times and pipeline hops stay inside a
group where the intervals of consecutive stages overlap.

Symmetry: placements that differ only in where an absent interval sits, or among several
optima, are the same plan; the model fixes absent intervals at column 0 and
:func:`_canonical` picks one optimum by a fixed tie-break, each with a comment saying
why. The other constraints are the model or valid cuts (:meth:`CountVars.limit_matches`).

The structure follows the OR-Tools CP-SAT samples (read data -> greedy solution ->
build model -> add the greedy solution as a hint -> solve -> decode), one function each:
:func:`build_model`, :func:`add_hint`, :func:`solve_model`, :func:`decode_cells`, and
:func:`solve_grid` calling them in that order. The variables both this model and the
relaxation of :mod:`rankmap.placement.lower_bounds` use are :class:`CountVars`.

References
----------
OR-Tools CP-SAT solver documentation, developers.google.com/optimization/cp/cp_solver
(``NewOptionalIntervalVar``, ``AddNoOverlap``, ``AddHint``, deterministic time limits).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from rankmap.fileio import keep_signal_handlers
from rankmap.placement.grid_problem import GridPins, GridProblem, GridSolution, grid_cost
from rankmap.placement.status import SolverStatus

__all__ = ["CountVars", "IntervalModel", "wall_clock_limit", "wall_clock_capped", "solver_progress", "solver_params", "build_model", "add_hint", "solve_model",
           "decode_cells",
           "solve_grid"]


class _Solver(cp_model.CpSolver):
    """CpSolver whose Solve puts the process's signal handlers back afterwards: CP-SAT catches
    SIGINT while it runs and leaves it at the default, so a later Ctrl-C would kill the run
    without cleaning up (:func:`rankmap.fileio.keep_signal_handlers`)."""

    def Solve(self, model, solution_callback=None):  # noqa: N802 (CP-SAT's name)
        report = _PROGRESS.get()
        if report is not None and solution_callback is None:
            solution_callback = _Reporter(report)
        with keep_signal_handlers():
            return super().solve(model, solution_callback)


class _Reporter(cp_model.CpSolverSolutionCallback):
    """Tells ``report(objective, bound)`` of every solution CP-SAT finds (model units); a
    callback only reads, so the search and its result are unchanged."""

    def __init__(self, report):
        super().__init__()
        self._report = report

    def on_solution_callback(self) -> None:
        self._report(self.ObjectiveValue(), self.BestObjectiveBound())


_PROGRESS: ContextVar = ContextVar("rankmap_solver_progress", default=None)


@contextmanager
def solver_progress(report):
    """Inside this block every CP-SAT solve calls ``report(objective, bound)`` at each solution
    it finds (for a progress display: the gap is ``(objective - bound) / objective``)."""
    token = _PROGRESS.set(report)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


_WALL_DEADLINE: ContextVar[float | None] = ContextVar("rankmap_wall_deadline", default=None)


@contextmanager
def wall_clock_limit(seconds: float | None):
    """Inside this block every CP-SAT solve stops by ``seconds`` of wall-clock time from now
    (CP-SAT's ``max_time_in_seconds``), on top of its deterministic budget. When the cap
    binds, results depend on machine speed and load; None: no cap."""
    token = _WALL_DEADLINE.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _WALL_DEADLINE.reset(token)


def wall_clock_capped() -> bool:
    """Whether solves run under a :func:`wall_clock_limit` now (their results then depend on
    machine speed and load, so they are not for remembering)."""
    return _WALL_DEADLINE.get() is not None


def solver_params(time_limit_s: float, seed: int, workers: int) -> cp_model.CpSolver:
    """A CP-SAT solver with a deterministic budget of ``time_limit_s`` (roughly seconds of one
    core), seeded, with ``workers`` interleaved workers (and the wall-clock cap of an enclosing
    :func:`wall_clock_limit`)."""
    solver = _Solver()
    p = solver.parameters
    # A deterministic time budget (not wall time) keeps results identical across runs
    # and machine load; several workers run interleaved, which is also deterministic.
    p.max_deterministic_time = time_limit_s
    p.max_time_in_seconds = 20 * time_limit_s
    deadline = _WALL_DEADLINE.get()
    if deadline is not None:
        p.max_time_in_seconds = min(p.max_time_in_seconds, max(0.01, deadline - time.monotonic()))
    p.random_seed = seed
    p.num_workers = workers
    p.interleave_search = workers > 1
    return solver


class CountVars:
    """Variables shared by the interval model and the relaxation.

    Attributes
    ----------
    pres : list of list of BoolVar
        ``pres[R][K]``: ToR group g holds hosts of row r.
    x : list of list of IntVar
        ``x[R][K]``: hosts of row r in group g.
    crossings : list of LinearExpr
        ``crossings[R]``: ring crossings of row r.
    """

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
        self.crossings = [self._row_crossings(model, problem, r) for r in range(R)]

    def _row_crossings(self, model: cp_model.CpModel, problem: GridProblem, r: int):
        k = sum(self.pres[r])
        if problem.cols > max(problem.free, default=0):  # no group holds a whole row: k >= 2 crossings
            return k
        single = model.NewBoolVar(f"single{r}")
        model.Add(k == 1).OnlyEnforceIf(single)
        return k - single  # k groups >= 2 -> k crossings, one group -> 0

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


@dataclass
class IntervalModel:
    """The built interval model: the CP-SAT model, its variables and its objective.

    ``start[R][K]`` and ``end[R][K]`` are the column interval of group g in row r (empty,
    at column 0, when the group is absent from the row).
    """

    problem: GridProblem
    model: cp_model.CpModel
    counts: CountVars
    start: list
    end: list
    objective: cp_model.LinearExpr


def build_model(problem: GridProblem, pins: GridPins | None = None, primary: str = "bytes") -> IntervalModel:
    """The interval model of ``problem``: counts, one interval per (row, group), hops kept
    inside groups, pins, and the objective (minimised).

    Parameters
    ----------
    problem : GridProblem
    pins : GridPins, optional
        Rows and cells that must lie in given ToR groups.
    primary : str
        "bytes" (cross-ToR cost) or "spread" (first the most ToR groups any row spans,
        then cost).

    Returns
    -------
    IntervalModel
    """
    model = cp_model.CpModel()
    counts = CountVars(model, problem)
    start, end = _add_intervals(model, problem, counts)
    matched = _add_overlaps(model, problem, counts, start, end)
    counts.limit_matches(model, problem, matched)
    _add_pins(model, problem, counts, start, end, pins or GridPins())
    objective = counts.objective(problem, matched)
    if primary == "spread":
        objective = _spread_first(model, problem, counts, objective)
    model.Minimize(objective)
    return IntervalModel(problem, model, counts, start, end, objective)


def _add_intervals(model: cp_model.CpModel, problem: GridProblem, counts: CountVars) -> tuple[list, list]:
    """``start[R][K]``, ``end[R][K]``: one optional interval per (row, group), none overlapping
    in a row, so each group's hosts are one contiguous arc of the row's ring."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    start = [[model.NewIntVar(0, C, f"s{r}_{g}") for g in range(K)] for r in range(R)]
    end = [[model.NewIntVar(0, C, f"e{r}_{g}") for g in range(K)] for r in range(R)]
    for r in range(R):
        intervals = []
        for g in range(K):
            intervals.append(model.NewOptionalIntervalVar(start[r][g], counts.x[r][g], end[r][g],
                                                          counts.pres[r][g], f"i{r}_{g}"))
            # Symmetry breaking: an absent interval could sit at any of C + 1 positions, each
            # an equivalent copy of the same placement; fixing it at column 0 removes them.
            model.Add(start[r][g] == 0).OnlyEnforceIf(counts.pres[r][g].Not())
        model.AddNoOverlap(intervals)
    return start, end


def _add_overlaps(model: cp_model.CpModel, problem: GridProblem, counts: CountVars, start, end) -> list:
    """``matched[P][K]``: pipeline hops kept inside group g between the rows of each pair
    (:meth:`CountVars.pairs`), at most the overlap of the two rows' intervals of g."""
    C, K = problem.cols, len(problem.free)
    matched = []
    for r, q in counts.pairs(problem):
        row = []
        for g in range(K):
            ov = model.NewIntVar(0, C, f"ov{r}_{q}_{g}")
            model.Add(ov <= counts.x[r][g])
            model.Add(ov <= counts.x[q][g])
            model.Add(ov <= end[r][g] - start[q][g])
            model.Add(ov <= end[q][g] - start[r][g])
            row.append(ov)
        matched.append(row)
    return matched


def _add_pins(model: cp_model.CpModel, problem: GridProblem, counts: CountVars, start, end, pins: GridPins) -> None:
    """Whole rows in a group (stage pins), then single cells inside a group's interval (rank pins)."""
    for r, g in pins.rows.items():
        model.Add(counts.x[r][g] == problem.cols)
    for (r, c), g in pins.cells.items():
        model.Add(counts.pres[r][g] == 1)
        model.Add(start[r][g] <= c)
        model.Add(end[r][g] >= c + 1)


def _spread_first(model: cp_model.CpModel, problem: GridProblem, counts: CountVars, objective):
    """``spread * big + objective``: the most groups any row spans first, then the cost
    (``big`` exceeds every possible cost, so the sum is lexicographic)."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    spread = model.NewIntVar(0, K, "spread")
    for r in range(R):
        model.Add(spread >= sum(counts.pres[r]))
    big = problem.w_row * R * K + (problem.w_col + problem.w_wrap) * R * C + 1
    return spread * big + objective


def add_hint(im: IntervalModel, hint: np.ndarray) -> None:
    """Give CP-SAT ``hint[R, C]`` as its starting solution (``CpModel.AddHint``).

    Each group's cells in a row must be contiguous (the constructive layouts are), so the
    hint is an interval placement: presence, count, and the first column as the start.
    """
    R, C = hint.shape
    v = im.counts
    for r in range(R):
        for g in range(len(v.x[r])):
            cols = np.nonzero(hint[r] == g)[0]
            im.model.AddHint(v.pres[r][g], bool(cols.size))
            im.model.AddHint(v.x[r][g], int(cols.size))
            s = int(cols[0]) if cols.size else 0
            im.model.AddHint(im.start[r][g], s)
            im.model.AddHint(im.end[r][g], s + int(cols.size))


def solve_model(im: IntervalModel, time_limit_s: float, seed: int, workers: int,
                canonical: bool) -> tuple[cp_model.CpSolver, int]:
    """Solve; with ``canonical``, re-solve an optimum for the canonical one (:func:`_canonical`).

    Returns
    -------
    (CpSolver, int)
        The solver holding the solution, and the first solve's CP-SAT status code.
    """
    solver = solver_params(time_limit_s, seed, workers)
    status = solver.Solve(im.model)
    if status == cp_model.OPTIMAL and canonical:
        solver = _canonical(im, solver, time_limit_s, workers)
    return solver, status


def _canonical(im: IntervalModel, solver: cp_model.CpSolver, time_limit_s: float, workers: int) -> cp_model.CpSolver:
    """Among the optimal placements, take the one minimising fixed pseudo-random weights of
    the counts and positions, so that a proven plan does not depend on the seed or the
    number of workers (ties between distinct optima are then vanishingly rare).

    Returns the solver holding the chosen solution: the tie-break's if it proved its own
    optimum, else the first one (still optimal, then possibly seed-dependent)."""
    model, v, start = im.model, im.counts, im.start
    best = int(round(solver.ObjectiveValue()))
    values = [[(solver.Value(x), solver.Value(s)) for x, s in zip(xs, ss)] for xs, ss in zip(v.x, start)]
    # Symmetry breaking among optima: groups of equal size and mirrored column orders give
    # many optimal placements; a fixed tie-break objective picks the same one on every run.
    model.Add(im.objective == best)
    rng = np.random.default_rng(20240229)
    weights = rng.integers(1, 1000, size=(len(v.x), len(v.x[0]), 2)).tolist()
    model.Minimize(sum(w[0] * x + w[1] * s for xs, ss, ws in zip(v.x, start, weights) for x, s, w in zip(xs, ss, ws)))
    model.ClearHints()
    for xs, ss, vals in zip(v.x, start, values):
        for x, s, (xv, sv) in zip(xs, ss, vals):
            model.AddHint(x, xv)
            model.AddHint(s, sv)
    tie = solver_params(time_limit_s, 0, workers)
    return tie if tie.Solve(model) == cp_model.OPTIMAL else solver


def decode_cells(im: IntervalModel, solver: cp_model.CpSolver) -> np.ndarray:
    """``cells[R, C]``: each present (row, group) interval filled with the group's index."""
    R, C, K = im.problem.rows, im.problem.cols, len(im.problem.free)
    v = im.counts
    cells = np.empty((R, C), dtype=np.int64)
    for r in range(R):
        for g in range(K):
            if solver.Value(v.pres[r][g]):
                s = solver.Value(im.start[r][g])
                cells[r, s:s + solver.Value(v.x[r][g])] = g
    return cells


def solve_grid(problem: GridProblem, hint: np.ndarray | None, time_limit_s: float = 10.0, seed: int = 0,
               workers: int = 1, pins: GridPins | None = None, primary: str = "bytes") -> GridSolution | None:
    """Best interval placement found within the budget, never worse than a valid ``hint``.

    Parameters
    ----------
    problem : GridProblem
    hint : ndarray or None
        ``hint[R, C]``: a feasible assignment (within capacities and pins) whose groups are
        contiguous in every row; the solver's starting solution.
    time_limit_s : float
        CP-SAT deterministic time budget (roughly seconds of one core).
    seed : int
        CP-SAT's random seed.
    workers : int
        CP-SAT workers (interleaved, deterministic).
    pins : GridPins, optional
        Rows and cells that must lie in given ToR groups.
    primary : str
        "bytes" (cross-ToR cost) or "spread" (first the most ToR groups any row spans,
        then cost).

    Returns
    -------
    GridSolution or None
        ``status`` is CP-SAT's (OPTIMAL, FEASIBLE) or HINT if the solver found nothing
        better than the hint; None if pins leave no solution within the budget.
    """
    pins = pins or GridPins()
    im = build_model(problem, pins, primary)
    hint_cost = grid_cost(problem, hint) if hint is not None else None
    if hint is not None:
        add_hint(im, hint)
    t0 = time.perf_counter()
    solver, status = solve_model(im, time_limit_s, seed, workers, canonical=not pins)
    elapsed = time.perf_counter() - t0
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None if hint is None else GridSolution(hint, hint_cost, SolverStatus.HINT, elapsed)
    cells = decode_cells(im, solver)
    cost = grid_cost(problem, cells)
    if hint_cost is not None and cost > hint_cost and not pins and primary == "bytes":
        return GridSolution(hint, hint_cost, SolverStatus.HINT, elapsed)  # a guard on decoding; not expected
    return GridSolution(cells, cost, SolverStatus(solver.StatusName(status)), elapsed)
