"""Tier-aware cost, bound and refinement of grid placements on fabrics of several tiers.

A grid placement ``cells[R, C]`` (:mod:`rankmap.placement.grid_problem`) names a ToR
group per host. At level ``l >= 1`` the same grid seen through ``domains[l-1]`` names a
pod (or higher domain) per host, and :func:`~rankmap.placement.grid_problem.grid_cost` of
that view counts the DP ring crossings and pipeline hops leaving level-``l`` domains. The
tier cost is ``sum_l weights[l] * cost_l`` (:func:`tier_cost`), the bound the sum of
per-level bounds (:func:`tier_bound`): each level's cost is at least the bound of the
problem whose groups are that level's domains, so the sum is a bound on the sum.

Refinement of a placement (:func:`refine`), each step kept only when the key improves:

- column order: columns sorted by their domains top level first, so that in every row
  whose columns agree a ring over k pods crosses the pod tier exactly k times and, inside
  each pod, the ToR tier once per ToR group (the DP ring follows column order);
- relabelling: the ToR groups the placement uses mapped onto groups that share pods,
  heaviest first (greedy on the traffic between groups);
- local search on tiny grids: moves and swaps of single cells;
- on very small grids, :func:`exhaustive` enumerates every placement (exact).

References
----------
MegaScale (NSDI 2024): data-intensive ranks under one ToR group; Arnold (arXiv 2509.15940):
minimise the pods a DP or PP group spans.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import numpy as np

from rankmap.placement.band_layout import band_cells
from rankmap.placement.crossing_bound import crossing_lower_bound
from rankmap.placement.grid_problem import GridProblem, grid_cost
from rankmap.placement.lower_bounds import analytic_lower_bound, band_lower_bound
from rankmap.placement.perimeter_bound import nested_perimeter_bound, perimeter_lower_bound
from rankmap.placement.pod_pattern_bound import pod_pattern_bound
from rankmap.placement.pod_profile_bound import pod_profile_bound
from rankmap.placement.pod_rows_bound import pod_rows_bound
from rankmap.placement.shared_columns_bound import shared_columns_bound
from rankmap.placement.snake_layout import snake_cells
from rankmap.placement.stacking_bound import stacking_bound

__all__ = ["level_view", "level_problem", "tier_costs", "tier_cost", "level_maps", "tier_bound", "tier_bound_method",
           "nested_free", "nested_starts",
           "refine", "exhaustive", "EXHAUSTIVE_MAX"]

# Enumerate every placement when K ** (R * C) is at most this (exact on tiny grids).
EXHAUSTIVE_MAX = 1 << 17
# Local search (single-cell moves and swaps) on grids of at most this many cells.
LOCAL_SEARCH_MAX_CELLS = 48


def level_view(problem: GridProblem, cells: np.ndarray, level: int) -> np.ndarray:
    """``cells`` (any shape) as level-``level`` domain indices (level 0: unchanged)."""
    return cells if level == 0 else np.asarray(problem.domains[level - 1])[cells]


def level_problem(problem: GridProblem, level: int) -> GridProblem:
    """The problem whose groups are the level-``level`` domains (free hosts summed per domain)."""
    if level == 0:
        return problem
    dom = np.asarray(problem.domains[level - 1])
    free = np.bincount(dom, weights=np.asarray(problem.free), minlength=int(dom.max()) + 1).astype(int)
    return dataclasses.replace(problem, free=tuple(int(f) for f in free), domains=(), weights=(1.0,))


def tier_costs(problem: GridProblem, cells: np.ndarray) -> tuple[int, ...]:
    """``cost[L]``: grid cost (units) of the crossings leaving each level's domains
    (:func:`~rankmap.placement.grid_problem.grid_cost` of ``cells[R, C]`` seen at each level,
    :func:`level_view`, with the domain maps made once per fabric: the search scores ~10^5
    grids)."""
    L = len(problem.weights)
    maps = level_maps(problem.domains[:L - 1], len(problem.free)) if L > 1 else None
    return (grid_cost(problem, cells),) + tuple(grid_cost(problem, maps[lv][cells]) for lv in range(1, L))


@functools.lru_cache(maxsize=64)
def level_maps(domains: tuple, groups: int) -> np.ndarray:
    """``maps[L, K]``: each ToR group's domain at every level (level 0: the group itself)."""
    maps = np.stack([np.arange(groups)] + [np.asarray(d, dtype=np.int64) for d in domains])
    maps.flags.writeable = False
    return maps


def tier_cost(problem: GridProblem, cells: np.ndarray) -> float:
    """``sum_l weights[l] * cost[l]`` (units).

    Examples
    --------
    Two pods of two groups; a ring of 4 hosts over groups 0, 2, 1, 3 crosses pods 4 times.

    >>> p = GridProblem(1, 4, (1, 1, 1, 1), 1, 0, domains=((0, 0, 1, 1),), weights=(1.0, 3.0))
    >>> tier_cost(p, np.array([[0, 2, 1, 3]])), tier_cost(p, np.array([[0, 1, 2, 3]]))
    (16.0, 10.0)
    """
    return float(sum(w * c for w, c in zip(problem.weights, tier_costs(problem, cells))))


