"""A joint bound on the ToR and pod tiers: the pods met by one column stack up to every stage.

Rings wider than any pod (``C`` above every pod's free hosts). Notation as in
:mod:`rankmap.placement.pod_box_bound`: any placement costs at least
``sum_d Phi_d - (w0 + w1) w_col C`` with, for pod d over ``r_d`` rows and ``c_d`` columns
holding ``A_d`` hosts::

    Phi_d = w1 (w_row r_d + w_col c_d) + w0 sum_{g in d} (w_row r_g + w_col c_g)

The pod bounds price each pod at its own best height. They cannot all take it: column j's R
cells lie in the pods it meets, ``y_dj <= r_d`` of them in pod d (one per row), and
``sum_d y_dj = R``. With pods of at most 6 rows each column meets 6 of them (36 rows for 32
stages), not 32 / 6; taller pods pay more at the ToR tier. This bound weighs the two.

Write ``Phi_d >= G_d(r_d, A_d) + w1 w_col c_d`` with ``G_d`` the pod boxes bound
(:func:`rankmap.placement.pod_box_bound.box_costs`) at pod weight 0 (everything but the
pod's columns, least over its widths) plus ``w1 w_row r_d``; heights are priced one by one up
to :data:`MAX_HEIGHT`, taller ones in ranges (at the range's least height, the groups' boxes
within its greatest; the pod's pieces up to its greatest).

- The linear programme (integrality dropped, so its least value is a lower bound): per pod
  a mix ``lambda_{d,h}`` over height classes (pods holding no more than the spare hosts may
  also stay empty), hosts ``A_{d,h}`` and ``n_{d,h,y}`` columns of y cells (``y <= h``,
  ``sum_y y n = A``, ``sum_y n = c``); ``G_d(h, .)`` enters by the lines of its lower convex
  hull over the host counts the pod can hold (every pod leaves at most the spare hosts
  unused), and at each pod's :data:`DETAILED` heights of least pod boxes bound also the
  groups' stacking without prices (below); ``sum A = R C``; columns as in the arc-flow model of cutting stock: C paths from
  0 to R whose steps are the pieces ``y`` of the pods met, steps of y at most ``sum n_{.,.,y}``.
  A placement gives a feasible point of cost at most its own.
- The Lagrangian bound: prices ``pi_y`` (the programme's duals of the step rows) credited to
  every pod column of y cells. Every column's pieces add up to R, so the credits sum to at
  least ``C U``, ``U`` the least ``sum pi`` over the ways of writing R as such pieces; each
  pod then costs at least its least ``G_d(h, A) + w1 w_col c`` less the most ``c`` whole
  columns of at most h cells holding A can earn (integer c, unlike the programme), and at
  its :data:`DETAILED` cheapest heights at least the groups' own stacking in its columns
  (:mod:`rankmap.placement.stacking_groups`: a 7-row pod of four groups of ~47 cannot have
  every group at its best 3 rows), added up over pods by a min-plus programme on their hosts
  (exact host counts). Valid for any prices: the programme's duals, and the same scaled by a
  counted line search (:func:`_best_scaled`; the duals over-price columns once integer
  column counts and the groups' stacking are priced), the largest taken.

The larger of the two, less ``(w0 + w1) w_col C``, is the bound. Levels above the pods add
nothing here.

On the 100,000-GPU deep-pipeline instances (pp 32) it adds little to the pod patterns bound
(25% busy: 8405.1 -> 8419.1 e6 units, 8418.0 at the duals themselves; 50%: 6985.3 -> 6988.65;
its linear programmes are the largest part of its CPU): even with the groups' stacking a
7-row pod costs only 1-2 units more than a 6-row one, so the relaxation stacks columns as
6 + 6 + 6 + 7 + 7 nearly free.

References
----------
Arc-flow formulation of cutting stock: Valerio de Carvalho, "Exact solution of bin-packing
problems using column generation and branch-and-bound", Annals of Operations Research 86
(1999); the configuration model: Gilmore and Gomory, "A linear programming approach to the
cutting-stock problem", Operations Research 9 (1961); Lagrangian relaxation: Fisher, "The
Lagrangian relaxation method for solving integer programming problems", Management Science
27 (1981); weak duality: Chvatal, "Linear Programming" (1983), ch. 5.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.lp_rows import LpRows, lower_hull
from rankmap.placement.perimeter_bound import least_total, pod_free_hosts
from rankmap.placement.pod_box_bound import MULTIPLIERS, box_costs
from rankmap.placement.stacking_groups import group_stacking_lines

__all__ = ["stacking_bound", "height_classes", "pod_height_costs", "MAX_HEIGHT", "MAX_PODS"]

# Heights up to this are priced one by one; taller pods in ranges (priced at the range's least
# height, stacked at its greatest).
MAX_HEIGHT = 12
# Per pod, the Lagrangian bound adds the groups' own stacking at this many of its cheapest heights
# (:mod:`rankmap.placement.stacking_groups`).
DETAILED = 4
# Above this many pods the bound is skipped (returns 0): the programme grows with pods x classes.
MAX_PODS = 128
# The counted line search on the programme's prices (:func:`_best_scaled`): the first factor after
# 1, then the next where it gained, or where it lost.
SCALES = (0.8, 0.6, 0.9)
# ... tried only where the first Lagrangian bound is within this fraction of the best bound known.
ROOM = 1e-3
# The programme's value is lowered by this fraction against the solver's tolerances.
SLACK = 1e-6
# The Lagrangian bound by this fraction against rounding (a tiling's optimum was met as 1440 + 2e-13).
ROUNDING = 1e-9


def height_classes(rows: int, cap: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]``: the height classes of a pod of ``cap`` free hosts on ``rows`` stages,
    one height each up to :data:`MAX_HEIGHT`, then ranges doubling in length.

    Examples
    --------
    >>> height_classes(32, 190)[-4:]
    [(11, 11), (12, 12), (13, 24), (25, 32)]
    """
    top = min(rows, cap)
    out = [(h, h) for h in range(1, min(top, MAX_HEIGHT) + 1)]
    lo = MAX_HEIGHT + 1
    while lo <= top:
        hi = min(top, max(lo, 2 * (lo - 1)))
        out.append((lo, hi))
        lo = hi + 1
    return out


