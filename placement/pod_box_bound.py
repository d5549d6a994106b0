"""A joint bound on the ToR and pod tiers: a pod's box of rows and columns and the groups that fill it.

Rings wider than any pod (``C`` above every pod's free hosts): every row is split at both
tiers. Notation as in :mod:`rankmap.placement.perimeter_bound`: R rows (stages) of C hosts,
ToR groups of ``free[K]`` hosts in pods (level-1 domains), weights ``w0`` (ToR) and ``w1``
(pod), ``w_row`` per ring crossing and ``w_col`` per pipeline hop. Take any placement; pod d
holds ``A_d`` hosts over ``r_d`` rows and ``c_d`` columns, its group g ``a_g`` hosts over
``r_g`` rows and ``c_g`` columns. As in the perimeter bound (no row lies whole in a pod or a
group, so a row crosses once per piece; a column over k domains changes k - 1 times)::

    w0 cost_0 + w1 cost_1 >= sum_d Phi_d - (w0 + w1) w_col C,
    Phi_d = w1 (w_row r_d + w_col c_d) + w0 sum_{g in d} (w_row r_g + w_col c_g)

with ``r_g c_g >= a_g``, ``r_g <= min(r_d, a_g)``, ``c_g <= a_g``. The nested blocks bound
(:func:`rankmap.placement.perimeter_bound.nested_perimeter_bound`) picks the pod's box and
its groups' boxes apart; they are tied (a pod of 3 stages cannot be tiled by groups of 2
stages each without two of them in every column). Two counting inequalities hold in every
placement:

- columns: a pod column holding ``q`` hosts, none of its groups touching ``t`` rows or more,
  holds at least ``ceil(q / (t - 1))`` groups. With ``N`` the pod's full columns (``q = r_d``;
  ``N >= A_d - (r_d - 1) c_d``) and ``m = ceil(r_d / (t - 1))``::

      sum_g c_g (1 + (m - 1) [r_g >= t]) >= c_d + (m - 1) N

- rows: a pod row piece of ``p >= s`` hosts with no group touching ``s`` columns or more
  holds at least two groups; with ``L`` such row pieces
  (``L >= (A_d - r_d (s - 1)) / (c_d - s + 1)``)::

      sum_g r_g (1 + [c_g >= s]) >= r_d + L

For multipliers ``mu, nu >= 0`` (Lagrangian relaxation: a non-negative multiple of
``LHS - RHS >= 0`` subtracted), ``Phi_d`` is at least::

    w1 (w_row r_d + w_col c_d) + w0 [sum_g h(a_g) + mu (c_d + (m - 1) N) + nu (r_d + L)]
    h(a) = min_{r, c} (w_row - nu (1 + [c >= s])) r + (w_col - mu (1 + (m - 1) [r >= t])) c

each group's least term taken apart (a min-plus sum over the pod's groups), the least over
``c_d`` for each multiplier (the least over ``c_d`` of the largest over multipliers is at
least the largest over multipliers of the least over ``c_d``), the largest over the
multipliers of :data:`MULTIPLIERS` kept, and the least over ``r_d``. A min-plus programme
over pods (their hosts adding up to ``R C``) gives the bound.

With zero multipliers this is the nested blocks bound with each group kept inside its pod's
``r_d`` rows and one height per pod for both tiers; on the 100,000-GPU benchmark instances
that part alone makes the gain (GPT-3 on 25% busy hosts: 3.61% -> 3.37%). The multipliers
lift single pods (a 3-stage pod of four groups of 48: 380 -> 383, the 4-stage tiling 384)
but, with the hosts a pod may leave unused, not yet a benchmark instance's total.

References
----------
The edge-isoperimetric argument for grid partitions: Bollobas and Leader, "Edge-isoperimetric
inequalities in the grid", Combinatorica 11 (1991); Lagrangian relaxation and weak duality:
Fisher, "The Lagrangian relaxation method for solving integer programming problems",
Management Science 27 (1981).
"""

from __future__ import annotations

import functools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.perimeter_bound import least_total, min_plus, pod_free_hosts

__all__ = ["pod_box_bound", "pods_bound", "pod_box_costs", "box_costs", "MULTIPLIERS", "MAX_WORK"]

