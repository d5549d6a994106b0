"""The planner: a job on a cluster -> host order, rank map, and the comparison with baselines.

Ranks follow the launcher's rule (rank = node_rank * G + local_rank), so the planner's
only freedom -- and all that a hostfile can carry -- is which host gets which node rank.
It checks that the job's order string keeps TP groups inside hosts and every inter-host
group rail-aligned, lays node ranks on a (pipeline stage x data-parallel) grid
(:mod:`rankmap.placement.grid`), searches the grid (:mod:`rankmap.placement.search`: constructive
layouts, an independent lower bound, CP-SAT), and measures every candidate with the same
exact cost model (:mod:`rankmap.placement.metrics`).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from rankmap.errors import InfeasibleError, PlacementError, SpecError
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import DEFAULT_ORDER, JobSpec
from rankmap.job.traffic import GroupTraffic, job_traffic
from rankmap.placement.baselines import BASELINES, topology_greedy
from rankmap.placement.constraints import PlacementConstraints, explain_shortage
from rankmap.placement.grid import (
    HostGrid,
    block_problem,
    build_grid,
    cells_of,
    check_alignment,
    decode,
    expand_blocks,
    grid_problem,
)
from rankmap.placement.metrics import evaluate, human_bytes
from rankmap.placement.packing import pack_plan, packable_gpus, tp_shortage
from rankmap.placement.result import Candidate, PlanResult, metrics_row, with_summary
from rankmap.placement.search import OBJECTIVES, search
from rankmap.placement.solver import GridProblem, GridSolution
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host

__all__ = ["Candidate", "PlanResult", "plan", "metrics_row", "OBJECTIVES"]


@dataclass(frozen=True)
class _Setting:
    """Everything derived from the job and cluster that the planner and re-planner share."""

    job: JobSpec
    gpn: int
    usable: list
    caps: tuple
    layout: ParallelLayout
    traffic: dict
    grid: HostGrid
    tor_index: dict
    block: int = 1

    def measure(self, cluster: Cluster, name: str, hosts: list[str], solve_time_s: float = 0.0) -> Candidate:
        node_tor = np.array([self.tor_index[cluster.host(h).tor_group] for h in hosts])
        metrics = evaluate(self.layout, self.traffic, np.repeat(node_tor, self.gpn), len(self.tor_index))
        return Candidate(name, tuple(hosts), metrics, solve_time_s)


def plan(cluster: Cluster, job: JobSpec, *, time_limit_s: float = 20.0, seed: int = 0, workers: int = 1,
         constraints: PlacementConstraints | None = None, objectives: tuple = ("bytes", "uplink", "fragmentation"),
         previous: RankMap | None = None) -> PlanResult:
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
        An earlier plan of this job: hosts are kept where the new plan allows
        (and "moved" can be an objective).

    Returns
    -------
    PlanResult

    Raises
    ------
    SpecError
        Bad batch sizes, unknown hosts or groups in constraints.
    PlacementError
        TP group larger than a host, order string not rail-aligned, CP/EP groups across hosts.
    InfeasibleError
        Too few usable hosts, or pins/quotas that cannot be met (names the constraint,
        the ToR groups and the shortfall).
    """
    constraints = constraints or PlacementConstraints()
    for name in (o[0] if isinstance(o, tuple) else o for o in objectives):
        if name not in OBJECTIVES:
            raise SpecError(f"unknown objective {name!r} (known: {', '.join(OBJECTIVES)})", key="objectives")
    options = dict(time_limit_s=time_limit_s, seed=seed, workers=workers, objectives=objectives, previous=previous)
    if job.order == "auto":
        return _plan_auto_order(cluster, job, constraints, options)
    if len(cluster.islands()) > 1:
        return _plan_islands(cluster, job, constraints, options)
    return _plan_one(cluster, job, constraints, **options)


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


def _plan_auto_order(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, options: dict) -> PlanResult:
    """Plan with every candidate order string and keep the cheapest (cross-ToR bytes, then
    heaviest uplink, then the order's position in the candidate list)."""
    results, reasons = [], []
    for order in candidate_orders(job):
        try:
            results.append(plan(cluster, dataclasses.replace(job, order=order), constraints=constraints, **options))
        except PlacementError as exc:  # not rail-aligned, or CP/EP scattered: that order is out
            reasons.append(f"{order}: {exc.message}")
    if not results:
        raise PlacementError("no order string keeps TP groups inside hosts and every inter-host group "
                             "rail-aligned: " + "; ".join(reasons[:3]), source=job.source, key="parallel.order")
    best = min(results, key=lambda r: (r.ours.metrics.cross_tor_bytes, r.ours.metrics.max_uplink_bytes))
    note = (f"order auto: chose {best.job.order} ({len(results)} of {len(results) + len(reasons)} orders "
            f"rail-aligned; the rank map records the order)")
    return dataclasses.replace(best, notes=best.notes + (note,))


