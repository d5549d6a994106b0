"""A CP-SAT count model of every tier at once: a better plan and a valid joint bound.

The interval model of :mod:`rankmap.placement.cpsat_model` sees only the ToR level. On a
fabric of several tiers the plan is a trade between levels (a ring whole in one pod may
need more ToR groups than the fewest), so this model counts, for each row (DP ring) and
each domain of every level, the hosts it holds there, and charges every level at once:

- ``x[R][K]`` hosts of row r in ToR group g; ``y_l[r][d] = sum_{g in d} x[r][g]`` at level l;
- ``P_l[r][d]`` whether row r uses domain d; a ring over k >= 2 domains of a level
  crosses that level at least k times (a cyclic sequence of k distinct labels changes
  label at least k times), and exactly k when each domain's hosts are one arc;
- ``m_l[p][d]`` pipeline hops of row pair p kept inside domain d: at most
  ``min(y_l[r][d], y_l[q][d])``, at least the hops the sub-domains of d keep (a hop inside
  a ToR group is inside its pod), and at most ``(pieces - used) * F_d / 2`` over the rows
  (the cut of :meth:`rankmap.placement.cpsat_model.CountVars.limit_matches`, per level).

Every placement gives a solution of this model whose objective is at most its tier cost
(set every variable to the placement's own counts, presences and kept hops), so CP-SAT's
proven bound (``CpSolver.BestObjectiveBound``) is a lower bound on the tier cost of every
placement, even when the search stops at its deterministic time limit. Tier weights are
scaled by :data:`WEIGHT_SCALE` and floored, so the bound divided by the scale stays valid.

A solution is decoded (:func:`decode_counts`) by laying each row's hosts in one global
order of the groups (top-level domain first), so that every domain of every level is one
arc of the ring and consecutive rows share columns where they share domains.

References
----------
OR-Tools CP-SAT solver documentation, developers.google.com/optimization/cp/cp_solver
(``AddHint``, ``BestObjectiveBound``, deterministic time limits); Arnold (arXiv 2509.15940):
minimise the pods a DP or PP group spans; MegaScale (NSDI 2024): three-layer Clos.
"""

from __future__ import annotations

import math

import numpy as np
from ortools.sat.python import cp_model

from rankmap.placement.cpsat_model import CountVars, solver_params
from rankmap.placement.grid_problem import GridProblem

__all__ = ["WEIGHT_SCALE", "TierModel", "tier_model_solve", "decode_counts", "group_order", "piece_crossings"]

# Tier weights are floats; CP-SAT needs integers. floor(w * scale) / scale <= w keeps the
# bound valid and loses at most 1/scale of a weight.
WEIGHT_SCALE = 1000


class TierModel:
    """The joint count model of ``problem`` (see the module docstring).

    Attributes
    ----------
    model : CpModel
    x : list of list of IntVar
        ``x[R][K]``: hosts of row r in ToR group g.
    objective : LinearExpr
        Tier cost times :data:`WEIGHT_SCALE` (weights floored).
    """

    def __init__(self, problem: GridProblem):
        R, C, K = problem.rows, problem.cols, len(problem.free)
        self.problem, self.model = problem, cp_model.CpModel()
        m = self.model
        self.x = [[m.NewIntVar(0, min(C, problem.free[g]), f"x{r}_{g}") for g in range(K)] for r in range(R)]
        for r in range(R):
            m.Add(sum(self.x[r]) == C)
        for g in range(K):
            m.Add(sum(self.x[r][g] for r in range(R)) <= problem.free[g])
        self.pairs = CountVars.pairs(problem)
        self.objective, below = 0, None
        for level, weight in enumerate(problem.weights):
            dom = np.arange(K) if level == 0 else np.asarray(problem.domains[level - 1])
            kept = self._level(dom, below)
            scaled = math.floor(weight * WEIGHT_SCALE)
            self.objective += scaled * self._level_cost(kept)
            below = (dom, kept)
        m.Minimize(self.objective)

    def _level(self, dom: np.ndarray, below) -> list:
        """Presence, crossings and kept hops of one level; returns ``kept[P][D]``."""
        p, m, R, C = self.problem, self.model, self.problem.rows, self.problem.cols
        D = int(dom.max()) + 1
        F = np.bincount(dom, weights=np.asarray(p.free), minlength=D).astype(int)
        y = [[sum(self.x[r][g] for g in np.nonzero(dom == d)[0]) for d in range(D)] for r in range(R)]
        pres = [[m.NewBoolVar("") for _ in range(D)] for _ in range(R)]
        for r in range(R):
            for d in range(D):
                m.Add(y[r][d] <= int(min(C, F[d])) * pres[r][d])
                m.Add(y[r][d] >= pres[r][d])
        self._crossings = [self._ring(pres[r], C > F.max()) for r in range(R)]
        if below is not None:  # subs[d]: the sub-domains inside domain d, once for every pair
            sub_dom, sub_kept = below
            subs = [sorted(set(sub_dom[dom == d].tolist())) for d in range(D)]
        kept = []
        for i, (r, q) in enumerate(self.pairs):
            row = [m.NewIntVar(0, int(min(C, F[d])), "") for d in range(D)]
            for d in range(D):
                m.Add(row[d] <= y[r][d])
                m.Add(row[d] <= y[q][d])
                if below is not None:  # a hop kept inside a sub-domain is kept inside d
                    m.Add(row[d] >= sum(sub_kept[i][e] for e in subs[d]))
            kept.append(row)
        self._cut(pres, y, kept, F)
        return kept

    def _ring(self, pres_r: list, must_split: bool):
        """Ring crossings of one row at one level: k domains -> k (k >= 2), one -> 0."""
        k = sum(pres_r)
        if must_split:
            return k
        single = self.model.NewBoolVar("")
        self.model.Add(k == 1).OnlyEnforceIf(single)
        self.model.Add(k >= 2).OnlyEnforceIf(single.Not())
        return k - single

    def _cut(self, pres: list, y: list, kept: list, F: np.ndarray) -> None:
        """Valid cut per domain: j pieces of a domain keep at most (j - 1) F / 2 hops."""
        m, R = self.model, self.problem.rows
        if R < 2:
            return
        for d in range(len(F)):
            used = m.NewBoolVar("")
            for r in range(R):
                m.Add(used >= pres[r][d])
            m.Add(int(F[d]) * used >= sum(y[r][d] for r in range(R)))
            pieces = sum(pres[r][d] for r in range(R))
            chain = [row[d] for (r, q), row in zip(self.pairs, kept) if q == r + 1]
            m.Add(2 * sum(chain) <= int(F[d]) * (pieces - used))

    def _level_cost(self, kept: list):
        """``w_row * crossings + w_col * hops leaving + w_wrap * wrap hops leaving`` (units)."""
        p, C = self.problem, self.problem.cols
        cost = p.w_row * sum(self._crossings) if C > 1 else 0
        for (r, q), row in zip(self.pairs, kept):
            cost += (p.w_col if q == r + 1 else p.w_wrap) * (C - sum(row))
        return cost

    def hint(self, cells: np.ndarray) -> None:
        """Start from placement ``cells[R, C]`` (its counts per row and group)."""
        K = len(self.problem.free)
        for r, row in enumerate(cells):
            for g, n in enumerate(np.bincount(row, minlength=K)):
                self.model.AddHint(self.x[r][g], int(n))


