"""A joint bound on the ToR and pod tiers: a pod's columns that no group fills alone.

Notation as in :mod:`rankmap.placement.perimeter_bound`: R rows (stages) of C hosts, ToR
groups of ``free[K]`` hosts in pods (level-1 domains), weights ``w0`` (ToR) and ``w1`` (pod),
``w_row`` per ring crossing and ``w_col`` per pipeline hop. Take any placement. As in the
perimeter bound, a group g touching ``r_g`` rows and ``c_g`` columns, and a pod d touching
``r_d`` rows, ``c_d`` columns and holding ``W_d`` whole rows, give::

    w0 cost_0 + w1 cost_1 >= sum_d Phi_d - (w0 + w1) w_col C,
    Phi_d = w0 sum_{g in d} (w_row (r_g - whole_g) + w_col c_g) + w1 (w_row (r_d - W_d) + w_col c_d)

(``sum_g c_g`` counts, column by column, the groups in it: a column over k groups changes
group at least k - 1 times down the stages). Now let pod d hold ``q_j`` hosts of column j, every ``q_j`` at least ``t`` (the pod's
whole rows, ``W_d``, lie in every column; and ``q_j >= A_d - (c_d - 1) r_d``). A column
that one group fills alone needs that group to touch at least ``t`` rows ("tall"), and is
one of that group's columns; every other column holds two groups or more. So::

    sum_{short g} c_g + 2 sum_{tall g} c_g >= 2 c_d

A pod kept as a band of 5.5 stages (5 whole) cannot have blocks of 3 or 4 stages fill any
column alone: its groups are two per column, wider than the free perimeter bound lets them
be, or 5 stages tall.

For each multiplier ``mu >= 0`` (:data:`MUS`), ``sum_g (w_row r_g + w_col c_g)`` is at least
``sum_g (w_row r_g + (w_col - mu k_g) c_g) + 2 mu c_d`` (``k_g = 2`` tall, 1 short): a
min-plus sum over the pod's groups of their best blocks (each holding up to
``min(free, r c)`` hosts), the largest over ``mu`` kept. ``Phi_d`` is then bounded below
for pods over every column (``c_d = C``) by enumerating ``r_d`` and ``W_d``; pods over
fewer columns take the perimeter bound's blocks, as in
:func:`rankmap.placement.perimeter_bound.nested_perimeter_bound`. A knapsack over pods
gives the bound.

References
----------
The edge-isoperimetric argument for grid partitions (Bollobas and Leader, Combinatorica 11,
1991) per domain; the pods as bands of stages: Arnold (arXiv 2509.15940), MegaScale (NSDI
2024).
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.perimeter_bound import block_cost, least_total, min_plus, nested_blocks, pod_free_hosts

__all__ = ["shared_columns_bound", "MUS", "MAX_WORK"]

# Multipliers (in units of w_col) of the shared-columns inequality tried (the largest bound kept).
MUS = (0.0, 0.125, 0.25, 0.375, 0.5)
# Skip the bound (return 0) above this many steps (pods x configurations x hosts).
MAX_WORK = 60_000_000


def _group_blocks(f: int, tall: int, cols: int, w_row: float, w_col: float, mu: float) -> np.ndarray:
    """``h[f + 1]``: least ``w_row (r - whole) + (w_col - mu k) c`` of a group of ``f`` free
    hosts holding at least ``a`` hosts in a block of ``r`` rows and ``c`` columns, ``k = 2``
    when ``r >= tall`` (it may fill a column of the pod alone), else 1."""
    r = np.arange(1, f + 1)[:, None]
    c = np.arange(1, cols + 1)[None, :]
    room = np.minimum(f, r * c)                                       # (f, C): hosts it can hold
    whole = np.where(c == cols, room // cols, 0)
    cost = (w_row * (r - whole) + (w_col - mu * np.where(r >= tall, 2, 1)) * c).ravel()
    h = np.full(f + 2, np.inf)
    np.minimum.at(h, room.ravel(), cost)
    h = np.minimum.accumulate(h[::-1])[::-1][:f + 1]                  # holding at least a
    h[0] = 0.0
    return h


def _pod_costs(groups: list, problem: GridProblem) -> np.ndarray:
    """``H[A]``: a lower bound on ``Phi_d`` (module docstring) of a pod of these groups
    holding A hosts, for ``A = 0 .. sum(groups)``."""
    R, C = problem.rows, problem.cols
    w0, w1 = problem.weights[0], problem.weights[1]
    w_row, w_col = float(problem.w_row), float(problem.w_col)
    cap = sum(groups)
    A = np.arange(cap + 1)
    mus = np.asarray(MUS) * w_col
    tall_max = max(1, min(R, max(groups), cap // C + 1))               # the shortest column holds <= A / C
    inner = np.empty((tall_max, mus.size, cap + 1))                    # inner[t-1, mu, A]
    for t in range(1, tall_max + 1):
        for i, mu in enumerate(mus):
            total = np.full(cap + 1, np.inf)
            total[0] = 0.0
            for f in sorted(groups):
                total = min_plus(total, _group_blocks(f, t, C, w_row, w_col, mu), f, cap)
            inner[t - 1, i] = total + 2 * mu * C
    inner = inner.max(axis=1)                                          # the best multiplier per (t, A)
    best = np.full(cap + 1, np.inf)
    for W in range(cap // C + 1):
        for r_d in range(max(W, 1), R + 1):
            ok = (A <= r_d * C) & (A >= W * C) & (A > 0)
            if not ok.any():
                continue
            tall = np.clip(np.maximum(max(W, 1), A - (C - 1) * r_d), 1, tall_max)   # shortest column's hosts
            val = w1 * (w_row * (r_d - W) + w_col * C) + w0 * inner[tall - 1, A]
            best = np.where(ok, np.minimum(best, val), best)
    # pods over fewer columns: the perimeter blocks, both levels (no shared columns)
    r = np.arange(1, R + 1)[:, None]
    c = np.arange(1, C)[None, :]                                          # c_d < C: no whole rows
    narrow = (w_col * c + w_row * r).ravel()
    g1 = np.full(cap + 2, np.inf)
    np.minimum.at(g1, np.minimum(cap + 1, r * c).ravel(), narrow)
    g1 = np.minimum.accumulate(g1[::-1])[::-1][:cap + 1]                 # a box of r x c holding A
    g0 = block_cost(R, C, max(groups), problem.w_row, int(w_col)).astype(float)
    best = np.minimum(best, w1 * g1[:cap + 1] + w0 * nested_blocks(groups, cap, g0))
    best[0] = 0.0
    return best


def shared_columns_bound(problem: GridProblem) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs of
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.

    Returns
    -------
    float
        The bound; 0 without pods, when the hosts cannot hold the grid, or above
        :data:`MAX_WORK` steps.

    Examples
    --------
    Three stages of 4 hosts; pod 0 one group of 8, pod 1 groups of 8 and 5 (the pod tier
    weighs 3). The nested blocks see 10; here a group of pod 1 holding 2 stages' columns
    alone must touch both, else its columns hold both groups. The optimum is 12 (every
    label sequence).

    >>> from rankmap.placement.perimeter_bound import nested_perimeter_bound
    >>> p = GridProblem(3, 4, (8, 8, 5), 2, 3, domains=((0, 1, 1),), weights=(1.0, 3.0))
    >>> shared_columns_bound(p), nested_perimeter_bound(p)
    (10.75, 10.0)
    """
    R, C = problem.rows, problem.cols
    if not problem.domains or R < 2 or C < 2:
        return 0.0
    free = np.asarray(problem.free)
    pods = sorted(tuple(sorted(p)) for p in pod_free_hosts(problem))
    n = R * C
    caps = [sum(p) for p in pods]
    kinds = sorted(set(pods))
    tall = max(1, min(R, int(free.max()), max(caps) // C + 1))
    work = sum(len(p) * tall * len(MUS) * max(p) * (C + sum(p)) for p in kinds) + len(pods) * n * max(caps)
    if sum(caps) < n or work > MAX_WORK:
        return 0.0
    costs = {p: _pod_costs(list(p), problem) for p in kinds}
    best = least_total([(costs[p], cap) for p, cap in sorted(zip(pods, caps), key=lambda x: (x[1], x[0]))], n)
    if not np.isfinite(best):
        return 0.0
    w_col = problem.w_col if R > 1 else 0
    return max(0.0, float(best) - (problem.weights[0] + problem.weights[1]) * w_col * C)
