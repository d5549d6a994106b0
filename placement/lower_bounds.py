"""Lower bounds on the cross-ToR cost of every placement: analytic, and a CP-SAT relaxation.

Both hold for every placement of the grid (not only those the search can produce), so
the gap the planner reports is real; the search keeps the larger.

Analytic bound, from group sizes alone. Notation as in
:mod:`rankmap.placement.grid_problem`: R rows (stages) of C hosts, ``free[K]`` hosts per ToR group,
``w_row`` per ring crossing, ``w_col`` per pipeline hop between groups, H = (R-1) C hops.

When no group can hold a whole row (C > max free), every row crosses its ring once per
(row, group) piece, so with ``j_g`` pieces of group g and ``M_g`` hops kept inside g::

    cost = w_row * sum_g j_g + w_col * (H - sum_g M_g)

A group cut into j pieces keeps at most ``f_g (j-1)/j`` hops inside itself (the hops
need the group in two consecutive rows: sum_i min(p_i, p_i+1) <= f - max_i p_i).
So each used group contributes at least ``h_g = min_j (w_row j - w_col f_g (j-1)/j)``,
and at least ``n_min`` groups are used (the fewest whose free hosts cover R*C):

    cost >= w_col * H + (sum of the n_min smallest h_g) + (any other negative h_g)

Pieces beyond one per group (E of them) can keep at most ``E * max_free / 2`` hops inside
groups (``f (j-1)/j <= f (j-1)/2``), while every row needs at least ceil(C / max free)
pieces, so also::

    cost >= min_E  w_row * max(n_min + E, R ceil(C / max free)) + w_col * max(0, H - E max_free / 2)

The analytic bound is the larger of the two.

Relaxation bound (:func:`relaxation_lower_bound`): the CP-SAT model of
:mod:`rankmap.placement.cpsat_model` without column positions. A row that uses k >= 2
groups crosses at least k times; of the hops between rows r and r+1, at most
``sum_g min(x[r,g], x[r+1,g])`` stay inside a group. CP-SAT's proven objective bound
(``CpSolver.BestObjectiveBound``) is a lower bound even when the search stops early.

References
----------
OR-Tools CP-SAT solver documentation, developers.google.com/optimization/cp/cp_solver.
"""

from __future__ import annotations

import math

import numpy as np
from ortools.sat.python import cp_model

from rankmap.placement.cpsat_model import CountVars, solver_params
from rankmap.placement.grid_problem import GridProblem

__all__ = ["analytic_lower_bound", "band_lower_bound", "relaxation_lower_bound", "build_relaxation", "add_relaxation_hint"]


def analytic_lower_bound(rows: int, cols: int, free: tuple, w_row: int, w_col: int, w_wrap: int = 0) -> int:
    """Lower bound (integer cost units) on ``w_row * ring crossings + w_col * hops crossing``.

    Returns 0 when a row fits in one group (then rows may cross nothing at all). With
    ``w_wrap`` (interleaved pipelines: C more hops from the last row back to the first), a
    group in j >= 2 pieces also keeps at most f/2 wrap hops (min of two pieces), and each
    extra piece keeps at most f_max/2 hops of each kind.

    Examples
    --------
    8 rows of 144 from 24 groups of 48 hosts, DP-heavy: 3 groups per row, every hop crossing.

    >>> analytic_lower_bound(8, 144, (48,) * 24, 100, 1)
    3408
    """
    f = np.asarray([x for x in free if x > 0], dtype=np.int64)
    if f.size == 0 or cols <= 1 or cols <= f.max():
        return 0
    hops = (rows - 1) * cols
    base = w_col * hops + (w_wrap * cols if rows > 1 else 0)
    j = np.arange(1, rows + 1)[:, None]                        # j[J, 1] pieces
    saved = w_col * f[None, :] * (j - 1) / j + np.where(j >= 2, w_wrap * f[None, :] / 2, 0)
    h = (w_row * j - saved).min(axis=0)                        # h[K]
    n_min = int(np.searchsorted(np.cumsum(np.sort(f)[::-1]), rows * cols) + 1)
    h_sorted = np.sort(h)
    per_group = h_sorted[:n_min].sum() + h_sorted[n_min:][h_sorted[n_min:] < 0].sum()
    row_pieces = rows * math.ceil(cols / f.max())
    per_extra = (w_col + w_wrap) * f.max() / 2
    # the second bound is piecewise linear in E: its minimum is at a breakpoint
    extras = {0, max(0, row_pieces - n_min)}
    if per_extra > 0:
        extras |= {math.ceil(base / per_extra), math.floor(base / per_extra)}
    by_pieces = min(w_row * max(n_min + e, row_pieces) + max(0.0, base - e * per_extra) for e in extras)
    return int(math.floor(max(base + per_group, by_pieces)))


