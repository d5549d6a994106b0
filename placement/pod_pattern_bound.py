"""A joint bound on the ToR and pod tiers: which of a pod's groups touch which of its rows.

Rings wider than any pod (``C`` above every pod's free hosts). Notation as in
:mod:`rankmap.placement.pod_box_bound`: any placement costs at least
``sum_d Phi_d - (w0 + w1) w_col C`` with, for pod d over ``r_d`` rows and ``c_d`` columns
and its group g over ``r_g`` rows and ``c_g`` columns holding ``a_g`` hosts::

    Phi_d = w1 (w_row r_d + w_col c_d) + w0 sum_g (w_row r_g + w_col c_g)

The pod boxes bound prices the ties between a pod's box and its groups' boxes with
multipliers; this one enumerates them. Label each of the pod's ``r_d`` rows by the set
``T_i`` of its groups with hosts in that row (the row's *type*); the multiset of types is
the pod's *pattern*, and it fixes ``r_g`` (the rows whose type holds g) and so the
``w_row`` part of ``Phi_d``. Given the pattern, every placement satisfies, with
``x_gi`` the hosts of g in row i and ``q_j`` the hosts of column j:

- rows: ``1 <= x_gi <= c_g`` for ``g in T_i`` (g has a host there, each in its own column),
  ``sum_g x_gi <= c_d``, ``sum_i x_gi = a_g <= free_g``, ``sum_g a_g = A`` (a
  transportation problem from groups to rows);
- columns: column j's hosts lie in distinct rows, each in a row of its group, so the groups
  in column j cover ``q_j`` rows: at least ``kappa(q_j)`` groups, ``kappa(q)`` the fewest
  groups of the pattern whose rows number ``q`` or more. Summed over columns,
  ``sum_g c_g >= sum_j kappa(q_j) >= alpha c_d + beta A`` for every line
  ``alpha + beta q`` below ``kappa`` on ``1 .. r_d`` (``sum_j q_j = A``);
- ``c_g <= c_d``, ``c_g <= a_g``.

The least ``w1 w_col c_d + w0 w_col sum_g c_g`` under these (a linear programme,
:func:`pattern_lp`, integrality relaxed) is a lower bound on the pattern's column part, so
``Phi_d`` is at least the least over patterns of that plus the row part. When ``w0`` and
``w1`` are integers the column part is a whole number, so the bound rounds up.

Every ``A`` at once: a dual solution of the programme at ``A = free`` (the pod full) stays
dual feasible at every ``A`` (only the right-hand side moves), so ``value + y (A - free)``,
``y`` the dual of ``A = free``, is below the programme's value at every ``A`` (weak
duality). Patterns are grouped into *classes* by ``(r_d, r[k])``; a class's *simple* bound
holds for all its patterns: ``c_d >= A / r_d``, ``c_g >= a_g / r_g`` at the best split of
``A`` (each used group holds ``r_g .. free_g`` hosts) and, where the class may be least at
the full pod, the column count with ``kappa`` taken from the heights alone (a set of groups
covers at most the sum of its heights, so ``kappa`` only falls). Classes are solved in the
order of their simple bound at ``A = free`` until that bound reaches the least value found
(or :data:`MAX_LPS` programmes are spent); the other classes keep their simple bound, every
class is counted, so the minimum over classes is a bound at every ``A``. Only pods of at
most :data:`MAX_GROUPS` groups (the first :data:`MAX_PODS` distinct ones) and heights up to
:data:`MAX_HEIGHT` are enumerated; taller
pods keep the pod boxes bound (:func:`rankmap.placement.pod_box_bound.box_costs`), and the
result is never below :func:`rankmap.placement.pod_box_bound.pod_box_costs`.

On a pod of four groups of 48 (w_row 20, w_col 1), three stages: pattern
``{X, Y}, {Y, Z}, {Z, W}`` (X and W one row each) pays 396 (Y and Z each fill half of the
middle row: ``c_d = 72``), groups of two rows fill a full column only in pairs (412), so the
pod's best is the 4 x 48 tiling, 384; the pod boxes bound stops at 383.

On the 100,000-GPU three-tier benchmark instances (gap of the plan to the bound, pod boxes ->
pod patterns): GPT-3 on 25% busy hosts 3.37% -> 2.54%, 50% 3.96% -> 3.81%; EP 4.47% ->
3.64% and 3.65% -> 3.49%; mixed sizes 3.40% -> 1.80%; deep pipelines unchanged (their pods
are 6 stages or more, above :data:`MAX_HEIGHT`, where the pod boxes are already met by
6-stage tilings); about 1-2 s of CPU per bound.

References
----------
The edge-isoperimetric argument for grid partitions: Bollobas and Leader, "Edge-isoperimetric
inequalities in the grid", Combinatorica 11 (1991); weak duality of linear programmes:
Chvatal, "Linear Programming" (1983), ch. 5; transportation problems: Dantzig, "Linear
Programming and Extensions" (1963), ch. 14.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.lp_rows import lower_hull
from rankmap.placement.pod_box_bound import pod_box_costs, pods_bound

__all__ = ["pod_pattern_bound", "pod_pattern_costs", "pattern_lp", "pattern_lps", "MAX_GROUPS", "MAX_HEIGHT", "MAX_LPS", "MAX_PODS"]

# Pods of more ToR groups than this keep the pod boxes bound.
MAX_GROUPS = 4
# Patterns of pods over at most this many rows are enumerated (taller ones: the pod boxes bound).
MAX_HEIGHT = 4
# No class is solved once this many patterns' programmes were solved for a pod (the rest keep
# their simple bound).
MAX_LPS = 300
# At most this many distinct pods (their groups' free hosts) get the patterns (about 40 ms of
# CPU each); the others keep the pod boxes bound.
MAX_PODS = 100
# Dual lines are lowered by this much (units of w_col) against the solver's rounding.
SLACK = 1e-4


def _patterns(k: int, r_d: int):
    """Every multiset of ``r_d`` row types (non-empty subsets of ``k`` groups, as bit masks)."""
    return itertools.combinations_with_replacement(range(1, 1 << k), r_d)


def _kappa_lines(masks: list, r_d: int, disjoint: bool = False) -> list[tuple[float, float]]:
    """``(alpha, beta)`` of the lower convex hull's edges of ``kappa(q)``, ``q = 1 .. r_d``
    (the fewest groups whose rows cover ``q`` rows; module docstring); with ``disjoint``,
    the rows of a set of groups counted as the sum of theirs (at least the union: a lower
    ``kappa``)."""
    k = len(masks)
    kappa = np.full(r_d + 1, np.inf)
    for sub in range(1, 1 << k):
        if disjoint:
            rows = min(r_d, sum(bin(masks[g]).count("1") for g in range(k) if sub >> g & 1))
        else:
            rows = bin(int(np.bitwise_or.reduce([masks[g] for g in range(k) if sub >> g & 1]))).count("1")
        n = bin(sub).count("1")
        kappa[1:rows + 1] = np.minimum(kappa[1:rows + 1], n)
    pts = [(q, float(kappa[q])) for q in range(1, r_d + 1)]
    hull = lower_hull(pts)                                            # Andrew's monotone chain
    if len(hull) == 1:
        return [(hull[0][1], 0.0)]
    lines = []
    for (q0, k0), (q1, k1) in zip(hull, hull[1:]):
        beta = (k1 - k0) / (q1 - q0)
        lines.append((k0 - beta * q0, beta))
    return lines


def pattern_lp(types: tuple, free: tuple, A0: int, w0: float, w1: float) -> tuple[float, float] | None:
    """The column part's linear programme (module docstring, in units of ``w_col``) of the
    pattern ``types`` (one bit mask of groups per row) at ``A0`` hosts: ``(value, slope)``,
    the value and a dual line's slope (the line ``value + slope (A - A0)`` is below the
    programme's value at every ``A``); None when infeasible at ``A0``."""
    return pattern_lps([types], free, A0, w0, w1)[0]