def tier_bound(problem: GridProblem, bound0: int) -> float:
    """A lower bound (units) on :func:`tier_cost` of every placement: per level the largest
    of the analytic and band bounds of :func:`level_problem` (``bound0`` also at level 0)
    and, on fabrics of several tiers, the counting bound of
    :func:`~rankmap.placement.crossing_bound.crossing_lower_bound` (whole rings against
    split ones); on every fabric the perimeter bound of
    :func:`~rankmap.placement.perimeter_bound.perimeter_lower_bound` (rows and columns
    each domain touches). On fabrics of several tiers, the ToR and pod levels together are
    also bounded jointly (:func:`~rankmap.placement.pod_profile_bound.pod_profile_bound`),
    and so are the ToR groups' and pods' blocks
    (:func:`~rankmap.placement.perimeter_bound.nested_perimeter_bound`, and with the pods'
    columns that no group fills alone,
    :func:`~rankmap.placement.shared_columns_bound.shared_columns_bound`, and with each pod's
    row pieces filled by its groups, :func:`~rankmap.placement.pod_rows_bound.pod_rows_bound`,
    and with each pod's box of rows and columns filled by its groups,
    :func:`~rankmap.placement.pod_box_bound.pod_box_bound`, computed within the stronger
    :func:`~rankmap.placement.pod_pattern_bound.pod_pattern_bound`, which also enumerates
    which groups touch each of a pod's rows, and with the pods met by each column stacking up
    to every stage, :func:`~rankmap.placement.stacking_bound.stacking_bound`); the largest sum
    is returned."""
    return tier_bound_method(problem, bound0)[0]


def tier_bound_method(problem: GridProblem, bound0: int) -> tuple[float, str]:
    """:func:`tier_bound`, and which sum it is: ``"per tier"`` or ``"ToR and pod tiers jointly (...)"``
    naming the joint bound."""
    levels = []
    for lv, w in enumerate(problem.weights):
        p = level_problem(problem, lv)
        b = max(analytic_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col, p.w_wrap),
                band_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col))
        if problem.domains:
            b = max(b, crossing_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col))
        b = max(b, perimeter_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col))
        levels.append(w * (max(b, bound0) if lv == 0 else b))
    total = float(sum(levels))
    if problem.domains:
        rest = float(sum(levels[2:]))
        for joint, how in ((pod_profile_bound(problem) + rest, "ToR and pod tiers jointly (pod profiles)"),
                           (nested_perimeter_bound(problem) + rest, "ToR and pod tiers jointly (nested blocks)"),
                           (shared_columns_bound(problem) + rest, "ToR and pod tiers jointly (shared columns)"),
                           (pod_rows_bound(problem) + rest, "ToR and pod tiers jointly (pod rows)"),
                           (pod_pattern_bound(problem) + rest, "ToR and pod tiers jointly (pod patterns)"),
                           (None, "ToR and pod tiers jointly (stacking)")):
            if joint is None:                                        # told the best so far (skips work only)
                joint = stacking_bound(problem, beat=total - rest) + rest
            if joint > total:
                total, best = joint, how
        if total > float(sum(levels)):
            return total, best
    return total, "per tier"


def nested_free(problem: GridProblem) -> tuple[int, ...]:
    """``free[K]`` kept only in the fewest domains that hold the job, top level first, best fit
    (Slurm topology/tree and Kueue "BestFit": largest domains first, then the smallest that
    fits the rest); ties by domain index."""
    need = problem.rows * problem.cols
    free = np.asarray(problem.free).copy()
    for level in range(len(problem.domains), 0, -1):
        dom = np.asarray(problem.domains[level - 1])
        room = np.bincount(dom, weights=free, minlength=int(dom.max()) + 1)
        keep, left = [], need
        order = sorted(range(room.size), key=lambda d: (-room[d], d))
        for d in order:
            if left <= 0 or room[d] == 0:
                break
            if room[d] >= left:
                d = min((x for x in order if x not in keep and room[x] >= left), key=lambda x: (room[x], x))
            keep.append(d)
            left -= room[d]
        free[~np.isin(dom, keep)] = 0
    return tuple(int(f) for f in free)


def nested_starts(problem: GridProblem) -> list:
    """Snake and band layouts (:mod:`rankmap.placement.snake_layout`,
    :mod:`rankmap.placement.band_layout`) on the hosts of :func:`nested_free` only: the job
    in the fewest pods (Arnold's spread minimisation); empty when that keeps every host."""
    free = nested_free(problem)
    if free == tuple(problem.free):
        return []
    sub = dataclasses.replace(problem, free=free)
    R, C = problem.rows, problem.cols
    out = [snake_cells(R, C, free, lambda c: tier_cost(sub, c), seed=0)]
    out += [band_cells(R, C, free, s, waste=w) for s in range(2, min(R, 4) + 1) for w in (False, True)]
    return [c for c in out if c is not None]