# (column groups m, mu / (w_col / m), nu / (w_row / 2), row threshold: "max" = largest group + 1
# or "half" = half of it + 1): the multipliers tried (the largest bound kept per pod shape). The
# first must be the zero multipliers (pod_box_costs skips heights by it); the others are those
# that were ever the largest on the 100,000-GPU benchmark instances.
MULTIPLIERS = ((2, 0.0, 0.0, "max"), (2, 0.5, 0.5, "max"), (2, 0.5, 0.25, "max"), (2, 0.5, 0.0, "max"),
               (3, 1.0, 0.25, "max"), (2, 0.5, 0.25, "half"))
# Skip the bound (return 0) above this many steps (an estimate, before heights are skipped: the
# 100,000-GPU benchmark instances estimate 0.2-1.4 billion and take 0.3-1.1 s of CPU).
MAX_WORK = 2_000_000_000
# Per-multiplier pod bounds and their parts remembered (each entry an array of a pod's hosts).
CACHED = 4096
# Group terms are made for group sizes rounded up to a multiple of this (and sliced).
TERMS_STEP = 64


def _group_terms(f: int, r_d: int, t: int, m: int, mu: float, s: int, nu: float, w_row: float,
                 w_col: float) -> np.ndarray:
    """``h[f + 1]``: a group's least Lagrangian term (module docstring) holding ``a`` hosts,
    read-only. ``h[a]`` does not depend on ``f`` (only which ``a`` are asked for): the terms
    of groups of up to the next multiple of :data:`TERMS_STEP` hosts are made once."""
    top = -(-max(f, 1) // TERMS_STEP) * TERMS_STEP
    return _terms_upto(top, r_d, t, m, mu, s, nu, w_row, w_col)[:f + 1]


@functools.lru_cache(maxsize=CACHED)
def _terms_upto(f: int, r_d: int, t: int, m: int, mu: float, s: int, nu: float, w_row: float,
                w_col: float) -> np.ndarray:
    """:func:`_group_terms` of a group of ``f`` hosts, remembered."""
    a = np.arange(1, f + 1)[None, :]                                  # a[1, F]
    r = np.arange(1, r_d + 1)[:, None]                                # r[Rd, 1]
    c1 = -(-a // r)                                                   # c[Rd, F] = ceil(a / r)
    h = np.full(f + 1, np.inf)
    col_w = w_col - mu * np.where(r >= t, m, 1)                       # (Rd, 1)
    for c in (c1, np.maximum(c1, s)):                                 # narrow, or wide enough to count
        row_w = w_row - nu * np.where(c >= s, 2, 1)
        cost = np.where((r <= a) & (c <= a), row_w * r + col_w * c, np.inf)
        h[1:] = np.minimum(h[1:], cost.min(axis=0))
    h[0] = 0.0
    h.flags.writeable = False
    return h


def pod_box_costs(groups: list, problem: GridProblem, heights: range | None = None) -> np.ndarray:
    """``H[A]``: a lower bound on ``Phi_d`` (module docstring) of a pod of these groups holding
    ``A`` hosts, ``A = 0 .. sum(groups)``; with ``heights``, of such a pod over that many rows
    only (inf where none fits).

    Examples
    --------
    Four groups of 48 hosts, w_row 20, w_col 1. Apart, the pod's best box is 3 stages x 64
    columns (124) and each group's 2 x 24 (64): the nested blocks see 124 + 256 = 380. But
    groups of 2 stages leave a 3-stage pod's columns two groups deep (or must be 1 x 48 or
    3 x 16, dearer); 4 stages x 48 (128) tiles them, 384.

    >>> p = GridProblem(16, 568, (48,) * 4, 20, 1, domains=((0,) * 4,), weights=(1.0, 1.0))
    >>> float(pod_box_costs([48] * 4, p)[192])
    383.0
    """
    cap = sum(groups)
    heights = range(1, min(problem.rows, cap) + 1) if heights is None else heights
    # every multiplier set holds the zero multipliers, so a height whose zero-multiplier bound
    # is nowhere below the least so far cannot lower it: skip its other multipliers
    plain = {r_d: box_costs(groups, problem, r_d, MULTIPLIERS[:1]) for r_d in heights}
    best = np.full(cap + 1, np.inf)
    for r_d in sorted(heights, key=lambda r: (float(np.min(plain[r])), r)):
        if (plain[r_d] < best).any():
            best = np.minimum(best, box_costs(groups, problem, r_d))
    best[0] = 0.0
    return best


def box_costs(groups: list, problem: GridProblem, r_d: int, multipliers: tuple = MULTIPLIERS) -> np.ndarray:
    """``H[A]``: the bound on ``Phi_d`` of a pod over exactly ``r_d`` rows, the largest over
    ``multipliers`` (module docstring); inf where ``A`` hosts cannot lie in ``r_d`` rows. Each
    multiplier's bound is remembered per pod shape, height, width and weights
    (:func:`_multiplier_low`): the pod patterns and stacking bounds ask for the same ones."""
    C = problem.cols
    w_row, w_col = float(problem.w_row), float(problem.w_col if problem.rows > 1 else 0)
    key = (tuple(sorted(int(f) for f in groups)), r_d, C, problem.weights[0], problem.weights[1], w_row, w_col)
    cap = sum(key[0])
    A = np.arange(cap + 1)
    low = np.full(cap + 1, -np.inf)
    for mult in multipliers:
        low = np.maximum(low, _multiplier_low(*key, mult))
    ok = (A >= r_d) & (-(-A // r_d) <= np.minimum(A, C))             # c_d from ceil(A / r_d) to min(A, C)
    return np.where(ok, low, np.inf)


@functools.lru_cache(maxsize=CACHED)
def _multiplier_low(groups: tuple, r_d: int, C: int, w0: float, w1: float, w_row: float, w_col: float,
                    mult: tuple) -> np.ndarray:
    """``low[cap + 1]`` (units): :func:`box_costs` at one multiplier set ``mult`` (of
    :data:`MULTIPLIERS`) before the hosts that cannot lie in ``r_d`` rows are set to inf;
    ``groups`` sorted. Read-only, remembered."""
    m, mu_f, nu_f, thr = mult
    cap, fmax = sum(groups), max(groups)
    t = _tall(r_d, m)
    mu = mu_f * w_col / m if t is not None else 0.0                   # one row: every column full, no inequality
    t = t if t is not None else r_d + 1
    s = fmax + 1 if thr == "max" else fmax // 2 + 1
    nu = nu_f * w_row / 2
    inner = _inner(groups, r_d, t, m, mu, s, nu, w_row, w_col)
    cd, pod, full, rows = _widths(cap, r_d, s, C, w_row, w_col)
    terms = w1 * pod + w0 * (mu * (cd + (m - 1) * full) + nu * rows)
    low = w0 * inner + terms.min(axis=1)                              # least over c_d, per A
    low.flags.writeable = False
    return low


@functools.lru_cache(maxsize=16)
def _widths(cap: int, r_d: int, s: int, C: int, w_row: float, w_col: float) -> tuple:
    """``(cd, pod, full, rows)``, each ``[cap + 1, P]``: the candidate pod widths
    (:func:`_breakpoints`, within ``ceil(A / r_d) .. min(A, C)``), ``w_row r_d + w_col cd``,
    the full columns ``N`` and ``r_d + L`` (module docstring) at each; the same for every
    multiplier of one row threshold (remembered for the next few calls), read-only."""
    A = np.arange(cap + 1)[:, None]                                   # A[A, 1]
    lo, hi = -(-A // r_d), np.minimum(A, C)                           # c_d from ceil(A / r_d) to min(A, C)
    cd = np.minimum(np.maximum(_breakpoints(A, r_d, s), lo), np.maximum(lo, hi))   # (A, P) candidate widths
    full = np.maximum(0, A - (r_d - 1) * cd)
    wide = np.where(cd >= s, np.maximum(0, -(-(A - r_d * (s - 1)) // np.maximum(1, cd - s + 1))), 0)
    out = (cd, w_row * r_d + w_col * cd, full, r_d + wide)
    for x in out:
        x.flags.writeable = False
    return out


@functools.lru_cache(maxsize=CACHED)
def _inner(groups: tuple, r_d: int, t: int, m: int, mu: float, s: int, nu: float, w_row: float,
           w_col: float) -> np.ndarray:
    """``inner[cap + 1]``: the least sum of the groups' terms (:func:`_group_terms`, ``groups``
    sorted, min-plus in that order) holding A hosts; read-only, remembered (no pod weight in
    it: the stacking bound's pods at pod weight 0 share it). Each step stops at the hosts of
    the groups so far (inf beyond, as the full table has)."""
    inner = _group_terms(groups[0], r_d, t, m, mu, s, nu, w_row, w_col)   # the first group alone: its terms
    for f in groups[1:]:
        inner = min_plus(inner, _group_terms(f, r_d, t, m, mu, s, nu, w_row, w_col), f, inner.size - 1 + f)
    inner.flags.writeable = False
    return inner


def _breakpoints(A: np.ndarray, r_d: int, s: int) -> np.ndarray:
    """``c[A, P]``: the pod widths where the terms of :func:`box_costs` may be least: between
    consecutive ones they are linear in ``c_d`` (the full-column count changes slope at
    ``A / (r_d - 1)``; the wide-row count steps down where ``c_d - s + 1`` reaches
    ``(A - r_d (s - 1)) / l``), so the least over every width is at one of these."""
    x = np.maximum(1, A - r_d * (s - 1))                              # (A, 1)
    ell = np.arange(1, r_d + 1)[None, :]
    steps = s - 1 + -(-x // ell)                                       # (A, r_d): where l rows may stay wide
    kink = A // max(1, r_d - 1)
    fixed = [-(-A // r_d), A, kink, kink + 1, np.full_like(A, s - 1), np.full_like(A, s)]
    return np.concatenate(fixed + [steps, steps - 1], axis=1)


def _tall(r_d: int, m: int) -> int | None:
    """The largest ``t`` with ``ceil(r_d / (t - 1)) >= m`` (a full column of ``r_d`` hosts
    holds ``m`` groups unless one touches ``t`` rows), None when no ``t >= 2`` gives ``m``."""
    if r_d < 2 or m < 2:
        return None
    t1 = -(-r_d // (m - 1)) - 1                                       # largest t - 1 with r_d / (t - 1) > m - 1
    return t1 + 1 if t1 >= 1 else None


def pod_box_bound(problem: GridProblem) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs of
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.

    Returns
    -------
    float
        The bound; 0 without pods, when a pod can hold a whole row (``C`` at most its free
        hosts), when the hosts cannot hold the grid, or above :data:`MAX_WORK` steps.

    Examples
    --------
    Four stages of 240 hosts on five pods of four groups of 48 (w_row 20, w_col 1): each pod
    at least 383 (:func:`pod_box_costs`), less the 240 columns' first domains at both tiers.
    Pods of 4 x 48 tiled by 2 x 24 groups cost 1440; the nested blocks see 1420.

    >>> p = GridProblem(4, 240, (48,) * 20, 20, 1, domains=(tuple(g // 4 for g in range(20)),), weights=(1.0, 1.0))
    >>> pod_box_bound(p)
    1435.0
    """
    return pods_bound(problem, lambda i, pod: pod_box_costs(list(pod), problem))


def pods_bound(problem: GridProblem, pod_costs, work_factor: int = 1) -> float:
    """Add per-pod lower bounds up over pods: ``pod_costs(i, pod)`` gives pod shape ``i``'s
    (sorted free hosts per group) least cost at each host count ``[cap + 1]``; a min-plus
    programme over pods takes the cheapest split of the grid's hosts, less the columns' first
    domains at both tiers (counted in every pod's cost; on one stage, no pipeline hops, the pod
    costs count no column part and nothing is taken off). 0 where :func:`pod_box_bound` says,
    the work estimate taken ``work_factor`` times (pod costs computed more than once)."""
    R, C = problem.rows, problem.cols
    if not problem.domains or R * C == 0:
        return 0.0
    pods = sorted(tuple(sorted(p)) for p in pod_free_hosts(problem))
    caps = [sum(p) for p in pods]
    n = R * C
    work = sum(min(R, c) * len(MULTIPLIERS) * c * (c + len(p) * max(p)) for p, c in zip(pods, caps))
    if sum(caps) < n or max(caps) >= C or work_factor * (work + len(pods) * n * max(caps)) > MAX_WORK:
        return 0.0
    costs = {p: pod_costs(i, p) for i, p in enumerate(sorted(set(pods)))}
    best = least_total([(costs[p], cap) for p, cap in sorted(zip(pods, caps), key=lambda x: (x[1], x[0]))], n)
    if not np.isfinite(best):
        return 0.0
    w_col = problem.w_col if R > 1 else 0
    return max(0.0, float(best) - (problem.weights[0] + problem.weights[1]) * w_col * C)