def pattern_lps(patterns: list, free: tuple, A0: int, w0: float, w1: float) -> list:
    """:func:`pattern_lp` of each of ``patterns``, solved as one block-diagonal programme (the
    blocks share no variable, so each block's part of an optimum is optimal for it, and its
    duals are its own); one by one when the whole is infeasible."""
    # imported when first needed (~50 MB)
    from scipy.optimize import linprog
    from scipy.sparse import block_diag

    parts = [_lp_parts(types, free, A0, w0, w1) for types in patterns]
    res = linprog(np.concatenate([p[0] for p in parts]), A_ub=block_diag([p[1] for p in parts], format="csr"),
                  b_ub=np.concatenate([p[2] for p in parts]), A_eq=block_diag([p[3] for p in parts], format="csr"),
                  b_eq=np.concatenate([p[4] for p in parts]), bounds=[b for p in parts for b in p[5]], method="highs")
    if res.status != 0:
        return [_one_lp(p) for p in parts] if len(parts) > 1 else [None]
    out, x0, e0 = [], 0, 0
    for cost, _, _, a_eq, _, _ in parts:
        n, m = cost.size, a_eq.shape[0]
        out.append((float(cost @ res.x[x0:x0 + n]), float(res.eqlin.marginals[e0 + m - 1])))
        x0, e0 = x0 + n, e0 + m
    return out


