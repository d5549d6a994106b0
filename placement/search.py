"""Search for the best grid placement: constructive starts, bounds, then CP-SAT.

Objectives, compared lexicographically in the order the user gives them, or summed with
weights (``("bytes", 1.0), ("uplink", 0.5)``):

- ``bytes``: bytes crossing ToR groups per iteration (the cost of :mod:`rankmap.placement.solver`);
- ``spread``: the most ToR groups any DP ring spans (Arnold, arXiv 2509.15940, minimises
  the spread of communication groups);
- ``uplink``: the heaviest ToR group's uplink load (ECMP pressure);
- ``fragmentation``: ToR groups left partly used, i.e. neither untouched nor emptied (a
  job of 20 hosts on groups with 19, 10 and 10 free takes 10 + 10 and leaves 19 whole);
- ``moved``: node ranks whose host differs from a previous plan.

CP-SAT optimises ``bytes`` or ``spread`` (whichever comes first); the other objectives
break ties among the candidates.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from rankmap.placement.blocks import block_cells
from rankmap.placement.bounds import analytic_lower_bound
from rankmap.placement.snake import snake_cells
from rankmap.placement.solver import GridProblem, GridSolution, grid_cost, grid_lower_bound, grid_uplinks, solve_grid

__all__ = ["OBJECTIVES", "ranking", "search"]

OBJECTIVES = ("bytes", "spread", "uplink", "fragmentation", "moved")

# Above this many (stage, ToR group) pairs the CP-SAT models run only when pins require
# them: the block layouts and the analytic bound already close the gap, and the models
# grow slow.
CP_SAT_MAX_PAIRS = 1500


def ranking(problem: GridProblem, objectives: tuple, moved: Callable | None = None) -> Callable:
    """``key(cells) -> tuple`` ordering placements by ``objectives`` (smaller is better).

    ``objectives`` lists names (lexicographic) or ``(name, weight)`` pairs, which are
    summed into one weighted value (bytes and uplink in the grid's cost units, the others
    as counts) before any plain names that follow.
    """
    K = len(problem.free)
    caps = np.asarray(problem.free)

    def value(name: str, cells: np.ndarray) -> float:
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

    return key


def _starts(problem: GridProblem, greedy: np.ndarray, key: Callable, seed: int, row_pins: dict) -> list:
    """Greedy, the row snake and block layouts of 2-4 rows (each also leaving the rest of cut
    groups unused where spare hosts allow); rows pinned to a ToR group are laid first and
    the rest of the grid is laid around them."""
    R, C = problem.rows, problem.cols
    caps = list(problem.free)
    for g in row_pins.values():
        caps[g] -= C
    free_rows = [r for r in range(R) if r not in row_pins]
    starts = [greedy] if not row_pins else []
    if min(caps) < 0 or not free_rows:
        parts = [] if min(caps) < 0 else [np.empty((0, C), dtype=np.int64)]
    else:
        sub = GridProblem(len(free_rows), C, tuple(caps), problem.w_row, problem.w_col, problem.w_wrap)
        sub_key = ranking(sub, ("bytes", "uplink"))
        # The layouts' own tries use a fixed seed: a plan they prove optimal is the same for every --seed.
        parts = [snake_cells(sub.rows, C, sub.free, sub_key, seed=0)]
        parts += [block_cells(sub.rows, C, sub.free, s, waste=w) for s in range(2, min(sub.rows, 4) + 1)
                  for w in (False, True)]
    for part in parts:
        if part is None:
            continue
        cells = np.empty((R, C), dtype=np.int64)
        for r, g in row_pins.items():
            cells[r] = g
        cells[free_rows] = part
        starts.append(cells)
    return starts


def _feasible(problem: GridProblem, cells: np.ndarray, pins: dict) -> bool:
    """Within every group's capacity (quotas included) and on every pin."""
    if (np.bincount(cells.ravel(), minlength=len(problem.free)) > np.asarray(problem.free)).any():
        return False
    return all((cells[where] == g).all() for where, g in pins.items())


def search(problem: GridProblem, greedy: np.ndarray, *, objectives: tuple = ("bytes", "uplink"),
           pins: dict | None = None, moved: Callable | None = None, time_limit_s: float = 20.0, seed: int = 0,
           workers: int = 1, others: tuple = ()) -> tuple[GridSolution | None, int, str]:
    """Best placement found, a lower bound on its ``bytes`` cost, and how the bound was found.

    Parameters
    ----------
    problem : GridProblem
    greedy : ndarray
        ``greedy[R, C]``: the topology-greedy baseline as cells (always feasible without pins).
    objectives : tuple of str
        From :data:`OBJECTIVES`, most important first.
    pins : dict, optional
        ``{(row, col): group}`` and ``{row: group}`` constraints (see :func:`solve_grid`).
    moved : callable, optional
        ``moved(cells) -> int`` for the "moved" objective.
    others : tuple of ndarray
        More placements to consider (e.g. every baseline's), so the result is never worse
        than any of them on the objectives.

    Returns
    -------
    (GridSolution or None, int, str)
        None when pins cannot be met within the budget. The bound is in cost units and
        holds for every placement of the problem (pins only remove placements).
    """
    pins = pins or {}
    key = ranking(problem, objectives, moved)
    cost = functools.partial(grid_cost, problem)
    row_pins = {w: g for w, g in pins.items() if not isinstance(w, tuple)}
    starts = _starts(problem, greedy, key, seed, row_pins) + list(others)
    candidates = [c for c in starts if _feasible(problem, c, pins)]
    hint = min(candidates, key=key) if candidates else None
    R, C, free = problem.rows, problem.cols, problem.free
    bound, method = analytic_lower_bound(R, C, free, problem.w_row, problem.w_col, problem.w_wrap), "analytic"
    small = R * len(free) <= CP_SAT_MAX_PAIRS
    if small and (hint is None or cost(hint) > bound):
        relaxed, _ = grid_lower_bound(problem, max(1.0, time_limit_s / 4), seed, workers,
                                      hint if hint is not None else greedy)
        if relaxed > bound:
            bound, method = relaxed, "relaxation"
    first = objectives[0] if objectives else "bytes"
    primary = first if first in ("bytes", "spread") else "bytes"  # weighted: CP-SAT minimises bytes
    done = hint is not None and cost(hint) <= bound and primary == "bytes"
    if done:
        return GridSolution(hint, cost(hint), "OPTIMAL", 0.0), bound, method
    if not small and hint is not None and primary == "bytes":
        return GridSolution(hint, cost(hint), "HEURISTIC", 0.0), bound, method
    sol = solve_grid(problem, hint, time_limit_s, seed, workers, pins=pins, primary=primary)
    if sol is None:
        return None, bound, method
    if hint is not None and key(hint) <= key(sol.cells):  # ties go to the deterministic layouts
        status = sol.status if key(hint) == key(sol.cells) else "HEURISTIC"
        return GridSolution(hint, cost(hint), status, sol.solve_time_s), bound, method
    return sol, bound, method
