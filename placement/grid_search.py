"""Search for the best grid placement: constructive starts, bounds, then CP-SAT.

The steps follow the OR-Tools CP-SAT samples: constructive placements (the greedy
solution: :mod:`rankmap.placement.snake_layout`, :mod:`rankmap.placement.band_layout`,
:mod:`rankmap.placement.stage_runs_layout` and the baselines), the lower bounds
(:mod:`rankmap.placement.lower_bounds`), then the CP-SAT model
(:mod:`rankmap.placement.cpsat_model`) with the best start as its hint, when the starts do not
already meet the bound. CP-SAT optimises ``bytes`` or ``spread`` (whichever
comes first of the objectives, :mod:`rankmap.placement.objectives`); the other
objectives break ties among the candidates. On fabrics of several tiers the starts also
include layouts made pods first (:mod:`rankmap.placement.pods_first`) and whole rings in the
larger pods with split rings paired in the smaller ones
(:mod:`rankmap.placement.split_pairs_layout`) and, for deep pipelines, pods as bands of
stages with their ToR groups in column strips (:mod:`rankmap.placement.pod_strips_layout`)
or with their groups' hosts per stage by a small CP-SAT count model per pod
(:mod:`rankmap.placement.pod_counts_layout`), rings of whole ToR groups where a ring needs
several (:mod:`rankmap.placement.ring_sets_layout`), pods in bands of stages with their groups in sub-bands inside them
(:mod:`rankmap.placement.nested_bands_layout`), and count exchanges
(:mod:`rankmap.placement.count_search`) run from the best start and the best pods-first
starts, and single-cell moves and swaps (:mod:`rankmap.placement.local_search`) smooth
the best result's ragged edges, and where rings need several groups two rings at a time are
shared out again (:mod:`rankmap.placement.row_pairs_search`); the bound adds the perimeter bound per tier
(:mod:`rankmap.placement.perimeter_bound`), or bounds the ToR and pod tiers jointly
(:mod:`rankmap.placement.pod_profile_bound`, the nested blocks of
:mod:`rankmap.placement.perimeter_bound`, :mod:`rankmap.placement.shared_columns_bound`)
where that is larger.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from typing import Callable

import numpy as np

from rankmap.placement.band_layout import band_cells
from rankmap.placement.band_trim import retrimmed_starts
from rankmap.placement.count_search import count_search
from rankmap.placement.cpsat_model import solve_grid
from rankmap.placement.grid_problem import GridPins, GridProblem, GridSolution, grid_cost
from rankmap.placement.local_search import improve
from rankmap.placement.lower_bounds import analytic_lower_bound, relaxation_lower_bound
from rankmap.placement.nested_bands_layout import nested_bands_starts
from rankmap.placement.objectives import ranking
from rankmap.placement.pod_counts_layout import pod_counts_starts
from rankmap.placement.pod_strips_layout import pod_strips_starts
from rankmap.placement.pods_first import BAND_FILLS, CLASSIC_FILLS, PAIR_FILLS, pods_first_starts
from rankmap.placement.ring_sets_layout import ring_sets_starts
from rankmap.placement.row_pairs_search import row_pairs_search
from rankmap.placement.snake_layout import snake_cells
from rankmap.placement.split_pairs_layout import split_pairs_starts
from rankmap.placement.split_rows_bound import split_rows_tier_bound
from rankmap.placement.split_rows_layout import split_rows_starts
from rankmap.placement.stage_runs_layout import stage_runs_starts
from rankmap.placement.status import SolverStatus
from rankmap.placement.tier_model import tier_model_solve
from rankmap.placement.tier_search import (
    exhaustive,
    level_problem,
    nested_starts,
    refine,
    tier_bound_method,
    tier_cost,
    tier_costs,
)

__all__ = ["CP_SAT_MAX_PAIRS", "TIER_MODEL_MAX_PAIRS", "constructive_starts", "search"]

# Above this many (stage, ToR group) pairs the CP-SAT models run only when pins require
# them: the band layouts and the analytic bound already close the gap, and the models
# grow slow.
CP_SAT_MAX_PAIRS = 1500
# Above this many (stage, tier domain) pairs the joint model of every tier
# (:mod:`rankmap.placement.tier_model`) is not run: on 60 random instances of 2-8 stages and
# 6-16 ToR groups it proved the optimum at 30 and 51 pairs and stayed 50-65% below the
# analytic bound at 48-132 pairs; on the default example (240 pairs) and the 12,288-GPU
# benchmark instances (240-960 pairs) it never found a cheaper plan and its bound stayed
# 17-90% below the analytic one, at 1-6 s CPU each.
TIER_MODEL_MAX_PAIRS = 64
# Count exchanges scored per search: about this many grid cells scored in all (each score
# decodes and measures a whole grid), so that deep pipelines stay within seconds.
COUNT_SEARCH_CELLS = 6_000_000
# Pods-first starts (cheapest first) from which count exchanges run, besides the best start;
# and banded pods-first starts, besides those.
POD_STARTS_SEARCHED = 3
BANDED_SEARCHED = 2
# Nested band starts (cheapest first, distinct) from which count exchanges run: their
# local optima differ more than their starting costs do.
NESTED_SEARCHED = 3


def constructive_starts(problem: GridProblem, greedy: np.ndarray, row_pins: dict, snake: bool = True) -> list:
    """Greedy, the row snake, band layouts of 2-4 rows (each also leaving the rest of cut
    groups unused where spare hosts allow) and stage runs (:mod:`rankmap.placement.stage_runs_layout`);
    rows pinned to a ToR group are laid first and
    the rest of the grid is laid around them.

    Parameters
    ----------
    problem : GridProblem
    greedy : ndarray
        ``greedy[R, C]``: the topology-greedy baseline as cells (dropped when rows are pinned).
    row_pins : dict of int to int
        ``{row: group}`` (:attr:`GridPins.rows`).
    snake : bool
        Whether to make the row snake (:mod:`rankmap.placement.snake_layout`; 128 tries).

    Returns
    -------
    list of ndarray
        Placements ``cells[R, C]``, not checked against capacities or cell pins.
    """
    R, C = problem.rows, problem.cols
    caps = list(problem.free)
    for g in row_pins.values():
        caps[g] -= C
    free_rows = [r for r in range(R) if r not in row_pins]
    starts = [greedy] if not row_pins else []
    if min(caps) < 0 or not free_rows:
        parts = [] if min(caps) < 0 else [np.empty((0, C), dtype=np.int64)]
    else:
        sub = GridProblem(len(free_rows), C, tuple(caps), problem.w_row, problem.w_col, problem.w_wrap,
                          problem.domains, problem.weights)
        sub_key = ranking(sub, ("tiers", "uplink"))
        # The layouts' own tries use a fixed seed: a plan they prove optimal is the same for every --seed.
        parts = [snake_cells(sub.rows, C, sub.free, sub_key, seed=0)] if snake else []
        parts += [band_cells(sub.rows, C, sub.free, s, waste=w) for s in range(2, min(sub.rows, 4) + 1)
                  for w in (False, True)]
        # Deep pipelines: consecutive stages filling one group after another (after the
        # others, so that ties keep the earlier layouts' plans).
        parts += stage_runs_starts(sub.rows, C, sub.free)
    for part in parts:
        if part is None:
            continue
        cells = np.empty((R, C), dtype=np.int64)
        for r, g in row_pins.items():
            cells[r] = g
        cells[free_rows] = part
        starts.append(cells)
    return starts


def _feasible(problem: GridProblem, cells: np.ndarray, pins: GridPins) -> bool:
    """Within every group's capacity (quotas included) and on every pin."""
    if (np.bincount(cells.ravel(), minlength=len(problem.free)) > np.asarray(problem.free)).any():
        return False
    return pins.holds(cells)


