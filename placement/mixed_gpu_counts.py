"""Plans on hosts of different GPU counts (e.g. a DeepSpeed hostfile with ``slots=N``).

Each host runs a whole number of TP groups (``n_h = floor(gpus_h / tp) * tp`` ranks, the
last host fewer), ranks numbered node after node as launchers do, so no TP group
straddles two hosts. Hosts are taken ToR group by ToR group (the group with the most
room first), the largest hosts first inside a group, which keeps rings in few groups.
Groups of different sizes on different hosts cannot all share local ranks, so such
plans are not rail-aligned in general; the plan says how many inter-host edges change
rails.
"""

from __future__ import annotations

import numpy as np

from rankmap.errors import InfeasibleError
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec
from rankmap.job.traffic import alignment_problems, job_traffic
from rankmap.placement.metrics import measure_order
from rankmap.placement.result import Candidate, PlanResult, with_summary
from rankmap.placement.status import SolverStatus
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host

__all__ = ["packable_gpus", "pack_plan", "tp_shortage"]


def packable_gpus(hosts: list[Host], tp: int) -> int:
    """GPUs usable by whole TP groups: ``sum_h floor(gpus_h / tp) * tp``."""
    return sum(h.gpus // tp * tp for h in hosts)


def _take(order: list[Host], world: int, tp: int) -> tuple[list[str], list[int]]:
    hosts, counts, left = [], [], world
    for h in order:
        n = min(h.gpus // tp * tp, left)
        if n:
            hosts.append(h.name)
            counts.append(n)
            left -= n
        if left == 0:
            break
    return hosts, counts


def tp_shortage(hosts: list[Host], job: JobSpec, world: int) -> InfeasibleError:
    """Why whole TP groups do not fit: the hosts and their GPU counts."""
    big = sorted((h for h in hosts if h.gpus >= job.tp), key=lambda h: natural_key(h.name))
    small = sorted((h for h in hosts if h.gpus < job.tp), key=lambda h: (-h.gpus, natural_key(h.name)))
    show = lambda hs: ", ".join(f"{h.name} ({h.gpus})" for h in hs[:8]) + (" ..." if len(hs) > 8 else "")
    return InfeasibleError(
        f"tp={job.tp}: a TP group must sit inside one host; the job needs {world} GPUs in whole TP groups, "
        f"the free hosts hold {packable_gpus(hosts, job.tp)}: hosts with >= {job.tp} GPUs: {show(big) or 'none'}; "
        f"smaller hosts: {show(small) or 'none'}", source=job.source, key="parallel.tp")


def pack_plan(cluster: Cluster, job: JobSpec, usable: list[Host], baselines: dict, seed: int) -> PlanResult:
    """Plan ``job`` (dp resolved) on hosts of different sizes; see the module docstring.

    Raises
    ------
    InfeasibleError
        Whole TP groups do not fit (names the hosts and their GPU counts), or the order
        string splits TP groups across hosts.
    """
    world = job.world_size
    if packable_gpus(usable, job.tp) < world:
        raise tp_shortage(usable, job, world)
    room: dict[str, int] = {}
    for h in usable:
        room[h.tor_group] = room.get(h.tor_group, 0) + h.gpus // job.tp * job.tp
    index = {g.name: g.index for g in cluster.tor_groups}
    order = sorted(usable, key=lambda h: (-room[h.tor_group], index[h.tor_group], -h.gpus, natural_key(h.name)))
    layout, traffic = ParallelLayout.of(job), job_traffic(job)

    def measure(name: str, hosts_order: list[Host]) -> tuple[Candidate, list[int]]:
        hosts, counts = _take(hosts_order, world, job.tp)
        return Candidate(name, tuple(hosts), measure_order(cluster, layout, traffic, hosts, counts)), counts

    ours, counts = measure("rankmap", order)
    rank_node = np.repeat(np.arange(len(counts)), counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    rank_local = np.arange(world) - offsets[rank_node]
    problems = alignment_problems(layout, traffic, rank_node, rank_local, limit=1)
    if any(p.startswith("TP group") for p in problems):
        raise InfeasibleError(f"order {job.order!r} splits TP groups across hosts of different sizes "
                              f"({problems[0]}); put tp first in the order", source=job.source, key="parallel.order")
    by_name = {h.name: h for h in usable}
    base = tuple(measure(name, [by_name[n] for n in fn(cluster, usable, len(usable), seed)])[0]
                 for name, fn in baselines.items())
    off_rail = sum(1 for p in problems if "not rail-aligned" in p)
    notes = ["hosts have different GPU counts: each runs whole TP groups (hostfile lists slots per host)"]
    if off_rail:
        notes.append("inter-host groups on hosts of different sizes cannot keep every edge on one rail")
    rm = RankMap.from_hosts(job, cluster, list(ours.hosts), max(counts), nprocs=counts)
    return with_summary(PlanResult(job, rm, ours, base, 0.0, "none (hosts of different sizes)",
                                   SolverStatus.PACKED,
                                   tuple(notes)))
