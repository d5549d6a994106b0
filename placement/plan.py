"""The planner: a job on a cluster -> host order, rank map, and the comparison with baselines.

Ranks follow the launcher's rule (rank = node_rank * G + local_rank), so the planner's
only freedom -- and all that a hostfile can carry -- is which host gets which node rank.
It checks the job's order string keeps TP groups inside hosts and every inter-host
group rail-aligned, maps node ranks onto a (pipeline stage x data-parallel) grid,
solves the grid with CP-SAT (:mod:`placement.solver`) seeded with the topology-greedy
baseline, and evaluates every candidate with the same exact cost model
(:mod:`placement.metrics`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from topology.errors import SpecError
from topology.hostnames import natural_key
from topology.model import Cluster, Host

from .baselines import BASELINES, topology_greedy
from .job import JobSpec
from .layout import ParallelLayout
from .metrics import PlacementMetrics, alignment_problems, evaluate, human_bytes
from .rankmap import RankMap
from .blocks import block_cells
from .bounds import analytic_lower_bound
from .snake import snake_cells
from .solver import GridProblem, GridSolution, grid_cost, grid_lower_bound, grid_uplinks, solve_grid
from .traffic import GroupTraffic, job_traffic

__all__ = ["PlacementError", "Candidate", "PlanResult", "plan", "metrics_row"]


class PlacementError(SpecError):
    """The job cannot be placed as asked (not rail-aligned, unsupported shape, too few hosts);
    ``source`` and ``key`` name the job file and the parallel setting at fault."""

    exit_code = 4


@dataclass(frozen=True)
class Candidate:
    """One host order and what it costs."""

    name: str
    hosts: tuple
    metrics: PlacementMetrics
    solve_time_s: float = 0.0


@dataclass(frozen=True)
class PlanResult:
    """Our plan, the baselines, and the proof of how good the plan is.

    ``lower_bound_bytes`` bounds the cross-ToR bytes of every placement of this job on
    these hosts; ``gap = (ours - bound) / ours``.
    """

    job: JobSpec
    rankmap: RankMap
    ours: Candidate
    baselines: tuple
    lower_bound_bytes: float
    bound_method: str
    solver_status: str
    notes: tuple = field(default_factory=tuple)

    @property
    def gap(self) -> float:
        cost = self.ours.metrics.cross_tor_bytes
        return max(0.0, (cost - self.lower_bound_bytes) / cost) if cost > 0 else 0.0


@dataclass(frozen=True)
class _Grid:
    row: np.ndarray   # row[N]: grid row (pipeline stage across hosts) of each node rank
    col: np.ndarray   # col[N]: grid column of each node rank
    rows: int
    cols: int


def plan(cluster: Cluster, job: JobSpec, *, time_limit_s: float = 20.0, seed: int = 0,
         workers: int = 1) -> PlanResult:
    """Place ``job`` on the free hosts of ``cluster``.

    Parameters
    ----------
    cluster : Cluster
    job : JobSpec
        ``dp`` may be None ("auto": fill the free GPUs).
    time_limit_s : float
        CP-SAT deterministic time budget for the placement model; the bound model gets a quarter.
    seed : int
        Seeds CP-SAT and the arrival-order baseline.
    workers : int
        CP-SAT workers (interleaved, deterministic).

    Returns
    -------
    PlanResult

    Raises
    ------
    SpecError
        More ranks than free GPUs, batch sizes that do not divide.
    PlacementError
        TP group larger than a host, order string not rail-aligned, CP/EP groups across hosts.
    """
    notes: list[str] = []
    gpn, usable = _usable_hosts(cluster, job, notes)
    job = job.resolved(len(usable) * gpn)
    layout = ParallelLayout.of(job)
    traffic = job_traffic(job)
    n_nodes = job.world_size // gpn
    _check_alignment(job, layout, traffic, gpn)
    grid = _grid(layout, gpn, n_nodes)
    tor_index = {g.name: g.index for g in cluster.tor_groups}
    n_tor = len(cluster.tor_groups)

    def measure(name: str, hosts: list[str], solve_time_s: float = 0.0) -> Candidate:
        node_tor = np.array([tor_index[cluster.host(h).tor_group] for h in hosts])
        return Candidate(name, tuple(hosts), evaluate(layout, traffic, np.repeat(node_tor, gpn), n_tor), solve_time_s)

    baselines = tuple(measure(name, fn(cluster, usable, n_nodes, seed)) for name, fn in BASELINES.items())
    problem, unit = _problem(cluster, usable, grid, traffic, gpn)
    t0 = time.perf_counter()
    sol, bound, method = _solve(problem, _cells(grid, topology_greedy(cluster, usable, n_nodes, seed), cluster,
                                                tor_index), time_limit_s, seed, workers)
    ours = measure("rankmap", _decode(sol.cells, grid, usable, tor_index), time.perf_counter() - t0)
    rm = RankMap.from_hosts(job, cluster, list(ours.hosts), gpn)
    notes += _tradeoffs(ours, baselines, traffic, gpn)
    result = PlanResult(job, rm, ours, baselines, bound * unit, method, sol.status, tuple(notes))
    return _with_summary(result)


def _tradeoffs(ours: Candidate, baselines: tuple, traffic: dict[str, GroupTraffic], gpn: int) -> list[str]:
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


# Above this many (stage, ToR group) pairs the CP-SAT models are skipped: the block
# layouts and the analytic bound already close the gap, and the models grow slow.
_CP_SAT_MAX_PAIRS = 1500


def _solve(problem: GridProblem, greedy: np.ndarray, time_limit_s: float, seed: int,
           workers: int) -> tuple[GridSolution, int, str]:
    """Constructive starts, the bounds, then CP-SAT only if the bound leaves room.

    Starts: the topology-greedy baseline, the row snake and block layouts of 2-4 rows;
    ranked by cost, then by the heaviest ToR group's uplink load (ECMP pressure).
    Returns the solution, the best lower bound and how it was obtained."""
    cost = functools.partial(grid_cost, problem)

    def rank(cells: np.ndarray) -> tuple[int, int]:
        return cost(cells), int(grid_uplinks(problem, cells).max())

    R, C, free = problem.rows, problem.cols, problem.free
    starts = [greedy, snake_cells(R, C, free, rank, seed=seed)]
    starts += [block_cells(R, C, free, s) for s in range(2, min(R, 4) + 1)]
    hint = min((c for c in starts if c is not None), key=rank)
    bound, method = analytic_lower_bound(R, C, free, problem.w_row, problem.w_col), "analytic"
    small = R * len(free) <= _CP_SAT_MAX_PAIRS
    if small and cost(hint) > bound:
        relaxed, _ = grid_lower_bound(problem, max(1.0, time_limit_s / 4), seed, workers, hint)
        if relaxed > bound:
            bound, method = relaxed, "relaxation"
    if cost(hint) <= bound:
        return GridSolution(hint, cost(hint), "OPTIMAL", 0.0), bound, method
    if not small:
        return GridSolution(hint, cost(hint), "HEURISTIC", 0.0), bound, method
    return solve_grid(problem, hint, time_limit_s, seed, workers), bound, method


def _usable_hosts(cluster: Cluster, job: JobSpec, notes: list[str]) -> tuple[int, list[Host]]:
    free = list(cluster.free_hosts())
    if not free:
        raise PlacementError(f"cluster {cluster.name!r} has no free hosts", key="availability")
    counts = Counter(h.gpus for h in free)
    gpn = max(counts, key=lambda g: (counts[g], g))
    usable = [h for h in free if h.gpus >= gpn]
    small = sorted((h for h in free if h.gpus < gpn), key=lambda h: natural_key(h.name))
    if small:
        notes.append(f"{len(small)} free hosts have fewer than {gpn} GPUs and are not used: "
                     + ", ".join(f"{h.name} ({h.gpus})" for h in small[:5]) + (" ..." if len(small) > 5 else ""))
    if gpn % job.tp:
        raise PlacementError(f"tp={job.tp} does not fit the hosts: a TP group must sit inside one host, "
                             f"and the free hosts have {gpn} GPUs (tp must divide {gpn})",
                             source=job.source, key="parallel.tp")
    return gpn, usable


def _check_alignment(job: JobSpec, layout: ParallelLayout, traffic: dict[str, GroupTraffic], gpn: int) -> None:
    ranks = np.arange(job.world_size)
    problems = alignment_problems(layout, traffic, ranks // gpn, ranks % gpn)
    if problems:
        raise PlacementError(f"order {job.order!r} with tp={job.tp} cp={job.cp} ep={job.ep} dp={job.dp} "
                             f"pp={job.pp} on {gpn}-GPU hosts: " + "; ".join(problems[:2])
                             + ". Use an order whose leading dims fill a host exactly (e.g. tp*cp = GPUs per host).",
                             source=job.source, key="parallel.order")
    node_coords = layout.coord_table.reshape(-1, gpn, 5)
    across = (node_coords[:, :1, :] != node_coords[0:1, :1, :]).any(axis=(0, 1))
    for i, dim in enumerate(("tp", "cp", "ep")):
        if across[i] and dim != "tp":
            raise PlacementError(f"{dim.upper()} groups span hosts (tp*cp*ep = {job.tp * job.cp * job.ep} "
                                 f"> {gpn} GPUs per host, or {dim} outside the host in order {job.order!r}); "
                                 f"the planner places DP and PP across hosts only", source=job.source,
                                 key=f"parallel.{dim}")


def _grid(layout: ParallelLayout, gpn: int, n_nodes: int) -> _Grid:
    pp_of_node = layout.coord_table[::gpn, 4]
    varies = n_nodes > 1 and (pp_of_node != pp_of_node[0]).any()
    row = pp_of_node if varies else np.zeros(n_nodes, dtype=np.int64)
    rows = int(row.max()) + 1
    col = np.empty(n_nodes, dtype=np.int64)
    for r in range(rows):
        members = np.nonzero(row == r)[0]
        col[members] = np.arange(members.size)
    return _Grid(row, col, rows, n_nodes // rows)


def _problem(cluster: Cluster, usable: list[Host], grid: _Grid, traffic: dict[str, GroupTraffic],
             gpn: int) -> tuple[GridProblem, float]:
    w_row = gpn * traffic["dp"].edge_bytes if grid.cols > 1 else 0.0
    w_col = gpn * traffic["pp"].edge_bytes if grid.rows > 1 else 0.0
    positive = [w for w in (w_row, w_col) if w > 0]
    # Integer units for CP-SAT: the smaller weight becomes ~1e6 units; weights are floored,
    # so bound * unit stays a valid lower bound in bytes.
    unit = min(positive) / 1e6 if positive else 1.0
    free = Counter(h.tor_group for h in usable)
    per_group = tuple(free.get(g.name, 0) for g in cluster.tor_groups)
    return GridProblem(grid.rows, grid.cols, per_group, int(w_row // unit), int(w_col // unit)), unit


def _cells(grid: _Grid, hosts: list[str], cluster: Cluster, tor_index: dict) -> np.ndarray:
    cells = np.empty((grid.rows, grid.cols), dtype=np.int64)
    cells[grid.row, grid.col] = [tor_index[cluster.host(h).tor_group] for h in hosts]
    return cells


def _decode(cells: np.ndarray, grid: _Grid, usable: list[Host], tor_index: dict) -> list[str]:
    """Hosts per node rank: each group's hosts in name order, handed out row by row."""
    pools: dict[int, list[str]] = {}
    for h in sorted(usable, key=lambda h: natural_key(h.name)):
        pools.setdefault(tor_index[h.tor_group], []).append(h.name)
    taken = {g: 0 for g in pools}
    at_cell: dict[tuple, str] = {}
    for r in range(grid.rows):
        for c in range(grid.cols):
            g = int(cells[r, c])
            at_cell[r, c] = pools[g][taken[g]]
            taken[g] += 1
    return [at_cell[int(r), int(c)] for r, c in zip(grid.row, grid.col)]


def metrics_row(c: Candidate, bound_bytes: float) -> dict:
    """One candidate's figures, as in the ``summary`` of rankmap.json and the CLI table.

    Solve time is left out: files must be byte-identical across runs."""
    m = c.metrics
    cost = m.cross_tor_bytes
    return {
        "cross_tor_bytes": cost,
        "dp_edges_cross_tor": m.cross_edges["dp"],
        "pp_edges_cross_tor": m.cross_edges["pp"],
        "max_dp_spread_tor_groups": m.max_spread["dp"],
        "max_uplink_bytes": m.max_uplink_bytes,
        "gap_to_bound": max(0.0, (cost - bound_bytes) / cost) if cost > 0 else 0.0,
    }


def _with_summary(result: PlanResult) -> PlanResult:
    bound = result.lower_bound_bytes
    summary = {
        "plan": metrics_row(result.ours, bound),
        "lower_bound_bytes": bound,
        "bound_method": result.bound_method,
        "solver_status": result.solver_status,
        "baselines": {b.name: metrics_row(b, bound) for b in result.baselines},
    }
    rm = dataclasses.replace(result.rankmap, summary=summary)
    return dataclasses.replace(result, rankmap=rm)
