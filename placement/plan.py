"""The planner's front door: a job on a cluster -> host order, rank map, and the baselines.

Ranks follow the launcher's rule (rank = node_rank * G + local_rank), so the planner's
only freedom -- and all that a hostfile can carry -- is which host gets which node rank.
:func:`plan` picks the order strings to try and the islands to plan in, builds the problem
once per try (:mod:`rankmap.placement.problem`), searches the host grid
(:mod:`rankmap.placement.grid_search`), and measures every candidate with the same exact
cost model (:func:`rankmap.placement.metrics.measure_order`). Hosts of different GPU
counts go to :mod:`rankmap.placement.mixed_gpu_counts`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections import Counter

import numpy as np

from rankmap.errors import InfeasibleError, PlacementError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import DEFAULT_ORDER, JobSpec
from rankmap.job.traffic import GroupTraffic
from rankmap.placement.baselines import BASELINES, topology_greedy
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.grid_problem import GridProblem, GridSolution, expand_spans, grid_cost, span_problem
from rankmap.placement.grid_search import search
from rankmap.placement.host_grid import cells_of_hosts, hosts_of_cells
from rankmap.placement.host_shapes import fit_hosts
from rankmap.placement.metrics import human_bytes, measure_order
from rankmap.placement.mixed_gpu_counts import pack_plan, packable_gpus, tp_shortage
from rankmap.placement.objectives import OBJECTIVES, weighting_problem
from rankmap.placement.pair_split_bound import pair_split_bound
from rankmap.placement.pins import describe_pins
from rankmap.placement.previous_layout import previous_cells
from rankmap.placement.problem import HostPool, PlacementProblem, build_problem, host_pool
from rankmap.placement.result import Candidate, PlanResult, metrics_row, with_summary
from rankmap.placement.ring_sets_layout import span_ring_cells
from rankmap.placement.status import SolverStatus, final_status
from rankmap.placement.tier_weights import default_tier_weights
from rankmap.placement.tier_weights import tier_weights as resolve_weights
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster

__all__ = ["Candidate", "PlanResult", "plan", "candidate_orders", "canonical_cluster", "with_tiers", "metrics_row",
           "OBJECTIVES"]


def plan(cluster: Cluster, job: JobSpec, *, time_limit_s: float = 20.0, seed: int = 0, workers: int = 1,
         constraints: PlacementConstraints | None = None, objectives: tuple = ("tiers", "uplink", "fragmentation"),
         previous: RankMap | None = None, tier_weights: dict | None = None) -> PlanResult:
    """Place ``job`` on the free hosts of ``cluster``.

    Parameters
    ----------
    cluster : Cluster
    job : JobSpec
        ``dp`` may be None ("auto": fill the usable GPUs).
    time_limit_s : float
        CP-SAT deterministic time budget for the placement model; the bound model gets a quarter.
    seed : int
        Seeds CP-SAT, the constructive layouts and the arrival-order baseline.
    workers : int
        CP-SAT workers (interleaved, deterministic).
    constraints : PlacementConstraints, optional
        Exclusions, reservations (other jobs), quotas and pins.
    objectives : tuple
        Objectives from ``OBJECTIVES``, most important first (lexicographic), or
        ``(name, weight)`` pairs summed into one weighted objective.
    previous : RankMap, optional
        An earlier plan of this job: its layout (lost hosts refilled) is a start, and its hosts
        are kept at their node ranks among plans equal on the objectives ("moved", the node
        ranks whose host changes, is the last objective unless given earlier).
    tier_weights : dict, optional
        ``{tier name: weight}`` overriding the default tier weights
        (:mod:`rankmap.placement.tier_weights`), e.g. ``{"core": 3.0}``.

    Returns
    -------
    PlanResult

    Raises
    ------
    SpecError
        Bad batch sizes, unknown hosts or groups in constraints, an unknown objective, "moved"
        without ``previous``, weighted terms that do not add up
        (:func:`rankmap.placement.objectives.weighting_problem`).
    PlacementError
        TP group larger than a host, order string not rail-aligned, CP/EP groups across hosts.
    InfeasibleError
        Too few usable hosts, or pins/quotas that cannot be met (names the constraint,
        the ToR groups and the shortfall).
    """
    constraints = constraints or PlacementConstraints()
    for name in (o[0] if isinstance(o, tuple) else o for o in objectives):
        if name not in OBJECTIVES:
            raise SpecError(f"unknown objective {name!r} (known: {', '.join(OBJECTIVES)})", key="--objective")
    for name, weight in (o for o in objectives if isinstance(o, tuple)):  # a negative weight maximises its cost
        if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight >= 0):
            raise SpecError(f"objective {name!r} needs a finite weight >= 0, got {weight!r}", key="--objective")
    if weighting_problem(objectives) is not None:  # top-first=W, bytes + counts, a weight that overflows
        raise SpecError(weighting_problem(objectives), key="--objective")
    if previous is None and "moved" in (o[0] if isinstance(o, tuple) else o for o in objectives):
        raise SpecError("objective 'moved' counts hosts changed against an earlier plan: give previous "
                        "(--previous)", key="--objective")
    if not (isinstance(time_limit_s, (int, float)) and math.isfinite(time_limit_s) and time_limit_s > 0):
        raise SpecError(f"time limit must be a finite number > 0, got {time_limit_s!r}", key="--time-limit")
    if not (isinstance(seed, int) and 0 <= seed < 2**31):
        raise SpecError(f"seed must be an integer in 0..2**31 - 1, got {seed!r}", key="--seed")
    if previous is not None and "moved" not in (o[0] if isinstance(o, tuple) else o for o in objectives):
        objectives = tuple(objectives) + ("moved",)  # "keep its hosts where possible": the last tie-break
    weights = resolve_weights(cluster, tier_weights)
    spec_hash = cluster.spec_hash()          # the map belongs to the spec as the user wrote it
    cluster = canonical_cluster(cluster)
    options = dict(time_limit_s=time_limit_s, seed=seed, workers=workers, objectives=objectives, previous=previous,
                   weights=weights)
    pool = host_pool(cluster, constraints)
    if job.order == "auto":
        result = _plan_auto_order(cluster, job, constraints, pool, options)
    else:
        result = _plan_fixed_order(cluster, job, constraints, pool, options)
    return dataclasses.replace(result, rankmap=dataclasses.replace(result.rankmap, cluster_hash=spec_hash))



def canonical_cluster(cluster: Cluster) -> Cluster:
    """``cluster`` with ToR groups and hosts in natural name order, so that a plan never
    depends on the order in which a spec listed them (only on names and the fabric)."""
    groups = sorted(cluster.tor_groups, key=lambda g: natural_key(g.name))
    groups = tuple(dataclasses.replace(g, index=i) for i, g in enumerate(groups))
    hosts = tuple(sorted(cluster.hosts, key=lambda h: natural_key(h.name)))
    if groups == cluster.tor_groups and hosts == cluster.hosts:
        return cluster
    return cluster.reordered(groups, hosts)


def with_tiers(problem: GridProblem, cluster: Cluster, weights: tuple) -> GridProblem:
    """``problem`` with the domains of the levels a job can cross and the tier weights.

    A fabric with no switch above its leaves (depth 0: every ToR group an island, as a
    topology.conf of one leaf switch reads) has no tier to weigh; its grid keeps the ToR level
    at weight 1, which no placement inside one island crosses (every cost and bound is 0).
    """
    domains = tuple(cluster.domain_index(level) for level in range(1, cluster.depth))
    return dataclasses.replace(problem, domains=domains, weights=tuple(weights) or (1.0,))


def _plan_fixed_order(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, pool: HostPool,
                      options: dict) -> PlanResult:
    """Plan with the job's own order string, in each island if the fabric has several."""
    if len(cluster.islands()) > 1:
        return _plan_islands(cluster, job, constraints, pool, options)
    return _plan_one(cluster, job, constraints, pool, **options)