def _column_order(problem: GridProblem, cells: np.ndarray) -> np.ndarray:
    """Columns sorted by their domains, top level first, down to the ToR group, row by row."""
    views = [level_view(problem, cells, lv) for lv in range(len(problem.weights) - 1, -1, -1)]
    keys = [v[r] for r in range(cells.shape[0]) for v in views]
    return cells[:, np.lexsort(keys[::-1])]


def _relabel(problem: GridProblem, cells: np.ndarray) -> np.ndarray:
    """Map the placement's groups onto groups that share domains, heaviest traffic first."""
    K = len(problem.free)
    used = np.bincount(cells.ravel(), minlength=K)
    adj = np.zeros((K, K))
    for a, b, w in ((cells, np.roll(cells, -1, axis=1), problem.w_row), (cells[:-1], cells[1:], problem.w_col)):
        np.add.at(adj, (a.ravel(), b.ravel()), w)
    adj = adj + adj.T
    dom = np.asarray(problem.domains).reshape(len(problem.domains), K)            # (L-1, K)
    penalty = sum(w * (dom[lv - 1][:, None] != dom[lv - 1][None, :]) for lv, w in enumerate(problem.weights)
                  if lv >= 1)                                                     # (K, K)
    free = np.asarray(problem.free)
    nested = np.asarray(nested_free(problem)) > 0
    target = np.full(K, -1)
    taken = np.zeros(K, dtype=bool)
    for a in sorted(np.nonzero(used)[0], key=lambda a: (-used[a], -adj[a].sum(), a)):
        placed = np.nonzero(target >= 0)[0]
        ok = np.nonzero(~taken & (free >= used[a]))[0]
        cost = [(float((adj[a, placed] * penalty[g, target[placed]]).sum()), not nested[g], free[g], g) for g in ok]
        g = min(cost)[3]
        target[a], taken[g] = g, True
    return target[cells]


def _local_search(problem: GridProblem, cells: np.ndarray, key: Callable, feasible: Callable) -> np.ndarray:
    """First-improvement moves (a cell to another group) and swaps (two cells), until none helps."""
    best, best_key = cells.copy(), key(cells)
    K = len(problem.free)
    for _ in range(20):
        improved = False
        n = best.size
        for i in range(n):
            trials = []
            for j in range(i + 1, n):
                t = best.copy().ravel()
                t[i], t[j] = t[j], t[i]
                trials.append(t)
            for g in range(K):
                t = best.copy().ravel()
                t[i] = g
                trials.append(t)
            for t in trials:
                t = t.reshape(best.shape)
                if feasible(t) and key(t) < best_key:
                    best, best_key, improved = t, key(t), True
        if not improved:
            break
    return best


def refine(problem: GridProblem, cells: np.ndarray, key: Callable, feasible: Callable) -> np.ndarray:
    """The best of ``cells``, its columns reordered, relabelled, and (tiny grids) locally
    improved, by ``key`` among the ``feasible`` ones."""
    options = [cells, _column_order(problem, cells)]
    if len(problem.weights) > 1 and len(problem.free) <= 512:
        options += [_relabel(problem, c) for c in list(options)]
        options += [_column_order(problem, c) for c in options[2:]]
    best = min((c for c in options if feasible(c)), key=key, default=cells)
    if best.size <= LOCAL_SEARCH_MAX_CELLS:
        best = _local_search(problem, best, key, feasible)
    return best


def exhaustive(problem: GridProblem, key: Callable) -> np.ndarray | None:
    """The best placement by ``key`` among all of them (within capacities), or None when
    there are more than :data:`EXHAUSTIVE_MAX` label sequences."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    if K ** (R * C) > EXHAUSTIVE_MAX:
        return None
    codes = np.arange(K ** (R * C))
    seq = (codes[:, None] // K ** np.arange(R * C)[None, :]) % K                   # (M, R*C)
    counts = np.stack([(seq == g).sum(axis=1) for g in range(K)], axis=1)          # (M, K)
    seq = seq[(counts <= np.asarray(problem.free)[None, :]).all(axis=1)].reshape(-1, R, C)
    if not len(seq):
        return None
    cost = np.zeros(len(seq))
    for lv, w in enumerate(problem.weights):
        v = level_view(problem, seq, lv)
        c = problem.w_row * (v != np.roll(v, -1, axis=2)).sum(axis=(1, 2)) if C > 1 else 0
        if R > 1:
            c = c + problem.w_col * (v[:, :-1] != v[:, 1:]).sum(axis=(1, 2))
            c = c + problem.w_wrap * (v[:, -1] != v[:, 0]).sum(axis=1)
        cost = cost + w * c
    ties = seq[np.nonzero(cost <= cost.min() + 1e-9)[0][:4096]]
    return min(ties, key=key)