def _lower_bound(problem: GridProblem, hint: np.ndarray | None, greedy: np.ndarray, small: bool,
                 time_limit_s: float, seed: int, workers: int) -> tuple[int, str]:
    """The larger of the analytic and (for small models whose hint misses the analytic
    bound) the relaxation bound, in cost units, and which it was."""
    R, C, free = problem.rows, problem.cols, problem.free
    bound, method = analytic_lower_bound(R, C, free, problem.w_row, problem.w_col, problem.w_wrap), "analytic"
    if small and (hint is None or grid_cost(problem, hint) > bound):
        relaxed, _ = relaxation_lower_bound(problem, max(1.0, time_limit_s / 4), seed, workers,
                                            hint if hint is not None else greedy)
        if relaxed > bound:
            bound, method = relaxed, "relaxation"
    return bound, method


def search(problem: GridProblem, greedy: np.ndarray, *, objectives: tuple = ("bytes", "uplink"),
           pins: GridPins | None = None, moved: Callable | None = None, time_limit_s: float = 20.0, seed: int = 0,
           workers: int = 1, others: tuple = (), with_bound: bool = True) -> tuple[GridSolution | None, int, str]:
    """Best placement found, a lower bound on its ``bytes`` cost, and how the bound was found.

    Parameters
    ----------
    problem : GridProblem
    greedy : ndarray
        ``greedy[R, C]``: the topology-greedy baseline as cells (always feasible without pins).
    objectives : tuple
        From :data:`rankmap.placement.objectives.OBJECTIVES`, most important first, or
        ``(name, weight)`` pairs.
    pins : GridPins, optional
        Rows and cells that must lie in given ToR groups.
    moved : callable, optional
        ``moved(cells) -> int`` for the "moved" objective.
    time_limit_s : float
        CP-SAT deterministic time budget; the relaxation bound gets a quarter (at least 1).
    seed, workers : int
        CP-SAT's random seed and worker count.
    others : tuple of ndarray
        More placements to consider (e.g. every baseline's), so the result is never worse
        than any of them on the objectives.
    with_bound : bool
        False when only the placement is wanted: on fabrics of several tiers, grids too large
        for the joint tier model then skip the analytic bounds (bound 0, status HEURISTIC).

    Returns
    -------
    (GridSolution or None, int, str)
        None when pins cannot be met within the budget. The bound is in cost units and
        holds for every placement of the problem (pins only remove placements).
    """
    pins = pins or GridPins()
    key = ranking(problem, objectives, moved)
    first = objectives[0] if objectives else "tiers"
    first = first[0] if isinstance(first, tuple) else first
    if first in ("tiers", "top-first"):
        return _search_tiers(problem, greedy, key, pins, time_limit_s, seed, workers, others, with_bound)
    starts = constructive_starts(problem, greedy, pins.rows) + list(others)
    candidates = [c for c in starts if _feasible(problem, c, pins)]
    hint = min(candidates, key=key) if candidates else None
    small = problem.rows * len(problem.free) <= CP_SAT_MAX_PAIRS
    bound, method = _lower_bound(problem, hint, greedy, small, time_limit_s, seed, workers)
    primary = first if first in ("bytes", "spread") else "bytes"  # weighted: CP-SAT minimises bytes
    if hint is not None and primary == "bytes" and grid_cost(problem, hint) <= bound:
        return GridSolution(hint, grid_cost(problem, hint), SolverStatus.OPTIMAL, 0.0), bound, method
    if not small and hint is not None and primary == "bytes":
        return GridSolution(hint, grid_cost(problem, hint), SolverStatus.HEURISTIC, 0.0), bound, method
    sol = solve_grid(problem, hint, time_limit_s, seed, workers, pins=pins, primary=primary)
    if sol is None:
        return None, bound, method
    if hint is not None and key(hint) <= key(sol.cells):  # ties go to the deterministic layouts
        status = sol.status if key(hint) == key(sol.cells) else SolverStatus.HEURISTIC
        return GridSolution(hint, grid_cost(problem, hint), status, sol.solve_time_s), bound, method
    return sol, bound, method


