"""What the search minimises: the objectives and the key that ranks placements by them.

Objectives, compared lexicographically in the order the user gives them, or summed with
weights (``("bytes", 1.0), ("uplink", 0.5)``):

- ``tiers`` (the default): bytes crossing each tier, times the tier's weight, summed
  (:func:`rankmap.placement.tier_search.tier_cost`; weights from
  :mod:`rankmap.placement.tier_weights`); on a flat fabric the same as ``bytes``;
- ``top-first``: bytes crossing each tier compared top tier first (lexicographic: the
  core, then the spine); ``--objective top-first,uplink``;
- ``bytes``: bytes crossing ToR groups per iteration (:func:`rankmap.placement.grid_problem.grid_cost`);
- ``spread``: the most ToR groups any DP ring spans (Arnold, arXiv 2509.15940, minimises
  the spread of communication groups);
- ``uplink``: the heaviest ToR group's uplink load (ECMP pressure);
- ``fragmentation``: ToR groups left partly used, i.e. neither untouched nor emptied (a
  job of 20 hosts on groups with 19, 10 and 10 free takes 10 + 10 and leaves 19 whole);
- ``moved``: node ranks whose host differs from a previous plan.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from rankmap.placement.grid_problem import GridProblem, grid_cost, grid_uplinks
from rankmap.placement.tier_search import tier_cost, tier_costs

__all__ = ["OBJECTIVES", "ranking"]

OBJECTIVES = ("tiers", "top-first", "bytes", "spread", "uplink", "fragmentation", "moved")


def ranking(problem: GridProblem, objectives: tuple, moved: Callable | None = None) -> Callable:
    """``key(cells) -> tuple`` ordering placements ``cells[R, C]`` by ``objectives`` (smaller
    is better).

    Parameters
    ----------
    problem : GridProblem
    objectives : tuple
        Names from :data:`OBJECTIVES` (lexicographic) or ``(name, weight)`` pairs, which
        are summed into one weighted value (bytes and uplink in the grid's cost units, the
        others as counts) before any plain names that follow.
    moved : callable, optional
        ``moved(cells) -> int`` for the "moved" objective (0 without).

    Returns
    -------
    callable

    Examples
    --------
    >>> key = ranking(GridProblem(1, 4, (4, 4), 10, 0), ("bytes", "fragmentation"))
    >>> key(np.array([[0, 0, 0, 0]])), key(np.array([[0, 0, 1, 1]]))
    ((0, 0), (20, 2))
    """
    K = len(problem.free)
    caps = np.asarray(problem.free)

    def value(name: str, cells: np.ndarray) -> float:
        if name == "tiers":
            return tier_cost(problem, cells)
        if name == "top-first":
            return tier_costs(problem, cells)[::-1]
        if name == "bytes":
            return grid_cost(problem, cells)
        if name == "spread":
            return max(len(np.unique(row)) for row in cells)
        if name == "uplink":
            return int(grid_uplinks(problem, cells).max())
        if name == "fragmentation":
            used = np.bincount(cells.ravel(), minlength=K)
            return int(((used > 0) & (used < caps)).sum())
        return moved(cells) if moved is not None else 0

    weighted = [o for o in objectives if isinstance(o, tuple)]
    plain = [o for o in objectives if not isinstance(o, tuple)]

    def key(cells: np.ndarray) -> tuple:
        head = (sum(w * value(n, cells) for n, w in weighted),) if weighted else ()
        return head + tuple(value(n, cells) for n in plain)

    if not weighted and plain:
        key.first = lambda cells: value(plain[0], cells)  # the leading value alone (a cheap pre-check)
    return key