def _plan_one(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, *, time_limit_s: float, seed: int,
              workers: int, objectives: tuple, previous: RankMap | None) -> PlanResult:
    """Plan within one island (or a cluster without islands)."""
    free = constraints.usable(list(cluster.free_hosts()))
    sizes = Counter(h.gpus for h in free)
    if len(sizes) > 1 and job.dp is not None:
        gpn = max(sizes, key=lambda g: (sizes[g], g))
        if job.world_size > gpn * sum(1 for h in free if h.gpus >= gpn):
            # the job needs the hosts of other sizes too: whole TP groups per host
            constraints.check_names(cluster)
            if packable_gpus(free, job.tp) < job.world_size:
                raise tp_shortage(free, job, job.world_size)
            return pack_plan(cluster, job.resolved(packable_gpus(free, job.tp)), free, BASELINES, seed)
    notes: list[str] = []
    st = _setting(cluster, job, constraints, notes)
    baselines = tuple(st.measure(cluster, name, fn(cluster, st.usable, st.grid.row.size, seed))
                      for name, fn in BASELINES.items())
    problem, unit = grid_problem(st.caps, st.grid, st.traffic, st.gpn)
    fixed = _rank_pins(cluster, st, constraints)
    pins = _grid_pins(cluster, st, constraints, fixed)
    prev_hosts = list(previous.hosts) if previous is not None else None

    def hosts_of(cells: np.ndarray) -> list[str]:
        return decode(cells, st.grid, st.usable, st.tor_index, fixed, prev_hosts)

    def moved(cells: np.ndarray) -> int:
        return sum(a != b for a, b in zip(hosts_of(cells), prev_hosts)) if prev_hosts else 0

    greedy_hosts = topology_greedy(cluster, st.usable, st.grid.row.size, seed)
    t0 = time.perf_counter()
    others = tuple(cells_of(st.grid, list(b.hosts), cluster, st.tor_index) for b in baselines)
    sol, bound, method = search(problem, cells_of(st.grid, greedy_hosts, cluster, st.tor_index),
                                objectives=objectives, pins=pins, moved=moved if prev_hosts else None,
                                time_limit_s=time_limit_s, seed=seed, workers=workers, others=others)
    if sol is None:
        raise InfeasibleError(f"no placement meets the pins within the time limit ({time_limit_s:g} s); "
                              f"pins: {_describe_pins(constraints)}", source=constraints.source, key="pins")
    ours = st.measure(cluster, "rankmap", hosts_of(sol.cells), time.perf_counter() - t0)
    blocked = _block_search(problem, st, pins, objectives, time_limit_s, seed, workers)
    if blocked is not None:
        candidate = st.measure(cluster, "rankmap", hosts_of(blocked.cells), time.perf_counter() - t0)
        if candidate.metrics.cross_tor_bytes < ours.metrics.cross_tor_bytes:
            ours, sol = candidate, blocked
        notes.append(f"CP/EP groups span hosts: blocks of {st.block} hosts kept whole under one ToR group "
                     f"where that was cheaper")
    rm = RankMap.from_hosts(st.job, cluster, list(ours.hosts), st.gpn)
    notes += _tradeoffs(ours, baselines, st.traffic)
    n_moved = moved(sol.cells) if prev_hosts else None
    result = PlanResult(st.job, rm, ours, baselines, bound * unit, method, sol.status, tuple(notes), n_moved)
    return with_summary(result)


def _block_search(problem: GridProblem, st: _Setting, pins: dict, objectives: tuple, time_limit_s: float,
                  seed: int, workers: int):
    """CP x EP blocks spanning hosts: search the grid in block units, so that no CP ring or
    EP all-to-all leaves a ToR group; None when there are no such blocks (or pins)."""
    if st.block == 1 or pins:
        return None
    bp = block_problem(problem, st.block)
    if bp is None:
        return None
    greedy = np.empty((bp.rows, bp.cols), dtype=np.int64)
    order = np.repeat(np.argsort(-np.asarray(bp.free), kind="stable"), np.sort(bp.free)[::-1])
    greedy.ravel()[:] = order[:bp.rows * bp.cols]  # fill row by row, largest groups first
    sol, _, _ = search(bp, greedy, objectives=objectives, time_limit_s=time_limit_s, seed=seed, workers=workers)
    return None if sol is None else GridSolution(expand_blocks(sol.cells, st.block), sol.cost, sol.status,
                                                 sol.solve_time_s)


