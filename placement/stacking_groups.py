"""One pod of a given height, its ToR groups stacked in its columns: a bound for the stacking bound.

The Lagrangian part of :mod:`rankmap.placement.stacking_bound` needs, per pod d and height h,
a lower bound on ``Phi_d - sum_y pi_y n_y`` (``n_y`` the pod's columns of y cells, priced
``pi_y``) at every host count A. The pod boxes bound is loose for pods taller than their
best: four groups of ~47 hosts in 7 rows cannot all be 3 rows tall (a full column would meet
3 of them). This linear programme sees that, one level down from the pods' own stacking:

- the pod: ``c`` columns, ``n_y`` of them holding ``y <= h`` cells (``sum_y n_y = c``,
  ``sum_y y n_y = A``);
- each group g a mix ``mu_{g,x}`` of heights ``x <= min(h, free_g)`` (at most 1 in all: it
  may stay unused) with ``a_{g,x}`` hosts (``x mu`` to ``free_g mu``) over
  ``c_{g,x} >= a_{g,x} / x`` columns (at most c); the groups' hosts add up to A;
- the pod's c columns are paths from 0 whose steps are the heights of the groups they meet
  (a node past h counts as h): a column of y cells meets groups whose heights add up to y or
  more, so for every k the paths ending at k or beyond are at least the columns of k cells
  or more; steps of height x number at most ``sum_g c_{g,x}``;
- cost ``w1 (w_row h + w_col c) + w0 sum_{g,x} (w_row x mu_{g,x} + w_col c_{g,x}) - sum_y pi_y n_y``.

A placement of the pod over h rows gives a feasible point (each group at its own height, each
column's groups in any order) of cost at most ``Phi_d`` less its credits. The programme is
solved at ``A = cap``; its dual solution stays feasible at every A (only the right-hand side
moves), so ``value + slope (A - cap)``, slope the dual of ``A = cap``, is below its value at
every A (weak duality).

References
----------
Arc-flow formulation: Valerio de Carvalho, Annals of Operations Research 86 (1999); weak
duality of linear programmes: Chvatal, "Linear Programming" (1983), ch. 5.
"""

from __future__ import annotations

import functools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.lp_rows import LpRows

__all__ = ["group_stacking_lines"]

# Dual lines are lowered by this much (units of w_col) and this fraction against the solver's
# tolerances.
SLACK = 1e-4
# Pods solved together in one block-diagonal programme (fewer solver calls; more memory).
BATCH = 16


def group_stacking_lines(problem: GridProblem, items: list, prices: np.ndarray) -> list | None:
    """``[(value, slope), ...]`` per ``(groups, h)`` of ``items`` (a pod's free hosts per group,
    a height): ``value + slope (A - cap)`` (units) is below ``Phi_d - sum_y prices[y] n_y``
    (module docstring) of every placement of the pod over h rows with A hosts; None when
    the programme fails. ``prices[y]``: units per pod column of y cells (0 past its end)."""
    out: list = []
    for start in range(0, len(items), BATCH):
        lines = _batch(problem, items[start:start + BATCH], prices)
        if lines is None:
            return None
        out += lines
    return out


def _batch(problem: GridProblem, items: list, prices: np.ndarray) -> list | None:
    """:func:`group_stacking_lines` of a few items, solved as one block-diagonal programme (the
    blocks share no variable, so each block's part of an optimum is optimal for it, and its
    duals are its own)."""
    from scipy.optimize import linprog
    from scipy.sparse import block_diag

    scale = max(float(problem.w_col), 1e-12)                         # units of w_col, for the solver
    parts = [_block(problem, tuple(groups), h, prices, scale) for groups, h in items]
    res = linprog(np.concatenate([p[0] for p in parts]), A_ub=block_diag([p[1] for p in parts], format="csr"),
                  b_ub=np.concatenate([p[2] for p in parts]), A_eq=block_diag([p[3] for p in parts], format="csr"),
                  b_eq=np.concatenate([p[4] for p in parts]), method="highs")
    if res.status != 0:
        return None
    out, x0, e0 = [], 0, 0
    for (cost, _, _, a_eq, _, const), (groups, _) in zip(parts, items):
        n, m = cost.size, a_eq.shape[0]
        value = float(cost @ res.x[x0:x0 + n]) + const
        value -= SLACK + SLACK * abs(value) / 100
        out.append((value * scale, float(res.eqlin.marginals[e0 + m - 1]) * scale))
        x0, e0 = x0 + n, e0 + m
    return out