def _one_lp(part: tuple) -> tuple[float, float] | None:
    """One block of :func:`pattern_lps` alone."""
    from scipy.optimize import linprog

    cost, a_ub, b_ub, a_eq, b_eq, bounds = part
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:
        return None
    return float(res.fun), float(res.eqlin.marginals[-1])


def _lp_parts(types: tuple, free: tuple, A0: int, w0: float, w1: float) -> tuple:
    """``(cost, A_ub, b_ub, A_eq, b_eq, bounds)`` of :func:`pattern_lp`; the last equality row
    is ``A = A0``. Only ``A0`` and the groups' free hosts (bounds of ``a_g``) differ between
    pods: the rest is built once per pattern (:func:`_lp_structure`)."""
    cost, a_ub, b_ub, a_eq, b_eq, bounds, ia = _lp_structure(tuple(types), len(free), w0, w1)
    b_eq = b_eq.copy()
    b_eq[-1] = float(A0)
    bounds = list(bounds)
    for g, j in ia.items():
        bounds[j] = (0, free[g])
    return cost, a_ub, b_ub, a_eq, b_eq, bounds


@functools.lru_cache(maxsize=8192)
def _lp_structure(types: tuple, k: int, w0: float, w1: float) -> tuple:
    """``(cost, A_ub, b_ub, A_eq, b_eq, bounds, {g: index of a_g})`` of :func:`_lp_parts` at
    ``A0 = 0`` with ``a_g`` unbounded; remembered, not to be changed."""
    r_d = len(types)
    used = [g for g in range(k) if any(t >> g & 1 for t in types)]
    gi = [(g, i) for i, t in enumerate(types) for g in used if t >> g & 1]
    # variables: c_g (used), c_d, a_g (used), x_gi, A
    nu = len(used)
    ic = {g: j for j, g in enumerate(used)}
    icd, ia, ix, iA = nu, {g: nu + 1 + j for j, g in enumerate(used)}, {}, 0
    for j, p in enumerate(gi):
        ix[p] = 2 * nu + 1 + j
    iA = 2 * nu + 1 + len(gi)
    n = iA + 1
    ub_rows, ub_rhs = [], []

    def row(coef: dict, rhs: float) -> None:
        v = np.zeros(n)
        for j, c in coef.items():
            v[j] += c
        ub_rows.append(v)
        ub_rhs.append(rhs)

    for (g, i), j in ix.items():
        row({j: 1.0, ic[g]: -1.0}, 0.0)                               # x_gi <= c_g
    for i, t in enumerate(types):
        row({**{ix[(g, i)]: 1.0 for g in used if t >> g & 1}, icd: -1.0}, 0.0)   # row fill <= c_d
    for g in used:
        row({ic[g]: 1.0, icd: -1.0}, 0.0)                             # c_g <= c_d
        row({ic[g]: 1.0, ia[g]: -1.0}, 0.0)                           # c_g <= a_g
    masks = [sum(1 << i for i, t in enumerate(types) if t >> g & 1) for g in used]
    for alpha, beta in _kappa_lines(masks, r_d):
        row({**{ic[g]: -1.0 for g in used}, icd: alpha, iA: beta}, 0.0)  # sum c_g >= alpha c_d + beta A
    eq_rows, eq_rhs = [], []
    for g in used:
        v = np.zeros(n)
        v[[ix[(g, i)] for i in range(r_d) if (g, i) in ix]] = 1.0
        v[ia[g]] = -1.0
        eq_rows.append(v)
        eq_rhs.append(0.0)                                            # sum_i x_gi = a_g
    v = np.zeros(n)
    v[[ia[g] for g in used]] = 1.0
    v[iA] = -1.0
    eq_rows.append(v)
    eq_rhs.append(0.0)                                                # sum a_g = A
    v = np.zeros(n)
    v[iA] = 1.0
    eq_rows.append(v)
    eq_rhs.append(0.0)                                                # A = A0 (its dual: the slope; _lp_parts)
    cost = np.zeros(n)
    cost[icd] = w1
    cost[[ic[g] for g in used]] = w0
    bounds = [(0, None)] * n
    for j in ix.values():
        bounds[j] = (1, None)
    return cost, np.array(ub_rows), np.array(ub_rhs), np.array(eq_rows), np.array(eq_rhs), bounds, ia