def candidate_orders(job: JobSpec) -> list[str]:
    """Order strings worth trying: every arrangement of the dims larger than 1 (dp counted,
    also when "auto") in their slots of Megatron's default order; size-1 dims stay put.

    Examples
    --------
    >>> candidate_orders(JobSpec(tp=8, pp=2))[:3]
    ['tp-cp-ep-dp-pp', 'tp-cp-ep-pp-dp', 'dp-cp-ep-tp-pp']
    """
    default = DEFAULT_ORDER.split("-")
    slots = [i for i, d in enumerate(default) if d == "dp" or getattr(job, d) > 1]
    out = []
    for perm in itertools.permutations([default[i] for i in slots]):
        order = list(default)
        for i, d in zip(slots, perm):
            order[i] = d
        out.append("-".join(order))
    return out


def _plan_auto_order(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, pool: HostPool,
                     options: dict) -> PlanResult:
    """Plan with every candidate order string and keep the cheapest (tier-weighted bytes, then
    heaviest uplink, then the order's position in the candidate list)."""
    results, reasons = [], []
    for order in candidate_orders(job):
        try:
            results.append(_plan_fixed_order(cluster, dataclasses.replace(job, order=order), constraints, pool,
                                             options))
        except PlacementError as exc:  # not rail-aligned, or CP/EP scattered: that order is out
            reasons.append(f"{order}: {exc.message}")
    if not results:
        raise PlacementError("no order string keeps TP groups inside hosts and every inter-host group "
                             "rail-aligned: " + "; ".join(reasons[:3]), source=job.source, key="parallel.order")
    best = min(results, key=lambda r: (r.ours.metrics.cost, r.ours.metrics.max_uplink_bytes))
    note = (f"order auto: chose {best.job.order} ({len(results)} of {len(results) + len(reasons)} orders "
            f"rail-aligned; the rank map records the order)")
    return dataclasses.replace(best, notes=best.notes + (note,))