def pod_height_costs(groups: tuple, problem: GridProblem) -> list[tuple[int, int, np.ndarray]]:
    """``[(lo, hi, G[cap + 1]), ...]`` per height class: ``G[A]``, a lower bound (units) on
    ``Phi_d - w1 w_col c_d`` (module docstring) of a pod of these groups over ``lo .. hi`` rows
    holding ``A`` hosts; inf where no such pod exists."""
    return _height_costs(tuple(sorted(int(f) for f in groups)), problem)


@functools.lru_cache(maxsize=512)
def _height_costs(groups: tuple, problem: GridProblem) -> list:
    """:func:`pod_height_costs`, remembered per pod shape and problem."""
    cap, w1, w_row = sum(groups), problem.weights[1], float(problem.w_row)
    tor = dataclasses.replace(problem, weights=(problem.weights[0], 0.0) + tuple(problem.weights[2:]))
    A = np.arange(cap + 1)
    out = []
    for lo, hi in height_classes(problem.rows, cap):
        if lo == hi:
            g = box_costs(list(groups), tor, lo)
        else:
            # zero multipliers: the groups' least boxes within hi rows, below those within any
            # fewer rows; a pod of fewer than hi hosts: nothing but its rows
            g = box_costs(list(groups), tor, hi, MULTIPLIERS[:1])
            g = np.where(A >= hi, g, np.where(A >= lo, 0.0, np.inf))
        out.append((lo, hi, np.where(np.isfinite(g), g + w1 * w_row * lo, np.inf)))
    return out


def _hull_lines(values: np.ndarray, lo: int, hi: int) -> list[tuple[float, float]]:
    """``(a, b)`` of the lower convex hull's edges of ``values[A]`` over finite ``A`` in
    ``lo .. hi`` (one point: a flat line); every ``a + b A`` is below ``values`` there."""
    at = lo + np.flatnonzero(np.isfinite(values[lo:hi + 1]))
    pts = list(zip(at.astype(float).tolist(), values[at].tolist()))
    hull = lower_hull(pts)                                            # Andrew's monotone chain
    if len(hull) <= 1:
        return [(hull[0][1], 0.0)] if hull else []
    lines = []
    for (a0, v0), (a1, v1) in zip(hull, hull[1:]):
        b = (v1 - v0) / (a1 - a0)
        lines.append((v0 - b * a0, b))
    return lines