def _search_tiers(problem: GridProblem, greedy: np.ndarray, key: Callable, pins: GridPins, time_limit_s: float,
                  seed: int, workers: int, others: tuple,
                  with_bound: bool = True) -> tuple[GridSolution | None, float, str]:
    """The search for the tier objectives: starts (also in the fewest pods, and laid pods
    first, :mod:`rankmap.placement.pods_first`), refined
    (:func:`rankmap.placement.tier_search.refine`), exhaustive on tiny grids. Several tiers:
    count exchanges (:mod:`rankmap.placement.count_search`) and the joint model of every tier
    (:mod:`rankmap.placement.tier_model`, plan and bound). One tier: CP-SAT's interval
    model. OPTIMAL only when the tier bound is met or every placement was enumerated."""
    def feasible(c: np.ndarray) -> bool:
        return _feasible(problem, c, pins)

    pod_layouts = bool(problem.domains) and not pins
    # Where the pod layouts below are made they start better than the row snake, which never led
    # to the plan on the benchmark's three-tier instances (12,288 and 100,000 GPUs; it took up to
    # 3 s there and once led the count search to a worse plan), so it is left out.
    starts = constructive_starts(problem, greedy, pins.rows, snake=not pod_layouts) + list(others)
    if pod_layouts:
        starts += nested_starts(problem) + pod_strips_starts(problem) + pod_counts_starts(problem)
        starts += split_rows_starts(problem)
    candidates = [c for c in starts if feasible(c)]
    if candidates:
        candidates += [refine(problem, c, key, feasible) for c in _refine_picks(problem, candidates, key)]
    exact = exhaustive(problem, key) if not pins else None
    if exact is not None:
        return (GridSolution(exact, grid_cost(problem, exact), SolverStatus.OPTIMAL, 0.0),
                tier_cost(problem, exact), "exhaustive")
    if pod_layouts:
        pod_problem = level_problem(problem, 1)
        pods_first = [c for c in pods_first_starts(problem, pod_problem, key, CLASSIC_FILLS) if feasible(c)]
        # banded fills and split pairs: one more count search each, never displacing the above
        banded = [c for c in pods_first_starts(problem, pod_problem, key, BAND_FILLS) if feasible(c)]
        split = [c for c in split_pairs_starts(problem) if feasible(c)]
        # and column strips of stacked group pairs: one more (never displacing the banded ones)
        stacked = [c for c in pods_first_starts(problem, pod_problem, key, PAIR_FILLS) if feasible(c)]
        # and pods in bands with their groups in sub-bands inside them (also laid again with the
        # spare hosts cutting pods to whole columns, band_trim): the best few distinct ones
        # and rings of whole ToR groups (bin covering): one more
        rings = [c for c in ring_sets_starts(problem) if feasible(c)]
        pairs = sorted(banded, key=key)[:BANDED_SEARCHED] + [min(c, key=key) for c in (split, stacked, rings) if c]
        pairs += _best_distinct(itertools.chain(nested_bands_starts(problem), retrimmed_starts(problem)), key, feasible,
                                NESTED_SEARCHED)
        return _search_levels(problem, candidates, pods_first, pairs, key, feasible, time_limit_s, seed, workers,
                              with_bound)
    hint = min(candidates, key=key) if candidates else None
    small = problem.rows * len(problem.free) <= CP_SAT_MAX_PAIRS
    bound0, method = _lower_bound(problem, hint, greedy, small, time_limit_s, seed, workers)
    bound, how = tier_bound_method(problem, bound0)
    method += _method_tail(how) if problem.domains else " + band"
    # CP-SAT minimises the ToR-level cost only: once the hint meets that bound it cannot help.
    level0_done = problem.domains and hint is not None and grid_cost(problem, hint) <= bound0
    if hint is not None and (tier_cost(problem, hint) <= bound + 1e-9 or not small or level0_done):
        status = SolverStatus.OPTIMAL if tier_cost(problem, hint) <= bound + 1e-9 else SolverStatus.HEURISTIC
        return GridSolution(hint, grid_cost(problem, hint), status, 0.0), bound, method
    sol = solve_grid(problem, hint, time_limit_s, seed, workers, pins=pins, primary="bytes")
    if sol is None:
        return None, bound, method
    solved = refine(problem, sol.cells, key, feasible) if problem.domains else sol.cells
    best = solved if hint is None or key(solved) < key(hint) else hint
    proven = tier_cost(problem, best) <= bound + 1e-9 or (
        not problem.domains and sol.status == SolverStatus.OPTIMAL and key(best) == key(sol.cells))
    status = SolverStatus.OPTIMAL if proven else SolverStatus.HEURISTIC
    if not problem.domains and not proven and best is hint and key(hint) == key(sol.cells):
        status = sol.status
    return GridSolution(best, grid_cost(problem, best), status, sol.solve_time_s), bound, method