def _island_room(cluster: Cluster, hosts: list, constraints: PlacementConstraints,
                 tp: int) -> tuple[list[int], list[int]]:
    """``(hosts[I], gpus[I])``: hosts each island offers and their GPUs in whole TP groups,
    quotas applied (each ToR group's largest hosts counted first), whatever the hosts' sizes."""
    caps = dict(zip((g.name for g in cluster.tor_groups), constraints.caps(cluster, hosts)))
    by_group: dict[str, list[int]] = {}
    for h in hosts:
        by_group.setdefault(h.tor_group, []).append(h.gpus // tp * tp)
    n_hosts = {g: min(len(sizes), caps[g]) for g, sizes in by_group.items()}
    gpus = {g: sum(sorted(sizes, reverse=True)[:n_hosts[g]]) for g, sizes in by_group.items()}
    return ([sum(n_hosts.get(g, 0) for g in island) for island in cluster.islands()],
            [sum(gpus.get(g, 0) for g in island) for island in cluster.islands()])


def _plan_islands(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, pool: HostPool,
                  options: dict) -> PlanResult:
    """A job never spans islands (parts of the fabric no switch joins): plan it in each island
    whose hosts hold enough GPUs in whole TP groups, and keep the best; with dp auto, fill the
    island with the most room."""
    from rankmap.topology.summary import island_names

    if len({h.gpus for h in pool.free}) < 2:
        pool.require(cluster, job)  # no free hosts, or one host size that tp does not divide
    names = island_names(cluster)
    hosts, room = _island_room(cluster, list(pool.free), constraints, job.tp)
    need = job.world_size if job.dp is not None else job.model_parallel * job.ep
    fits = [i for i, r in enumerate(room) if r >= need]
    if job.dp is None and fits:
        fits = [max(fits, key=lambda i: (room[i], -i))]
    if not fits:
        listing = ", ".join(f"{names[i]} ({hosts[i]} usable hosts, {room[i]} GPUs in whole TP groups: "
                            f"{', '.join(isl)})" for i, isl in enumerate(cluster.islands()))
        raise InfeasibleError(f"the job needs {need} GPUs in one island, and no island has them: {listing}; "
                              f"no switch joins the islands, so a job cannot span them",
                              source=job.source, key="parallel.dp")
    results = []
    for i in fits:
        result = _plan_one(cluster, job, constraints, pool.within(set(cluster.islands()[i])), **options)
        results.append(dataclasses.replace(result, notes=result.notes + (f"placed in island {names[i]}",)))
    return min(results, key=lambda r: (r.ours.metrics.cost, r.ours.metrics.max_uplink_bytes))


def _fit_or_pack(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, pool: HostPool,
                 seed: int) -> tuple[JobSpec, HostPool] | PlanResult:
    """The job (dp resolved) and the hosts of the one shape that fits it best
    (:func:`rankmap.placement.host_shapes.fit_hosts`); when no shape alone fits and the free
    hosts have several GPU counts, the plan packing whole TP groups on all of them.

    Raises
    ------
    InfeasibleError
        Whole TP groups do not fit the free hosts of several sizes (names them).
    """
    fit = fit_hosts(cluster, job, constraints, pool)
    if fit is not None:
        return fit
    free = list(pool.free)
    if len({h.gpus for h in free}) < 2:
        return job, pool  # one host size: building the problem says why it does not fit
    constraints.check_names(cluster)
    world = job.world_size if job.dp is not None else packable_gpus(free, job.tp)
    if packable_gpus(free, job.tp) < max(world, job.model_parallel * job.ep):
        raise tp_shortage(free, job, max(world, job.model_parallel * job.ep))
    return pack_plan(cluster, job.resolved(world), free, BASELINES, seed)


def _plan_one(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, pool: HostPool, *,
              time_limit_s: float, seed: int, workers: int, objectives: tuple, previous: RankMap | None,
              weights: tuple) -> PlanResult:
    """Plan within one island (or a cluster without islands)."""
    fit = _fit_or_pack(cluster, job, constraints, pool, seed)
    if isinstance(fit, PlanResult):
        return fit
    job, pool = fit
    problem = build_problem(cluster, job, constraints, pool)
    problem = dataclasses.replace(problem, grid_problem=with_tiers(problem.grid_problem, cluster, weights))
    notes = list(problem.notes)

    def measure(name: str, hosts: list[str], solve_time_s: float = 0.0) -> Candidate:
        metrics = measure_order(cluster, problem.layout, problem.traffic, hosts, problem.gpn, weights)
        return Candidate(name, tuple(hosts), metrics, solve_time_s)

    baselines = tuple(measure(name, fn(cluster, list(problem.usable), problem.grid.row.size, seed))
                      for name, fn in BASELINES.items())
    prev_hosts = list(previous.hosts) if previous is not None else None

    def hosts_of(cells: np.ndarray) -> list[str]:
        return hosts_of_cells(cells, problem.grid, list(problem.usable), problem.tor_index, problem.node_pins,
                              prev_hosts)

    def moved(cells: np.ndarray) -> int:
        return sum(a != b for a, b in zip(hosts_of(cells), prev_hosts)) if prev_hosts else 0

    # the previous plan's own layout (lost hosts refilled, as replan does) is a start: with "moved"
    # first it is the plan, and among plans of equal cost it keeps the old hosts at their node ranks
    starts = () if not prev_hosts else tuple(c for c in [previous_cells(
        problem.grid_problem, problem.grid, list(problem.usable), problem.tor_index,
        {h.name: h.tor_group for h in cluster.hosts}, prev_hosts)] if c is not None)
    t0 = time.perf_counter()
    starts += _default_weights_plan(cluster, problem, baselines, objectives, moved if prev_hosts else None,
                                    time_limit_s, seed, workers, starts)
    sol, bound, method = _search_grid(cluster, problem, baselines, objectives, moved if prev_hosts else None,
                                      time_limit_s, seed, workers, starts)
    if sol is None:
        raise InfeasibleError(f"no placement meets the pins within the time limit ({time_limit_s:g} s); "
                              f"pins: {describe_pins(constraints)}", source=constraints.source, key="pins")
    ours, status = measure("rankmap", hosts_of(sol.cells), time.perf_counter() - t0), sol.status
    spanned = _search_spans(problem, objectives, time_limit_s, seed, workers)
    if spanned is not None:
        candidate = measure("rankmap", hosts_of(spanned.cells), time.perf_counter() - t0)
        if _better(candidate, ours) and not (_moved_first(objectives) and moved(spanned.cells) > moved(sol.cells)):
            ours, sol = candidate, spanned
        notes.append(f"CP/EP groups span hosts: spans of {problem.cp_ep_span} hosts (one CP x EP group) kept whole "
                     f"under one ToR group where that was cheaper")
        rings = span_ring_cells(problem.grid_problem, problem.cp_ep_span, seed=0) if not prev_hosts else None
        if rings is not None:   # rings of whole ToR groups, pieces in whole spans: measured on the full cost
            candidate = measure("rankmap", hosts_of(rings), time.perf_counter() - t0)
            if _better(candidate, ours):
                ours, sol = candidate, GridSolution(rings, grid_cost(problem.grid_problem, rings),
                                                    SolverStatus.HEURISTIC, 0.0)
    if not problem.pins and not prev_hosts:
        fits = [b for b in baselines if _within_caps(cluster, problem, b.hosts)]
        ours, status, notes = _never_worse(ours, status, fits, notes, time.perf_counter() - t0)
    if problem.cp_ep_span > 1 and ours.metrics.cost > bound * problem.unit_bytes * (1 + 1e-9):
        status = SolverStatus.HEURISTIC  # the grid model leaves CP/EP traffic out: nothing proves the optimum
    rm = RankMap.from_hosts(problem.job, cluster, list(ours.hosts), problem.gpn)
    notes += _tradeoffs(ours, baselines, problem.traffic)
    n_moved = moved(sol.cells) if prev_hosts else None
    bound_bytes = bound * problem.unit_bytes
    split_bound = pair_split_bound(problem) * problem.unit_bytes if problem.cp_ep_span > 1 else 0.0
    if split_bound > bound_bytes:  # the grid leaves CP/EP traffic out; this bound counts split spans
        bound_bytes, method = split_bound, "analytic; pod patterns or profiles, CP/EP spans whole or split"
    if ours.metrics.cost < bound_bytes <= ours.metrics.cost * (1 + 1e-9):
        bound_bytes = ours.metrics.cost  # units x bytes per unit in floating point: 1677721600.0000002 for 1677721600
    result = PlanResult(problem.job, rm, ours, baselines, bound_bytes, method, status,
                        tuple(notes), n_moved, tuple(weights))
    return with_summary(dataclasses.replace(result, solver_status=final_status(status, result.gap)))


def _default_weights_plan(cluster: Cluster, problem: PlacementProblem, baselines: tuple, objectives: tuple, moved,
                          time_limit_s: float, seed: int, workers: int, starts: tuple) -> tuple:
    """``(cells[R, C],)``: the plan under the tiers' default weights when the problem's differ
    (``--tier-weights``), else ``()``. As a start of the search under the user's weights it is
    priced at those, so no plan made under other weights is better on every tier than the
    default plan (with core=100 the layouts once missed, on oversubscribed-core, a plan that
    the default weights reach and that costs less on every tier)."""
    defaults = default_tier_weights(cluster)
    if len(defaults) < 2 or tuple(problem.grid_problem.weights) == tuple(defaults):
        return ()
    reference = dataclasses.replace(problem, grid_problem=with_tiers(problem.grid_problem, cluster, defaults))
    sol, _, _ = _search_grid(cluster, reference, baselines, objectives, moved, time_limit_s, seed, workers, starts)
    return () if sol is None else (sol.cells,)


def _moved_first(objectives: tuple) -> bool:
    """Whether ``moved`` leads the objectives (plain, or in the weighted sum that leads them)."""
    weighted = [o[0] for o in objectives if isinstance(o, tuple)]
    return "moved" in weighted if weighted else bool(objectives) and objectives[0] == "moved"


def _better(a: Candidate, b: Candidate) -> bool:
    """Whether ``a`` costs less than ``b`` (tier-weighted bytes, then heaviest uplink)."""
    return (a.metrics.cost, a.metrics.max_uplink_bytes) < (b.metrics.cost, b.metrics.max_uplink_bytes)


def _within_caps(cluster: Cluster, problem: PlacementProblem, hosts: tuple) -> bool:
    """Whether a host order keeps every ToR group within its quota (``problem.caps``)."""
    used = Counter(cluster.group_indices(hosts))  # problem.tor_index numbers groups by TorGroup.index
    return all(n <= problem.caps[g] for g, n in used.items())


def _never_worse(ours: Candidate, status, baselines: tuple, notes: list, elapsed_s: float) -> tuple:
    """The plan, or a baseline's host order when it costs less on the optimised objective
    with every group's traffic counted (CP and EP included), then HEURISTIC."""
    best = min(baselines, key=lambda b: (b.metrics.cost, b.metrics.max_uplink_bytes), default=None)
    if best is None or not _better(best, ours):
        return ours, status, notes
    note = f"the {best.name} order costs less with every group's traffic counted; the plan takes it"
    return (Candidate("rankmap", best.hosts, best.metrics, elapsed_s), SolverStatus.HEURISTIC, notes + [note])


def _search_grid(cluster: Cluster, problem: PlacementProblem, baselines: tuple, objectives: tuple, moved,
                 time_limit_s: float, seed: int, workers: int,
                 starts: tuple = ()) -> tuple[GridSolution | None, int, str]:
    """The grid search, started from the topology-greedy order and offered every baseline and
    ``starts`` (more placements ``cells[R, C]``, e.g. the previous plan's layout)."""
    grid, tor_index = problem.grid, problem.tor_index
    greedy = topology_greedy(cluster, list(problem.usable), grid.row.size, seed)
    others = tuple(cells_of_hosts(grid, list(b.hosts), cluster, tor_index) for b in baselines) + tuple(starts)
    return search(problem.grid_problem, cells_of_hosts(grid, greedy, cluster, tor_index), objectives=objectives,
                  pins=problem.pins, moved=moved, time_limit_s=time_limit_s, seed=seed, workers=workers,
                  others=others)


def _search_spans(problem: PlacementProblem, objectives: tuple, time_limit_s: float, seed: int,
                  workers: int) -> GridSolution | None:
    """CP x EP groups spanning hosts: search the grid in units of their span, so that no CP
    ring or EP all-to-all leaves a ToR group; None when no group spans hosts (or with pins)."""
    span = problem.cp_ep_span
    if span == 1 or problem.pins:
        return None
    sp = span_problem(problem.grid_problem, span)
    if sp is None:
        return None
    greedy = np.empty((sp.rows, sp.cols), dtype=np.int64)
    order = np.repeat(np.argsort(-np.asarray(sp.free), kind="stable"), np.sort(sp.free)[::-1])
    greedy.ravel()[:] = order[:sp.rows * sp.cols]  # fill row by row, largest groups first
    # its bound is not used (the plan's bound is the whole-spans grid's, or the pair-split bound)
    sol, _, _ = search(sp, greedy, objectives=objectives, time_limit_s=time_limit_s, seed=seed, workers=workers,
                       with_bound=False)
    return None if sol is None else GridSolution(expand_spans(sol.cells, span), sol.cost, sol.status,
                                                 sol.solve_time_s)


def _tradeoffs(ours: Candidate, baselines: tuple, traffic: dict[str, GroupTraffic]) -> list[str]:
    """Say where a baseline beats the plan on a secondary column, and what that costs."""
    notes = []
    for b in baselines:
        for kind in ("dp", "pp"):
            fewer = ours.metrics.cross_edges[kind] - b.metrics.cross_edges[kind]
            extra = b.metrics.cost - ours.metrics.cost
            if fewer > 0 and extra > 0:
                notes.append(f"{b.name} crosses {fewer} fewer {kind.upper()} edges "
                             f"({human_bytes(fewer * traffic[kind].edge_bytes)}) but costs "
                             f"{human_bytes(extra)} more in tier-weighted bytes; the plan minimises the total")
    return notes