def stacking_bound(problem: GridProblem, beat: float = 0.0) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs of
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.
    beat : float
        A bound (units) already known: the prices' line search (:func:`_best_scaled`) is
        skipped where the Lagrangian bound at the programme's own prices stays more than
        :data:`ROOM` below it (it has lifted the bound by ~0.01%). Tightness only: the value
        returned is a valid bound either way.

    Returns
    -------
    float
        The bound; 0 without pods, on one stage, when a pod can hold a whole row (``C`` at
        most its free hosts), when the hosts cannot hold the grid, above :data:`MAX_PODS`
        pods, or when the programme has no solution.

    Examples
    --------
    Three stages of 3 columns on five pods of one group of 2 hosts (w_row 1, w_col 3): a pod is
    best one column of two stages (2 w_row + w_col = 5 per tier, 10), but a column of three
    stages then meets two pods. The programme: 4.5 pods of two hosts, 1.5 of them lying flat
    (1 x 2: 14) so that the 6 pieces the 3 columns need exist: 30 + 21 = 51, less the columns'
    first domains (18): 33. The pod boxes see 30; the optimum is 34 (three upright pods, one
    flat, one of one host: 52).

    >>> p = GridProblem(3, 3, (2,) * 5, 1, 3, domains=((0, 1, 2, 3, 4),), weights=(1.0, 1.0))
    >>> round(stacking_bound(p), 3)
    33.0
    """
    R, C = problem.rows, problem.cols
    if not problem.domains or R < 2 or C < 2:
        return 0.0
    pods = [tuple(sorted(p)) for p in pod_free_hosts(problem)]
    caps = [sum(p) for p in pods]
    spare = sum(caps) - R * C
    if spare < 0 or max(caps) >= C or len(pods) > MAX_PODS:
        return 0.0
    out = _programme(problem, pods, caps, spare)
    if out is None:
        return 0.0
    value, prices = out
    first = (problem.weights[0] + problem.weights[1]) * float(problem.w_col) * C   # the columns' first domains
    value = max(value * (1 - SLACK), _best_scaled(problem, pods, caps, prices, beat * (1 - ROOM) + first))
    return max(0.0, value - first)


def _programme(problem: GridProblem, pods: list, caps: list, spare: int) -> tuple | None:
    """``(value, prices[Y + 1])``: the least value of the module docstring's linear programme
    (units) and the duals of its stacking rows (units per pod column of y cells); None when it
    has no solution."""
    # imported when first needed (~50 MB)
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    R, C = problem.rows, problem.cols
    scale = max(float(problem.w_col), 1e-12)                         # units of w_col, for the solver
    w1_col = problem.weights[1] * float(problem.w_col) / scale
    lp = LpRows()
    cost, ub, eq, b_ub, b_eq, var, add = lp.cost, lp.ub, lp.eq, lp.b_ub, lp.b_eq, lp.var, lp.add

    hosts: dict = {}
    cols_at: dict = {}                                               # cells y -> [pod columns of y cells]
    groups = _group_lines(problem, pods)
    for pod, cap in zip(pods, caps):
        mix: dict = {}
        if cap <= spare:
            mix[var(0.0)] = 1.0                                      # the pod left empty
        for lo, hi, g in pod_height_costs(pod, problem):
            a_lo = max(lo, cap - spare)
            lines = _hull_lines(g, a_lo, cap)
            if not lines:
                continue
            lam, a, c, t = var(0.0), var(0.0), var(w1_col), var(1.0 / scale)
            mix[lam] = 1.0
            hosts[a] = 1.0
            add(ub, b_ub, {a: 1.0, lam: -float(cap)}, 0.0)               # A <= cap lambda
            add(ub, b_ub, {lam: float(a_lo), a: -1.0}, 0.0)              # A >= a_lo lambda
            sizes = {y: var(0.0) for y in range(1, hi + 1)}                  # columns of y cells
            add(eq, b_eq, {**{n: 1.0 for n in sizes.values()}, c: -1.0}, 0.0)       # c columns
            add(eq, b_eq, {**{n: float(y) for y, n in sizes.items()}, a: -1.0}, 0.0)  # holding A cells
            for y, n in sizes.items():
                cols_at.setdefault(y, []).append(n)
            add(ub, b_ub, {c: 1.0, lam: -float(C)}, 0.0)                 # c <= C lambda
            for alpha, beta in lines:
                add(ub, b_ub, {lam: alpha, a: beta, t: -1.0}, 0.0)       # t >= alpha lambda + beta A
            if lo == hi and (pod, lo) in groups:                         # t + w1 w_col c >= the groups' line
                value, slope = groups[pod, lo]
                add(ub, b_ub, {lam: value - slope * cap, a: slope, c: -w1_col * scale, t: -1.0}, 0.0)
        if not mix:
            return None
        add(eq, b_eq, mix, 1.0)                                          # one height per pod (mixed)
    add(eq, b_eq, hosts, float(R * C))                                   # every cell in some pod
    sizes = sorted(cols_at)
    flow = {(s, y): var(0.0) for s in range(R) for y in sizes if s + y <= R}   # arcs s -> s + y
    add(eq, b_eq, {flow[0, y]: 1.0 for y in sizes if (0, y) in flow}, float(C))  # C columns leave 0
    for node in range(1, R):
        coefs: dict = {flow[node, y]: -1.0 for y in sizes if (node, y) in flow}
        for (s, y), j in flow.items():
            if s + y == node:
                coefs[j] = coefs.get(j, 0.0) + 1.0
        add(eq, b_eq, coefs, 0.0)                                        # paths pass through
    for y in sizes:
        coefs = {flow[s, y]: 1.0 for s in range(R) if (s, y) in flow}
        coefs.update({n: -1.0 for n in cols_at[y]})
        add(ub, b_ub, coefs, 0.0)                                        # steps of y <= pod columns of y cells
    n = len(cost)

    def matrix(entries: list, m: int):
        r, j, v = zip(*entries) if entries else ((), (), ())
        return coo_matrix((v, (r, j)), shape=(m, n)).tocsr()

    res = linprog(np.array(cost), A_ub=matrix(ub, len(b_ub)), b_ub=np.array(b_ub), A_eq=matrix(eq, len(b_eq)),
                  b_eq=np.array(b_eq), bounds=[(0, None)] * n, method="highs")
    if res.status != 0:
        return None
    prices = np.zeros(max(sizes) + 1)
    prices[sizes] = -res.ineqlin.marginals[-len(sizes):] * scale         # duals of the stacking rows
    return float(res.fun) * scale, prices


def _group_lines(problem: GridProblem, pods: list) -> dict:
    """``{(pod, h): (value, slope)}``: the groups' stacking without prices
    (:func:`rankmap.placement.stacking_groups.group_stacking_lines`) at each pod's
    :data:`DETAILED` heights (2 or more) of least pod boxes bound at its free hosts and
    ``cap / h`` columns."""
    w1_col = problem.weights[1] * float(problem.w_col)
    items = []
    for pod in sorted(set(pods)):
        cap = sum(pod)
        least = sorted((float(g[cap]) + w1_col * cap / lo, lo) for lo, hi, g in pod_height_costs(pod, problem)
                       if lo == hi and lo >= 2 and np.isfinite(g[cap]))
        items += [(pod, h) for _, h in least[:DETAILED]]
    lines = group_stacking_lines(problem, items, np.zeros(1)) or []
    return dict(zip(items, lines))


def _best_scaled(problem: GridProblem, pods: list, caps: list, prices: np.ndarray, floor: float = 0.0) -> float:
    """The largest Lagrangian bound (units, 0 where there is none) over the programme's prices
    scaled by the factors of a counted line search: 1 and 0.8, then 0.6 where 0.8 gained, 0.9
    where it did not (:data:`SCALES`). Scaling by k only moves the prices off the line
    ``pi_1 y``, which cancels (every column's pieces add up to R, the pods' hosts to R C); the
    programme's duals over-price the pods' columns once integer column counts and the groups'
    stacking are priced too (deep 25% busy at 100k: 8418.0 at 1, 8419.1 at 0.8). Every price
    vector gives a valid bound, so the largest is one. Only the first where it is below
    ``floor`` (units, as the Lagrangian bound). Lowered by :data:`ROUNDING` (sums of floats)."""
    def at(k: float) -> float:
        v = _lagrangian(problem, pods, caps, k * prices)
        return v if v is not None else 0.0

    first, (down, gained, lost) = at(1.0), SCALES
    if first < floor:
        return first * (1 - ROUNDING)
    second = at(down)
    return max(first, second, at(gained if second > first else lost)) * (1 - ROUNDING)


def _compositions(prices: np.ndarray, total: int) -> float:
    """The least ``sum prices[y]`` over the ways of writing ``total`` as a sum of parts
    ``1 .. len(prices) - 1`` (a column's pieces, one per pod it meets)."""
    best = np.full(total + 1, np.inf)
    best[0] = 0.0
    for s in range(1, total + 1):
        y = np.arange(1, min(s, prices.size - 1) + 1)
        best[s] = float((best[s - y] + prices[y]).min())
    return float(best[total])


def _credits(prices: np.ndarray, top: int, cap: int) -> np.ndarray:
    """``credit[c, A]``: the largest ``sum prices[y]`` over ``c`` pieces of ``1 .. top`` cells
    holding ``A`` cells in all (-inf where none), ``c, A <= cap``: ``credit[c, A]`` the largest
    ``credit[c - 1, A - y] + prices[y]``, all y at once (max-plus over a sliding window)."""
    Y = min(top, prices.size - 1)
    credit = np.full((cap + 1, cap + 1), -np.inf)
    credit[0, 0] = 0.0
    if Y < 1:
        return credit
    padded = np.full(cap + Y + 1, -np.inf)                           # padded[Y + A]: credit[c - 1, A]
    for c in range(1, cap + 1):
        padded[Y:] = credit[c - 1]
        take = np.lib.stride_tricks.sliding_window_view(padded[:cap + Y], Y)    # take[A, k]: credit[c - 1, A - Y + k]
        credit[c] = (take[:, ::-1] + prices[1:Y + 1][None, :]).max(axis=1)       # y = Y - k
    return credit


def _earnings(prices: np.ndarray, h: int, top: int, cols: int, w1_col: float) -> np.ndarray:
    """``less[top + 1]`` (units): ``less[A]`` the least ``w1_col c`` less the most c columns of
    at most h cells earn (:func:`_credits`) holding ``A`` cells, over ``ceil(A / h) <= c <=
    min(A, cols)``, ``c >= 1`` (inf where none). Entry A reads only ``c <= A``: one table
    serves every pod of at most ``top`` hosts."""
    A = np.arange(top + 1)
    c = np.arange(top + 1)[:, None]                                  # (c, 1)
    ok = (c >= -(-A[None, :] // h)) & (c <= np.minimum(A, cols)[None, :]) & (c >= 1)
    return np.where(ok, w1_col * c - _credits(prices, h, top), np.inf).min(axis=0)


def _lagrangian(problem: GridProblem, pods: list, caps: list, prices: np.ndarray) -> float | None:
    """The Lagrangian bound (units, before the columns' first domains are taken off) for
    ``prices[y]`` per pod column of y cells: each pod at its least ``G + w1 w_col c`` less the
    most its columns can earn (at its :data:`DETAILED` cheapest heights also at least the
    groups' stacking, :func:`rankmap.placement.stacking_groups.group_stacking_lines`), added
    up over pods by a min-plus programme on their hosts, plus C times the least a column's
    pieces can earn. None when the hosts cannot hold the grid."""
    R, C = problem.rows, problem.cols
    n = R * C
    w1_col = problem.weights[1] * float(problem.w_col)
    heights = sorted({hi for pod in set(pods) for _, hi, _ in pod_height_costs(pod, problem)})
    earn = {h: _earnings(prices, h, max(caps), C, w1_col) for h in heights}
    costs: dict = {}                                                 # (pod, lo, hi) -> cost[cap + 1]
    for pod in sorted(set(pods)):
        cap = sum(pod)
        for lo, hi, g in pod_height_costs(pod, problem):
            costs[pod, lo, hi] = g + earn[hi][:cap + 1]
    items = []
    for pod in sorted(set(pods)):
        cap = sum(pod)
        least = sorted((float(v[cap]), lo) for (p, lo, hi), v in costs.items() if p == pod and lo == hi and lo >= 2)
        items += [(pod, h) for _, h in least[:DETAILED]]
    lines = group_stacking_lines(problem, items, prices) or []
    for (pod, h), (value, slope) in zip(items, lines):
        k = costs[pod, h, h]
        costs[pod, h, h] = np.where(np.isfinite(k), np.maximum(k, value + slope * (np.arange(k.size) - (k.size - 1))),
                                    np.inf)
    least = {}
    for pod in set(pods):
        least[pod] = np.min([v for (p, _, _), v in costs.items() if p == pod], axis=0)
        least[pod][0] = 0.0
    total = least_total([(least[pod], cap) for pod, cap in sorted(zip(pods, caps), key=lambda x: (x[1], x[0]))], n)
    if not np.isfinite(total):
        return None
    return float(total) + C * _compositions(prices, R)