def _plan_islands(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, options: dict) -> PlanResult:
    """A job never spans islands (parts of the fabric no switch joins): plan it in each island
    that can hold it and keep the best; with dp auto, fill the island with the most room."""
    from rankmap.topology.summary import island_names

    _, usable = _usable_hosts(cluster, job, [])
    usable = constraints.usable(usable)
    caps = dict(zip((g.name for g in cluster.tor_groups), constraints.caps(cluster, usable)))
    names = island_names(cluster)
    room = [sum(caps[g] for g in island) for island in cluster.islands()]
    gpn = Counter(h.gpus for h in cluster.free_hosts()).most_common(1)[0][0] if usable else 1
    need = -(-(job.world_size if job.dp is not None else job.model_parallel * job.ep) // gpn)
    fits = [i for i, r in enumerate(room) if r >= need]
    if job.dp is None and fits:
        fits = [max(fits, key=lambda i: (room[i], -i))]
    if not fits:
        listing = ", ".join(f"{names[i]} ({room[i]} usable hosts: {', '.join(isl)})"
                            for i, isl in enumerate(cluster.islands()))
        raise InfeasibleError(f"the job needs {need} hosts in one island, and no island has them: {listing}; "
                              f"no switch joins the islands, so a job cannot span them",
                              source=job.source, key="parallel.dp")
    results = []
    for i in fits:
        inside = set(cluster.islands()[i])
        outside = tuple(h.name for h in cluster.hosts if h.tor_group not in inside)
        restricted = dataclasses.replace(constraints, exclude=constraints.exclude + outside)
        result = _plan_one(cluster, job, restricted, **options)
        results.append(dataclasses.replace(result, notes=result.notes + (f"placed in island {names[i]}",)))
    return min(results, key=lambda r: (r.ours.metrics.cross_tor_bytes, r.ours.metrics.max_uplink_bytes))


def _setting(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, notes: list[str]) -> _Setting:
    constraints.check_names(cluster)
    gpn, usable = _usable_hosts(cluster, job, notes)
    usable = constraints.usable(usable)
    caps = constraints.caps(cluster, usable)
    if job.dp is not None and job.world_size // gpn > sum(caps):
        raise explain_shortage(cluster, caps, job.world_size // gpn,
                               f"the job (tp*cp*pp*dp = {job.world_size} GPUs on {gpn}-GPU hosts)",
                               job.source, "parallel.dp")
    replica = job.model_parallel * job.ep
    if job.dp is None and sum(caps) * gpn < replica:
        raise explain_shortage(cluster, caps, -(-replica // gpn), f"one model replica (tp*cp*pp*ep = {replica} GPUs)",
                               job.source, "parallel.dp")
    job = job.resolved(sum(caps) * gpn)
    layout = ParallelLayout.of(job)
    traffic = job_traffic(job)

    def error(message: str, key: str) -> PlacementError:
        return PlacementError(message, source=job.source, key=key)

    block = check_alignment(job, layout, traffic, gpn, error)
    grid = build_grid(layout, gpn, job.world_size // gpn)
    tor_index = {g.name: g.index for g in cluster.tor_groups}
    return _Setting(job, gpn, usable, caps, layout, traffic, grid, tor_index, block)


def _usable_hosts(cluster: Cluster, job: JobSpec, notes: list[str]) -> tuple[int, list[Host]]:
    free = list(cluster.free_hosts())
    if not free:
        raise InfeasibleError(f"cluster {cluster.name!r} has no free hosts", key="availability")
    counts = Counter(h.gpus for h in free)
    gpn = max(counts, key=lambda g: (counts[g], g))
    nics = Counter(h.nics for h in free if h.gpus == gpn).most_common(1)[0][0]
    # Only hosts shaped like the majority keep every rail-aligned group on one rail.
    usable = [h for h in free if h.gpus == gpn and h.nics == nics]
    other = sorted((h for h in free if (h.gpus, h.nics) != (gpn, nics)), key=lambda h: natural_key(h.name))
    if other:
        notes.append(f"{len(other)} free hosts are not {gpn}-GPU, {nics}-NIC hosts like the others and are not "
                     f"used: " + ", ".join(f"{h.name} ({h.gpus} GPUs, {h.nics} NICs)" for h in other[:5])
                     + (" ..." if len(other) > 5 else ""))
    if gpn % job.tp:
        raise PlacementError(f"tp={job.tp} does not fit the hosts: a TP group must sit inside one host, "
                             f"and the free hosts have {gpn} GPUs (tp must divide {gpn})",
                             source=job.source, key="parallel.tp")
    return gpn, usable


def _rank_pins(cluster: Cluster, st: _Setting, c: PlacementConstraints) -> dict:
    """``{node rank: host}`` from rank pins, checked against the job and the usable hosts."""
    fixed: dict = {}
    usable = {h.name for h in st.usable}
    for rank, host in sorted(c.rank_pins.items()):
        if rank >= st.job.world_size:
            raise InfeasibleError(f"rank {rank} is pinned, but the job has {st.job.world_size} ranks",
                                  source=c.source, key=f"pins.ranks.{rank}")
        if host not in usable:
            why = cluster.host(host).state if cluster.host(host).state != "free" else "excluded or reserved"
            raise InfeasibleError(f"rank {rank} is pinned to host {host!r}, which is {why}",
                                  source=c.source, key=f"pins.ranks.{rank}")
        node = rank // st.gpn
        if fixed.get(node, host) != host or host in [h for n, h in fixed.items() if n != node]:
            raise InfeasibleError(f"rank {rank} is pinned to host {host!r}, which conflicts with another pin "
                                  f"(node rank {node} holds ranks {node * st.gpn}..{node * st.gpn + st.gpn - 1})",
                                  source=c.source, key=f"pins.ranks.{rank}")
        fixed[node] = host
    return fixed


def _grid_pins(cluster: Cluster, st: _Setting, c: PlacementConstraints, fixed: dict) -> dict:
    """Pins as grid constraints, with a shortfall explanation when a pinned group is too small."""
    pins: dict = {}
    need: Counter = Counter()
    for stage, group in sorted(c.stage_pins.items()):
        row = _row_of_stage(st, stage, c)
        g = st.tor_index[group]
        pins[row] = g
        need[g] += st.grid.cols
    for g, hosts in need.items():
        if hosts > st.caps[g]:
            stages = sorted(s for s, name in c.stage_pins.items() if st.tor_index[name] == g)
            raise InfeasibleError(f"stage(s) {stages} pinned to ToR group {cluster.tor_groups[g].name!r} need "
                                  f"{hosts} hosts; it has {st.caps[g]} usable: {hosts - st.caps[g]} short",
                                  source=c.source, key="pins.stages")
    for node, host in fixed.items():
        g = st.tor_index[cluster.host(host).tor_group]
        row = int(st.grid.row[node])
        if pins.get(row, g) != g:
            raise InfeasibleError(f"host {host!r} (ToR group {cluster.host(host).tor_group!r}) is pinned for node "
                                  f"rank {node}, but its stage is pinned to {cluster.tor_groups[pins[row]].name!r}",
                                  source=c.source, key="pins")
        pins[(row, int(st.grid.col[node]))] = g
    return pins


def _row_of_stage(st: _Setting, stage: int, c: PlacementConstraints) -> int:
    if stage >= st.job.pp:
        raise InfeasibleError(f"stage {stage} is pinned, but the job has pp={st.job.pp}", source=c.source,
                              key=f"pins.stages.{stage}")
    if st.grid.rows == 1:
        return 0
    return stage


def _describe_pins(c: PlacementConstraints) -> str:
    parts = [f"stage {s} -> {g}" for s, g in sorted(c.stage_pins.items())]
    parts += [f"rank {r} -> {h}" for r, h in sorted(c.rank_pins.items())]
    return ", ".join(parts)


def _tradeoffs(ours: Candidate, baselines: tuple, traffic: dict[str, GroupTraffic]) -> list[str]:
    """Say where a baseline beats the plan on a secondary column, and what that costs."""
    notes = []
    for b in baselines:
        for kind in ("dp", "pp"):
            fewer = ours.metrics.cross_edges[kind] - b.metrics.cross_edges[kind]
            if fewer > 0:
                extra = b.metrics.cross_tor_bytes - ours.metrics.cross_tor_bytes
                notes.append(f"{b.name} crosses {fewer} fewer {kind.upper()} edges "
                             f"({human_bytes(fewer * traffic[kind].edge_bytes)}) but moves "
                             f"{human_bytes(extra)} more across ToR groups in all; the plan minimises the total")
    return notes
