"""Building the placement problem once: usable hosts, capacities, the host grid, typed pins.

The planner (:mod:`rankmap.placement.plan`) computes the free hosts a job may use once per
plan (:func:`host_pool`) and, for each island and order string it tries, the problem on
them once (:func:`build_problem`): the job with dp resolved, hosts per ToR group after
quotas, the (stage x DP) host grid, the CP/EP span, pins as grid constraints, and the grid
problem in integer cost units. Every later step reads this object; none recomputes it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rankmap.errors import InfeasibleError, PlacementError
from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import JobSpec
from rankmap.job.traffic import GroupTraffic, group_edges, job_traffic
from rankmap.placement.constraints import PlacementConstraints, explain_shortage
from rankmap.placement.grid_problem import GridPins, GridProblem, scaled_problem
from rankmap.placement.host_grid import HostGrid, build_grid, check_alignment, expert_span
from rankmap.placement.metrics import measure_order
from rankmap.placement.pins import grid_pins, node_pins
from rankmap.placement.result import Candidate
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster

__all__ = ["HostPool", "host_pool", "PlacementProblem", "build_problem"]


@dataclass(frozen=True)
class HostPool:
    """The free hosts of a cluster that one plan may use.

    Attributes
    ----------
    free : tuple of Host
        Free hosts left after exclusions and reservations, of any shape.
    usable : tuple of Host
        Those shaped like the majority of free hosts (``gpus_per_host`` GPUs, ``nics``
        NICs): only they keep every rail-aligned group on one rail.
    gpus_per_host : int
        The most common GPU count of the free hosts (the larger on ties); 0 with none free.
    nics : int
        The most common NIC count among free hosts of ``gpus_per_host`` GPUs.
    odd : tuple of Host
        Free hosts of another shape, in name order (exclusions not applied: the note
        names every such host of the cluster).
    ranks_per_host : int
        Ranks each host runs (0: all its ``gpus_per_host`` GPUs); fewer for a job smaller
        than a host or not a multiple of it (:mod:`rankmap.placement.host_shapes`).
    """

    free: tuple
    usable: tuple
    gpus_per_host: int
    nics: int
    odd: tuple
    ranks_per_host: int = 0

    @property
    def nproc(self) -> int:
        """Ranks per host: ``ranks_per_host``, else ``gpus_per_host``."""
        return self.ranks_per_host or self.gpus_per_host

    def within(self, tor_groups: set) -> HostPool:
        """The pool restricted to hosts under ``tor_groups`` (one island)."""
        return HostPool(tuple(h for h in self.free if h.tor_group in tor_groups),
                        tuple(h for h in self.usable if h.tor_group in tor_groups),
                        self.gpus_per_host, self.nics, self.odd, self.ranks_per_host)

    def require(self, cluster: Cluster, job: JobSpec) -> None:
        """Raise unless some host is free and a TP group fits inside one host.

        Raises
        ------
        InfeasibleError
            The cluster has no free hosts.
        PlacementError
            ``tp`` does not divide the GPUs per host.
        """
        if not self.gpus_per_host:
            raise _no_free_hosts(cluster)
        gpn = self.gpus_per_host
        if self.nproc % job.tp:
            raise PlacementError(f"tp={job.tp} does not fit the hosts: a TP group must sit inside one host, "
                                 f"and the free hosts have {gpn} GPUs (tp must divide {gpn})",
                                 source=job.source, key="parallel.tp")

    def odd_note(self) -> list[str]:
        """A note naming free hosts left out for their shape (empty if none)."""
        if not self.odd:
            return []
        other = self.odd
        return [f"{len(other)} free hosts are not {self.gpus_per_host}-GPU, {self.nics}-NIC hosts like the others "
                f"and are not used: " + ", ".join(f"{h.name} ({h.gpus} GPUs, {h.nics} NICs)" for h in other[:5])
                + (" ..." if len(other) > 5 else "")]


def host_pool(cluster: Cluster, constraints: PlacementConstraints) -> HostPool:
    """The free hosts of ``cluster`` a plan may use under ``constraints`` (see :class:`HostPool`)."""
    free = list(cluster.free_hosts())
    if not free:
        return HostPool((), (), 0, 0, ())
    counts = Counter(h.gpus for h in free)
    gpn = max(counts, key=lambda g: (counts[g], g))
    nics = Counter(h.nics for h in free if h.gpus == gpn).most_common(1)[0][0]
    # Only hosts shaped like the majority keep every rail-aligned group on one rail.
    usable = [h for h in free if h.gpus == gpn and h.nics == nics]
    odd = sorted((h for h in free if (h.gpus, h.nics) != (gpn, nics)), key=lambda h: natural_key(h.name))
    return HostPool(tuple(constraints.usable(free)), tuple(constraints.usable(usable)), gpn, nics, tuple(odd))


@dataclass(frozen=True)
class PlacementProblem:
    """Everything derived from the job, the cluster and the constraints that the search reads.

    Attributes
    ----------
    job : JobSpec
        With dp resolved.
    gpn : int
        Ranks per host (all its GPUs, or fewer: :attr:`HostPool.ranks_per_host`).
    usable : tuple of Host
        Hosts the job may use.
    caps : tuple of int
        ``caps[K]``: usable hosts per ToR group, after quotas.
    layout : ParallelLayout
    traffic : dict of str to GroupTraffic
    grid : HostGrid
    tor_index : dict of str to int
        ToR group name -> index.
    cp_ep_span : int
        Hosts one CP x EP group spans (1 when CP and EP stay inside hosts).
    node_pins : dict of int to str
        ``{node rank: host}`` from rank pins.
    pins : GridPins
        Stage and rank pins as grid constraints.
    grid_problem : GridProblem
        The grid in integer cost units.
    unit_bytes : float
        Bytes per cost unit.
    notes : tuple of str
        What the planner tells the user about the hosts it left out.
    """

    job: JobSpec
    gpn: int
    usable: tuple
    caps: tuple
    layout: ParallelLayout
    traffic: dict
    grid: HostGrid
    tor_index: dict
    cp_ep_span: int
    node_pins: dict
    pins: GridPins
    grid_problem: GridProblem
    unit_bytes: float
    notes: tuple

    def measure(self, cluster: Cluster, name: str, hosts: list[str], solve_time_s: float = 0.0) -> Candidate:
        """The candidate that launching ``hosts`` in node-rank order gives (see
        :func:`rankmap.placement.metrics.measure_order`)."""
        metrics = measure_order(cluster, self.layout, self.traffic, hosts, self.gpn)
        return Candidate(name, tuple(hosts), metrics, solve_time_s)


def build_problem(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints,
                  pool: HostPool | None = None) -> PlacementProblem:
    """The placement problem of ``job`` on ``pool`` (default: the cluster's whole pool).

    Raises
    ------
    SpecError
        Unknown hosts or ToR groups in ``constraints``.
    PlacementError
        TP group larger than a host, order string not rail-aligned, CP/EP groups across hosts.
    InfeasibleError
        Too few usable hosts, or pins that cannot be met (names the shortfall).
    """
    constraints.check_names(cluster)
    pool = pool if pool is not None else host_pool(cluster, constraints)
    pool.require(cluster, job)
    gpn, usable = pool.nproc, pool.usable
    caps = constraints.caps(cluster, list(usable))
    job = _resolved(cluster, job, gpn, caps, constraints, list(usable))
    if job.world_size % gpn:
        raise PlacementError(f"the job's {job.world_size} ranks (tp*cp*pp*dp) do not fill whole {gpn}-GPU hosts, "
                             f"and no smaller count of ranks per host divides {job.world_size}, holds whole TP "
                             f"groups, keeps every inter-host group rail-aligned and fits the "
                             f"{sum(caps)} usable hosts", source=job.source, key="parallel.dp")
    layout, traffic = ParallelLayout.of(job), job_traffic(job)
    span = check_alignment(job, layout, traffic, gpn,
                           lambda message, key: PlacementError(message, source=job.source, key=key))
    grid = build_grid(layout, gpn, job.world_size // gpn)
    if span == 1:  # EP of the expert generator ("parallel folding") may span hosts too
        span = expert_span(layout, grid, gpn)
    tor_index = {g.name: g.index for g in cluster.tor_groups}
    fixed = node_pins(cluster, job, gpn, usable, constraints)
    pins = grid_pins(cluster, job, grid, caps, tor_index, constraints, fixed)
    problem, unit = scaled_problem(caps, grid.rows, grid.cols, traffic, edges_per_crossing(layout, traffic, grid, gpn))
    notes = pool.odd_note()
    if gpn < pool.gpus_per_host:
        notes.append(f"each host runs {gpn} of its {pool.gpus_per_host} GPUs: the job's {job.world_size} ranks "
                     f"in whole TP groups, rail-aligned (the hostfile lists slots={gpn})")
    return PlacementProblem(job, gpn, usable, caps, layout, traffic, grid, tor_index, span, fixed, pins, problem,
                            unit, tuple(notes))


def edges_per_crossing(layout: ParallelLayout, traffic: dict[str, GroupTraffic], grid: HostGrid,
                       gpn: int) -> tuple[int, int, int]:
    """Rank-level edges between two neighbouring hosts of the grid: DP ring edges between a host
    and the next in its row, PP hops between a host and the one below it, wrap hops (interleaved
    pipelines) between the last row and the first.

    Counted on the job's own groups (ranks on node ``rank // gpn``), so a host holding ``m``
    consecutive members of each DP group (tp * cp * ep < gpn) counts ``gpn / m`` ring edges per
    crossing, not ``gpn``. Where the counts differ between neighbours (uneven layouts) the least
    is taken, which keeps the grid's bound a lower bound on every placement's bytes.

    Returns
    -------
    (int, int, int)
        Edges per ring crossing, per pipeline hop, per wrap hop (0 where none cross).

    Examples
    --------
    >>> from rankmap.job.spec_file import parse_job
    >>> job = parse_job("{model: {preset: gpt3-1.3b}, parallel: {tp: 4, pp: 2, dp: 8}, batch: {num_micro_batches: 4}}")
    >>> layout, traffic = ParallelLayout.of(job), job_traffic(job)
    >>> edges_per_crossing(layout, traffic, build_grid(layout, 8, 8), 8)
    (4, 8, 0)
    """
    node_row, node_col = grid.row, grid.col

    def least(src: np.ndarray, dst: np.ndarray, same_row: bool, cells: int) -> int:
        a, b = src // gpn, dst // gpn
        keep = (a != b) & ((node_row[a] == node_row[b]) if same_row else (node_col[a] == node_col[b]))
        if not keep.any():
            return 0
        per = np.bincount(a[keep], minlength=grid.row.size)
        senders = np.nonzero(per)[0]
        return int(per[senders].min()) if senders.size == cells else 0

    row = least(*group_edges(layout, traffic["dp"]), True, grid.rows * grid.cols) \
        if grid.cols > 1 and "dp" in traffic else 0
    if grid.rows == 1 or "pp" not in traffic:
        return row, 0, 0
    col = least(*group_edges(layout, traffic["pp"]), False, (grid.rows - 1) * grid.cols)
    groups = layout.groups("pp")
    wrap = least(groups[:, -1], groups[:, 0], False, grid.cols) if traffic["pp"].wrap_bytes else 0
    return row, col, wrap


def _resolved(cluster: Cluster, job: JobSpec, gpn: int, caps: tuple, constraints=None, usable=None) -> JobSpec:
    """``job`` with dp resolved to fill ``caps``; InfeasibleError if the hosts are too few (blaming
    the quotas where they hold back the hosts it needs)."""
    if job.dp is not None and job.world_size // gpn > sum(caps):
        raise explain_shortage(cluster, caps, job.world_size // gpn,
                               f"the job (tp*cp*pp*dp = {job.world_size} GPUs on {gpn}-GPU hosts)",
                               job.source, "parallel.dp", constraints, usable)
    replica = job.model_parallel * job.ep
    if job.dp is None and sum(caps) * gpn < replica:
        raise explain_shortage(cluster, caps, -(-replica // gpn), f"one model replica (tp*cp*pp*ep = {replica} GPUs)",
                               job.source, "parallel.dp", constraints, usable)
    return job.resolved(sum(caps) * gpn)


def _no_free_hosts(cluster: Cluster) -> InfeasibleError:
    """The error for a cluster without a free host, located at the spec key that made its hosts
    busy or failed (``availability.busy``, with its line), or at ``availability`` for both."""
    counts = {state: sum(h.state == state for h in cluster.hosts) for state in ("busy", "failed")}
    keys = [f"availability.{state}" for state, n in counts.items() if n]
    key = keys[0] if len(keys) == 1 else "availability"
    if len(keys) == 1:
        said = f"all {len(cluster.hosts)} hosts are {keys[0].split('.')[1]}"
    else:
        said = " and ".join(f"{counts[k.split('.')[1]]} are {k.split('.')[1]}"
                            + (f" ({k}, line {cluster.lines[k]})" if k in cluster.lines else "") for k in keys)
    return InfeasibleError(f"cluster {cluster.name!r} has no free hosts: {said}", source=cluster.source,
                           line=cluster.lines.get(key), key=key)