def group_order(problem: GridProblem) -> np.ndarray:
    """``order[K]``: ToR groups sorted by their domains, top level first, then index."""
    K = len(problem.free)
    keys = [np.arange(K)] + [np.asarray(d) for d in problem.domains]
    return np.lexsort(keys)


def piece_crossings(order, levels: list) -> tuple:
    """How many times a ring of pieces, one per group of ``order``, changes domain (cyclically)
    at each level (``levels[L][K]``: each group's domain), in the order of ``levels``.

    Examples
    --------
    >>> piece_crossings((0, 1, 2, 3), [np.array([0, 1, 0, 1])]), piece_crossings((0, 2, 1, 3), [np.array([0, 1, 0, 1])])
    ((4,), (2,))
    """
    order = list(order)
    return tuple(int((lv[order] != np.roll(lv[order], 1)).sum()) for lv in levels)


# The problem of the latest decode, its group order and that order repeated per row count: a
# count search decodes thousands of count matrices of one problem (a cache of one, by identity).
_last_order: list = [None, None, {}]


def _order_of(problem: GridProblem, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`group_order` of ``problem``, and it repeated ``rows`` times (``[rows * K]``),
    computed once while the same problem is decoded."""
    if _last_order[0] is not problem:
        order = group_order(problem)
        order.flags.writeable = False
        _last_order[:] = [problem, order, {}]
    order, tiled = _last_order[1], _last_order[2]
    if rows not in tiled:
        tiled[rows] = np.tile(order, rows)
        tiled[rows].flags.writeable = False
    return order, tiled[rows]


def decode_counts(problem: GridProblem, counts: np.ndarray) -> list:
    """Placements from ``counts[R, K]``: each row's hosts laid in the global group order
    (:func:`group_order`), and the same with every other row reversed (a snake), so that
    every domain is one arc of each ring and consecutive rows meet in shared domains.

    Examples
    --------
    >>> p = GridProblem(2, 3, (3, 3), 10, 1, domains=((0, 0),), weights=(1.0, 1.0))
    >>> decode_counts(p, np.array([[2, 1], [1, 2]]))[0].tolist()
    [[0, 0, 1], [0, 1, 1]]
    """
    out = []
    R = counts.shape[0]
    order, tiled = _order_of(problem, R)
    plain = np.repeat(tiled, np.asarray(counts)[:, order].ravel()).reshape(R, -1)
    plain = plain.astype(np.int64, copy=False)
    snake = plain.copy()
    snake[1::2] = snake[1::2, ::-1]
    out.extend((plain, snake))
    return out


def tier_model_solve(problem: GridProblem, hint: np.ndarray | None, time_limit_s: float, seed: int = 0,
                     workers: int = 1) -> tuple[list, float]:
    """Solve the joint model within a deterministic budget.

    Parameters
    ----------
    problem : GridProblem
        With ``domains`` and ``weights`` (any number of levels).
    hint : ndarray, optional
        ``hint[R, C]``: a feasible placement to start from.
    time_limit_s : float
        CP-SAT deterministic time budget.
    seed, workers : int
        CP-SAT's random seed and worker count.

    Returns
    -------
    (list of ndarray, float)
        Decoded placements of the best solution found (empty if none), and the proven
        lower bound on the tier cost (units) of every placement.
    """
    tm = TierModel(problem)
    if hint is not None:
        tm.hint(hint)
    solver = solver_params(time_limit_s, seed, workers)
    status = solver.Solve(tm.model)
    bound = max(0.0, solver.BestObjectiveBound()) / WEIGHT_SCALE
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return [], bound
    counts = np.array([[solver.Value(v) for v in row] for row in tm.x], dtype=np.int64)
    return decode_counts(problem, counts), bound