def _block(problem: GridProblem, groups: tuple, h: int, prices: np.ndarray, scale: float) -> tuple:
    """``(cost, A_ub, b_ub, A_eq, b_eq, const)`` of one pod's programme in units of ``w_col``
    (every variable non-negative); the last equality row is ``A = cap``. Only the costs of the
    pod's columns move with the prices: the rest is built once (:func:`_structure`)."""
    w_row, w_col = float(problem.w_row) / scale, float(problem.w_col) / scale
    base, n, a_ub, b_ub, a_eq, b_eq, const = _structure(groups, h, problem.weights[0], problem.weights[1], w_row, w_col)
    cost = base.copy()
    for y, j in n.items():
        cost[j] = -float(prices[y]) / scale if y < prices.size else 0.0
    return cost, a_ub, b_ub, a_eq, b_eq, const


@functools.lru_cache(maxsize=1024)
def _structure(groups: tuple, h: int, w0: float, w1: float, w_row: float, w_col: float) -> tuple:
    """``(cost, {y: index}, A_ub, b_ub, A_eq, b_eq, const)`` of :func:`_block` at zero prices
    (``w_row``, ``w_col`` in units of ``w_col``), with the index of each column count
    ``n_y``; remembered (the same pods and heights at every price), not to be changed."""
    from scipy.sparse import coo_matrix

    lp = LpRows()
    cost, ub, eq, b_ub, b_eq, var, add = lp.cost, lp.ub, lp.eq, lp.b_ub, lp.b_eq, lp.var, lp.add

    c, A = var(w1 * w_col), var(0.0)
    n = {y: var(0.0) for y in range(1, h + 1)}                                  # costs: the prices (_block)
    add(eq, b_eq, {**{v: 1.0 for v in n.values()}, c: -1.0}, 0.0)              # c columns
    add(eq, b_eq, {**{v: float(y) for y, v in n.items()}, A: -1.0}, 0.0)       # holding A cells
    hosts: dict = {A: -1.0}
    cols_at: dict = {}
    for f in groups:
        mix = {}
        for x in range(1, min(h, f) + 1):
            mu, a, cg = var(w0 * w_row * x), var(0.0), var(w0 * w_col)
            mix[mu] = 1.0
            hosts[a] = 1.0
            cols_at.setdefault(x, []).append(cg)
            add(ub, b_ub, {a: 1.0, mu: -float(f)}, 0.0)                        # a <= free mu
            add(ub, b_ub, {mu: float(x), a: -1.0}, 0.0)                        # a >= x mu
            add(ub, b_ub, {a: 1.0, cg: -float(x)}, 0.0)                        # c_g >= a / x
            add(ub, b_ub, {cg: 1.0, c: -1.0}, 0.0)                             # c_g <= c
        add(ub, b_ub, mix, 1.0)                                                # one height (mixed)
    add(eq, b_eq, hosts, 0.0)                                                  # the groups hold A
    steps = sorted(cols_at)
    flow = {(s, x): var(0.0) for s in range(h) for x in steps}                 # arcs s -> min(s + x, h)
    end = {s: var(0.0) for s in range(1, h + 1)}                               # paths ending at s
    add(eq, b_eq, {**{flow[0, x]: 1.0 for x in steps}, c: -1.0}, 0.0)          # c paths leave 0
    for node in range(1, h + 1):
        coefs: dict = {end[node]: -1.0}
        coefs.update({flow[node, x]: -1.0 for x in steps if node < h})
        for (s, x), j in flow.items():
            if min(s + x, h) == node:
                coefs[j] = coefs.get(j, 0.0) + 1.0
        add(eq, b_eq, coefs, 0.0)                                              # paths pass through or end
    for k in range(1, h + 1):                                                  # ends at k+ >= columns of k+ cells
        add(ub, b_ub, {**{end[s]: -1.0 for s in range(k, h + 1)}, **{n[y]: 1.0 for y in range(k, h + 1)}}, 0.0)
    for x in steps:
        coefs = {flow[s, x]: 1.0 for s in range(h)}
        coefs.update({cg: -1.0 for cg in cols_at[x]})
        add(ub, b_ub, coefs, 0.0)                                              # steps of x <= group columns
    add(eq, b_eq, {A: 1.0}, float(sum(groups)))                                # A = cap (its dual: the slope)
    m = len(cost)

    def matrix(entries: list, rows: int):
        r, j, v = zip(*entries) if entries else ((), (), ())
        return coo_matrix((v, (r, j)), shape=(rows, m)).tocsr()

    return (np.array(cost), n, matrix(ub, len(b_ub)), np.array(b_ub), matrix(eq, len(b_eq)), np.array(b_eq),
            w1 * w_row * h)