@functools.lru_cache(maxsize=None)
def _class_lines(r_d: int, heights: tuple) -> tuple:
    """``((alpha, beta), ...)``: :func:`_kappa_lines` with each set of groups covering the sum
    of its heights (at most their union), padded to :data:`MAX_HEIGHT` lines by ``(0, 0)``."""
    lines = _kappa_lines([(1 << h) - 1 for h in heights if h > 0], r_d, disjoint=True)
    return tuple(lines) + ((0.0, 0.0),) * (MAX_HEIGHT - len(lines))


@functools.lru_cache(maxsize=None)
def _classes(k: int):
    """``{(r_d, r[k]): [patterns]}``: the patterns over ``r_d <= MAX_HEIGHT`` rows grouped by the
    rows each group touches (0: unused)."""
    out: dict = {}
    for r_d in range(1, MAX_HEIGHT + 1):
        for types in _patterns(k, r_d):
            r = tuple(sum(t >> g & 1 for t in types) for g in range(k))
            out.setdefault((r_d, r), []).append(types)
    return out


def _simple_bounds(keys: list, free: tuple, cap: int, w0: float, w1: float) -> tuple[np.ndarray, np.ndarray]:
    """``low[P, cap + 1]`` (units of ``w_col``): ``w1 A / r_d + w0 sum_g a_g / r_g`` at the best
    split of ``A`` hosts (each used group at least ``r_g``, at most ``free_g``), and
    ``split[P, cap + 1]``, that least ``sum_g a_g / r_g``; inf where no split exists."""
    A = np.arange(cap + 1, dtype=float)[None, :]                      # (1, A)
    rd = np.array([key[0] for key in keys], dtype=float)[:, None]     # (P, 1)
    r = np.array([key[1] for key in keys], dtype=float)               # (P, k)
    f = np.asarray(free, dtype=float)[None, :]
    used = r > 0
    order = np.argsort(-r, axis=1, kind="stable")                     # fill the tallest groups first
    r_s = np.take_along_axis(r, order, axis=1)
    width = np.take_along_axis(np.where(used, f - r, 0.0), order, axis=1)   # (P, k) extra room
    start = np.cumsum(width, axis=1) - width
    rate = np.where(r_s > 0, 1.0 / np.maximum(r_s, 1), 0.0)
    extra = A - r.sum(axis=1, keepdims=True)                          # (P, A)
    fill = np.clip(extra[:, None, :] - start[:, :, None], 0.0, width[:, :, None])   # (P, k, A)
    split = used.sum(axis=1, keepdims=True) + (rate[:, :, None] * fill).sum(axis=1)     # (P, A)
    ok = (extra >= 0) & (extra <= width.sum(axis=1, keepdims=True)) & (r <= f).all(axis=1, keepdims=True)
    return np.where(ok, w1 * A / rd + w0 * split, np.inf), np.where(ok, split, np.inf)