def _method_tail(how: str) -> str:
    """The bound's name after "analytic" on a fabric of several tiers."""
    if how == "per tier":
        return " + band + crossing count, per tier"
    for name in ("nested blocks", "shared columns", "pod rows", "pod patterns", "stacking"):
        if how.endswith(f"({name})"):
            return f" + band + crossing count per tier; {name} (ToR and pod tiers jointly)"
    return " + band + crossing count per tier; pod profiles (ToR and pod tiers jointly)"


def _search_levels(problem: GridProblem, candidates: list, pods_first: list, pairs: list, key: Callable,
                   feasible: Callable, time_limit_s: float, seed: int, workers: int,
                   with_bound: bool = True) -> tuple[GridSolution, float, str]:
    """Several tiers, no pins: count exchanges from the best start, from the best
    pods-first starts and from each of ``pairs`` (the best banded pods-first starts, the
    best split-pairs start, :mod:`rankmap.placement.split_pairs_layout`, the best start
    of stacked group pairs, :data:`rankmap.placement.pods_first.PAIR_FILLS`, and the best
    :data:`NESTED_SEARCHED` nested band layouts, :mod:`rankmap.placement.nested_bands_layout`, and the ring sets,
    :mod:`rankmap.placement.ring_sets_layout`; each reaches its own local optimum), single-cell moves, two-ring
    repartitions where rings need several groups (:mod:`rankmap.placement.row_pairs_search`), then (when the
    analytic bounds leave a gap and the model is small, :data:`TIER_MODEL_MAX_PAIRS`) the joint model of every tier,
    whose solution is improved the same way and whose proven bound joins the analytic one. Without
    ``with_bound`` the analytic bounds are skipped where the joint model is too large to run (bound 0)."""
    evals = max(200, COUNT_SEARCH_CELLS // (problem.rows * problem.cols))
    options = ([min(candidates, key=key)] if candidates else []) + sorted(pods_first, key=key)[:POD_STARTS_SEARCHED]
    options += pairs
    options = list({c.tobytes(): c for c in options}.values())  # a start met twice is searched once
    best = min(options + [count_search(problem, c, key, max_evals=evals) for c in options], key=key)
    best = min([best, improve(problem, best)], key=key)  # single-cell moves and swaps (local_search)
    if problem.cols > max(problem.free):  # rings over several groups: two rings shared out again, then searched
        paired = row_pairs_search(problem, best, key)
        if paired is not best:
            best = min([paired, improve(problem, count_search(problem, paired, key, max_evals=evals))], key=key)
    cells_k = sum(len(set(d)) for d in problem.domains) + len(problem.free)
    joint_model = problem.rows * cells_k <= TIER_MODEL_MAX_PAIRS
    if with_bound or joint_model:     # the joint model runs only where the bound leaves a gap
        bound, how = tier_bound_method(problem, 0)
        method = "analytic" + _method_tail(how)
        split = split_rows_tier_bound(problem)  # rankmap.placement.split_rows_bound
        if split > bound:
            bound, method = split, "analytic + band + crossing count + split rows, per tier"
    else:
        bound, method = 0.0, "not computed"
    if tier_cost(problem, best) > bound + 1e-9 and joint_model:
        budget = min(max(0.5, time_limit_s / 4), 0.5 + problem.rows * cells_k / 200)
        t0 = time.perf_counter()
        decoded, joint = tier_model_solve(problem, best, budget, seed, workers)
        solve_time_s = time.perf_counter() - t0
        options = [c for c in decoded if feasible(c)]
        options += [count_search(problem, c, key, max_evals=evals) for c in options[:1]]
        best = min([best] + options, key=key)
        if joint > bound:
            bound, method = joint, "joint tier model (CP-SAT)"
    else:
        solve_time_s = 0.0
    status = SolverStatus.OPTIMAL if tier_cost(problem, best) <= bound + 1e-9 else SolverStatus.HEURISTIC
    return GridSolution(best, grid_cost(problem, best), status, solve_time_s), bound, method


def _refine_picks(problem: GridProblem, candidates: list, key: Callable) -> list:
    """The starts to refine: the best by ``key`` and, on fabrics of several tiers, the best by
    unit tier weights and by each tier's bytes first (distinct ones only). Refining fixes a
    start's removable crossings (columns reordered, groups relabelled); a heavy tier weight
    ranks a start with a few removable top-tier crossings below one that is worse on every
    tier once refined (oversubscribed-core, core=100: 760/48 units chosen over 336/96, which
    refines to 336/48), so the best start of each weighting gets its refinement too."""
    picks = [min(candidates, key=key)]
    L = len(problem.weights)
    if L > 1:
        costs = [tier_costs(problem, c) for c in candidates]                    # costs[S][L], unweighted
        picks.append(candidates[min(range(len(candidates)), key=lambda i: sum(costs[i]))])
        for level in range(L):
            order = [level] + [t for t in range(L) if t != level]
            picks.append(candidates[min(range(len(candidates)), key=lambda i: tuple(costs[i][t] for t in order))])
    return list({c.tobytes(): c for c in picks}.values())


def _best_distinct(starts, key, feasible, n: int) -> list[np.ndarray]:
    """The ``n`` cheapest (by ``key``, ties to the first made) distinct feasible layouts of
    ``starts``, read one at a time: only those ``n`` and a 16-byte digest of each layout seen
    stay in memory (the nested bands make ~100 starts of ~1 MB each at 100,000 hosts)."""
    seen, best = set(), []
    for i, cells in enumerate(starts):
        digest = hashlib.blake2b(cells.tobytes(), digest_size=16).digest()
        if digest in seen or not feasible(cells):
            continue
        seen.add(digest)
        best = sorted(best + [(key(cells), i, cells)], key=lambda t: t[:2])[:n]
    return [cells for _, _, cells in best]
