"""Pods first: lay the job over pods, then the ToR groups inside each pod.

On a fabric of several tiers a byte crossing pods also crosses the spine, so the pod tier
is decided first: the constructive layouts (:mod:`rankmap.placement.stage_runs_layout`,
:mod:`rankmap.placement.snake_layout`, :mod:`rankmap.placement.band_layout`) run on the
problem whose groups are the pods (:func:`rankmap.placement.tier_search.level_problem`),
and the cheapest few pod placements (by the pod tier's cost) are kept. Inside each pod
the rows (DP rings) it holds whole form a smaller grid, laid on the pod's ToR groups by the
same layouts (by the ToR tier's cost); the pod's cells in rows it shares with another pod
take, cell by cell, the ToR group of the neighbouring stage in the same column where it
has room (so the pipeline hop stays inside it), else that of the cell before, else the
group with the most room.

This is the decomposition Arnold (arXiv 2509.15940) uses for its scheduling: whole DP and
PP groups to pods (minipods) first, then the hosts inside them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from rankmap.placement.band_layout import band_cells
from rankmap.placement.grid_problem import GridProblem, grid_cost
from rankmap.placement.snake_layout import snake_cells
from rankmap.placement.stage_runs_layout import stage_runs_starts

__all__ = ["pods_first_starts"]

# Pod placements kept (cheapest first) and refined into ToR-group placements.
POD_PLACEMENTS = 3


def _layouts(problem: GridProblem) -> list[np.ndarray]:
    """The constructive layouts of a one-tier ``problem`` that fit its capacities."""
    R, C, free = problem.rows, problem.cols, problem.free
    out = stage_runs_starts(R, C, free)
    out += [snake_cells(R, C, free, lambda c: grid_cost(problem, c), tries=8, seed=0)]
    # bands of 2-8 stages, and one band of every stage (a group per column strip)
    heights = sorted(set(range(2, min(R, 8) + 1)) | ({R} if 1 < R <= 64 else set()))
    out += [band_cells(R, C, free, s, waste=w) for s in heights for w in (False, True)]
    cap = np.asarray(free)
    return [c for c in out if c is not None and (np.bincount(c.ravel(), minlength=cap.size) <= cap).all()]


def _fill_pod(problem: GridProblem, pods: np.ndarray, cells: np.ndarray, pod: int, groups: np.ndarray) -> bool:
    """Lay the ToR groups ``groups`` of ``pod`` on its cells of ``pods[R, C]`` into ``cells``;
    False when they do not fit."""
    mask = pods == pod
    left = np.asarray(problem.free)[groups].astype(np.int64)       # left[G]
    full = np.nonzero(mask.all(axis=1))[0]
    if full.size:
        sub = GridProblem(int(full.size), problem.cols, tuple(int(x) for x in left), problem.w_row, problem.w_col,
                          problem.w_wrap)
        options = _layouts(sub)
        if not options:
            return False
        best = min(options, key=lambda c: grid_cost(sub, c))
        cells[full] = groups[best]
        left -= np.bincount(best.ravel(), minlength=groups.size)
    where = {int(g): i for i, g in enumerate(groups)}
    for r in (r for r in range(problem.rows) if mask[r].any() and not mask[r].all()):
        prev = -1
        for c in np.nonzero(mask[r])[0]:
            near = [cells[q, c] for q in (r - 1, r + 1) if 0 <= q < problem.rows and mask[q, c] and cells[q, c] >= 0]
            choice = [where[int(g)] for g in near if left[where[int(g)]] > 0]
            if not choice and prev >= 0 and left[prev] > 0:
                choice = [prev]
            if not choice:
                if left.max() <= 0:
                    return False
                choice = [int(np.argmax(left))]
            prev = choice[0]
            cells[r, c] = groups[prev]
            left[prev] -= 1
    return True


def pods_first_starts(problem: GridProblem, pod_problem: GridProblem, key: Callable) -> list[np.ndarray]:
    """Placements ``cells[R, C]`` laid pods first (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With ``domains`` (``domains[0][K]``: the pod of each ToR group).
    pod_problem : GridProblem
        The same grid whose groups are the pods (free hosts summed per pod).
    key : callable
        ``key(cells) -> comparable``: the planner's ranking (lower is better).

    Returns
    -------
    list of ndarray
        Placements within every ToR group's free hosts; empty on a one-tier fabric.

    Examples
    --------
    Two pods of two groups of 2 hosts; two rings of 2 hosts: both in the first pod, one
    ring per ToR group (the pipeline hops cross the spine, not the core).

    >>> import dataclasses
    >>> p = GridProblem(2, 2, (2, 2, 2, 2), 10, 1, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
    >>> q = dataclasses.replace(p, free=(4, 4), domains=(), weights=(1.0,))
    >>> pods_first_starts(p, q, lambda c: 0)[0].tolist()
    [[0, 0], [1, 1]]
    """
    if not problem.domains:
        return []
    dom = np.asarray(problem.domains[0])
    by_pod = sorted(_layouts(pod_problem), key=lambda c: grid_cost(pod_problem, c))
    out = []
    for pods in by_pod[:POD_PLACEMENTS]:
        cells = np.full(pods.shape, -1, dtype=np.int64)
        if all(_fill_pod(problem, pods, cells, int(p), np.nonzero(dom == p)[0]) for p in np.unique(pods)):
            out.append(cells)
    return out