def _cover_bounds(keys: list, split: np.ndarray, w0: float, w1: float) -> np.ndarray:
    """``low[P, A]``: :func:`_simple_bounds` with ``sum_g c_g >= alpha c_d + beta A`` for the
    lines below ``kappa`` (the fewest groups whose rows may cover q rows: at most their r_g
    summed); ``split[P, A]`` its least ``sum_g a_g / r_g``. The least over ``c_d >= A / r_d``
    is at a kink: ``A / q`` or where a line meets ``split``."""
    A = np.arange(split.shape[1], dtype=float)[None, None, :]         # (1, 1, A)
    rd = np.array([key[0] for key in keys], dtype=float)[:, None, None]
    ab = np.array([_class_lines(int(key[0]), tuple(sorted(key[1]))) for key in keys])   # (P, L, 2)
    alpha, beta = ab[:, :, 0][:, :, None], ab[:, :, 1][:, :, None]                   # (P, L, 1)
    fin = np.where(np.isfinite(split), split, 0.0)[:, None, :]                         # (P, 1, A)
    qs = np.arange(1, MAX_HEIGHT + 1, dtype=float)[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        meet = np.where(alpha > 0, (fin - beta * A) / alpha, 0.0)                      # (P, L, A)
    per_q = np.broadcast_to(A / qs, (len(keys), MAX_HEIGHT, A.shape[2]))
    cd = np.maximum(np.concatenate([per_q, meet], axis=1), A / rd)                     # (P, Q + L, A)
    cover = (alpha[:, None, :, :] * cd[:, :, None, :] + beta[:, None, :, :] * A[:, None, :, :]).max(axis=2)
    low = (w1 * cd + w0 * np.maximum(fin, cover)).min(axis=1)                          # (P, A)
    return np.where(np.isfinite(split), low, np.inf)


def _rounder(w0: float, w1: float):
    """Rounds a lower bound on the column part ``w1 c_d + w0 sum_g c_g`` up to an integer when
    both weights are integers (the columns counted are whole numbers); else leaves it."""
    if float(w0).is_integer() and float(w1).is_integer():
        return lambda x: np.ceil(np.asarray(x) - 1e-4)
    return lambda x: np.asarray(x)


def pod_pattern_costs(groups: list, problem: GridProblem) -> np.ndarray:
    """``H[A]``: a lower bound on ``Phi_d`` (module docstring) of a pod of these groups holding
    ``A`` hosts, ``A = 0 .. sum(groups)``; at least
    :func:`rankmap.placement.pod_box_bound.pod_box_costs`. Remembered per pod and problem (the
    plan's bounds ask for the same pods again, :mod:`rankmap.placement.pair_split_bound`); a
    fresh array each call.

    Examples
    --------
    Four groups of 48 hosts, w_row 20, w_col 1: the 4 x 48 tiling (module docstring).

    >>> p = GridProblem(16, 568, (48,) * 4, 20, 1, domains=((0,) * 4,), weights=(1.0, 1.0))
    >>> float(pod_pattern_costs([48] * 4, p)[192])
    384.0
    """
    return _pattern_costs(tuple(int(f) for f in groups), problem).copy()


@functools.lru_cache(maxsize=256)
def _pattern_costs(free: tuple, problem: GridProblem) -> np.ndarray:
    """:func:`pod_pattern_costs` of a pod of groups of ``free`` hosts."""
    cap, k = sum(free), len(free)
    if k > MAX_GROUPS or problem.rows < 2:
        return pod_box_costs(list(free), problem)
    w0, w1 = problem.weights[0], problem.weights[1]
    w_row, w_col = float(problem.w_row), float(problem.w_col)
    tall = pod_box_costs(list(free), problem, heights=range(MAX_HEIGHT + 1, min(problem.rows, cap) + 1))
    low_box = pod_box_costs(list(free), problem, heights=range(1, min(MAX_HEIGHT, problem.rows, cap) + 1))
    classes = {key: pats for key, pats in _classes(k).items() if key[0] <= problem.rows}
    keys = sorted(classes)
    rowpart = np.array([w_row * (w1 * rd + w0 * sum(r)) for rd, r in keys])[:, None]     # (P, 1)
    low, split = _simple_bounds(keys, free, cap, w0, w1)
    best_cap = float(tall[cap])
    # the cover lines only where a class may be least at the full pod (elsewhere low is valid)
    at_cap = np.where(np.isfinite(low[:, cap]), w_col * np.where(np.isfinite(low[:, cap]), low[:, cap], 0.0), np.inf)
    near = np.nonzero(rowpart[:, 0] + at_cap < best_cap)[0]                # (an infeasible class: inf, never near)
    if near.size:
        low[near] = _cover_bounds([keys[p] for p in near], split[near], w0, w1)
    up = _rounder(w0, w1)
    simple = np.where(np.isfinite(low), rowpart + w_col * up(np.where(np.isfinite(low), low, 0.0)), np.inf)  # (P, A)
    lines = simple.copy()
    A = np.arange(cap + 1, dtype=float)
    solved = 0
    for p in np.argsort(simple[:, cap], kind="stable"):
        if not simple[p, cap] < best_cap or solved >= MAX_LPS:
            break
        least = np.full(cap + 1, np.inf)
        solved += len(classes[keys[p]])
        for out in pattern_lps(classes[keys[p]], free, cap, w0, w1):
            if out is not None:
                value, slope = out
                least = np.minimum(least, rowpart[p, 0] + w_col * up(value - SLACK + slope * (A - cap)))
        lines[p] = np.where(np.isfinite(simple[p]), np.maximum(simple[p], least), np.inf)
        best_cap = min(best_cap, float(lines[p, cap]))
    pattern = lines.min(axis=0)
    out = np.minimum(np.maximum(pattern, low_box), tall)
    out[0] = 0.0
    return out


def pod_pattern_bound(problem: GridProblem) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs of
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement (module docstring):
    :func:`pod_pattern_costs` per pod, added up by a min-plus programme over pods.

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.

    Returns
    -------
    float
        The bound; 0 without pods, when a pod can hold a whole row (``C`` at most its free
        hosts), when the hosts cannot hold the grid, or above
        :data:`rankmap.placement.pod_box_bound.MAX_WORK` steps (as the pod boxes bound).

    Examples
    --------
    Four stages of 240 hosts on five pods of four groups of 48 (w_row 20, w_col 1): each pod
    at least 384, less the 240 columns' first domains at both tiers: the tiling's 1440.

    >>> p = GridProblem(4, 240, (48,) * 20, 20, 1, domains=(tuple(g // 4 for g in range(20)),), weights=(1.0, 1.0))
    >>> pod_pattern_bound(p)
    1440.0
    """
    return pods_bound(problem, lambda i, pod: (pod_pattern_costs(list(pod), problem) if i < MAX_PODS
                                              else pod_box_costs(list(pod), problem)))