def band_lower_bound(rows: int, cols: int, free: tuple, w_row: int, w_col: int) -> int:
    """Lower bound (units) when the job cannot fit in one group, also when a row fits in one
    (deep pipelines: consecutive stages filling one group after another).

    Every placement partitions the grid (rows: DP rings; columns: pipeline chains) into
    the hosts of each group, and each crossing edge lies on the boundary of two parts, so
    ``cost >= sum_g boundary(a_g) / 2`` with ``a_g`` hosts in group g. A part of
    ``a < R*C`` hosts either has a full row and an empty row (then at least C hops leave
    it, 2C unless it holds all of row 0 or of row R-1 -- at most two such parts -- or
    C + 1 hops plus a partial row 0 or R-1), or every row partial (2 R ring crossings),
    or, with t partial rows and an empty one, ``2 t`` ring crossings and at least
    ``ceil(a / t)`` hops (likewise for the complement). With ``rho`` the least boundary per
    host over part sizes ``1..max free`` (middle parts) and ``b_end`` the least boundary
    of any part::

        cost >= (rho * max(0, R*C - 2 max free) + 2 b_end) / 2

    Returns 0 when one group holds the whole job.

    Examples
    --------
    96 stages of 8 hosts on groups of 64 (8 stages each): 11 boundaries of 8 hops, as
    consecutive stages filling one group after another give.

    >>> band_lower_bound(96, 8, (64,) * 12, 1000, 10)
    880
    """
    f = [x for x in free if x > 0]
    n = rows * cols
    if not f or max(f) >= n:
        return 0
    fmax = max(f)
    end = rho = math.inf
    for a in range(1, fmax + 1):
        b_end, b_mid = _part_boundary(rows, cols, a, w_row, w_col)
        end = min(end, b_end)
        rho = min(rho, b_mid / a)
    return int(math.floor((rho * max(0, n - 2 * fmax) + 2 * end) / 2 + 1e-9))


def _part_boundary(rows: int, cols: int, a: int, w_row: int, w_col: int) -> tuple[float, float]:
    """Least boundary (units) of a part of ``a`` hosts: (any part, a part holding neither
    row 0 nor row R-1 whole); see :func:`band_lower_bound`."""
    n, partial = rows * cols, []
    if a >= rows:
        partial.append(2 * rows * w_row)                          # every row partial
    if rows > 1:
        for size in (a, n - a):                                   # t partial rows, another row empty
            t_min = max(1, -(-size // max(1, cols - 1)))
            if t_min <= rows:
                partial.append(min(2 * t * w_row + w_col * -(-size // t) for t in range(t_min, rows + 1)))
    full_end = [cols * w_col] if rows > 1 and a >= cols else []  # a full row and an empty row
    full_mid = [min(2 * cols * w_col, (cols + 1) * w_col + 2 * w_row)] if full_end else []
    b_end = min(partial + full_end, default=2 * w_row)
    return b_end, min(partial + full_mid, default=b_end)


def build_relaxation(problem: GridProblem) -> tuple[cp_model.CpModel, CountVars, list]:
    """The relaxed model: counts per (row, group) and ``matched[P][K]`` hops kept inside
    groups, each at most the smaller of the two rows' counts; the cost is minimised.

    Returns
    -------
    (CpModel, CountVars, list)
        The model, its count variables, and ``matched``.
    """
    K = len(problem.free)
    model = cp_model.CpModel()
    v = CountVars(model, problem)
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
    return model, v, matched


def add_relaxation_hint(model: cp_model.CpModel, v: CountVars, matched: list, problem: GridProblem,
                        hint: np.ndarray) -> None:
    """Hint the counts of placement ``hint[R, C]`` (and the hops they keep inside groups)."""
    R, K = problem.rows, len(problem.free)
    counts = np.stack([np.bincount(row, minlength=K) for row in hint])  # counts[R, K]
    for r in range(R):
        for g in range(K):
            model.AddHint(v.x[r][g], int(counts[r, g]))
            model.AddHint(v.pres[r][g], bool(counts[r, g]))
    for i, (r, q) in enumerate(v.pairs(problem)):
        for g in range(K):
            model.AddHint(matched[i][g], int(min(counts[r, g], counts[q, g])))


def relaxation_lower_bound(problem: GridProblem, time_limit_s: float = 5.0, seed: int = 0,
                           workers: int = 1, hint: np.ndarray | None = None) -> tuple[int, bool]:
    """A lower bound on the cost of every placement of ``problem`` (see the module docstring).

    Parameters
    ----------
    problem : GridProblem
    time_limit_s : float
        CP-SAT deterministic time budget.
    seed, workers : int
        CP-SAT's random seed and worker count.
    hint : ndarray, optional
        A placement ``hint[R, C]`` to start from; when the relaxation's bound meets it,
        the search stops at once.

    Returns
    -------
    (int, bool)
        The proven bound (integer units) and whether it is the relaxation's optimum.

    Raises
    ------
    ValueError
        The problem has no placement at all (too few hosts).
    """
    model, v, matched = build_relaxation(problem)
    if hint is not None:
        add_relaxation_hint(model, v, matched, problem, hint)
    solver = solver_params(time_limit_s, seed, workers)
    status = solver.Solve(model)
    if status == cp_model.INFEASIBLE:
        raise ValueError("grid problem is infeasible")
    return int(np.floor(solver.BestObjectiveBound() + 1e-9)), status == cp_model.OPTIMAL
