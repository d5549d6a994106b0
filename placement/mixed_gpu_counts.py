"""Plans on hosts of different GPU counts (e.g. a DeepSpeed hostfile with ``slots=N``).

Each host runs a whole number of TP groups (``n_h = floor(gpus_h / tp) * tp`` ranks, the
last host fewer), ranks numbered node after node as launchers do, so no TP group
straddles two hosts. Hosts are taken ToR group by ToR group (the group with the most
room first), the largest hosts first inside a group, which keeps rings in few groups.
Groups of different sizes on different hosts cannot all share local ranks, so such
plans are not rail-aligned in general; the plan says how many inter-host edges change
rails.

Among host orders of equal cost the plan prefers one where every host's first global rank
is a multiple of its GPU count: frameworks that pick the device as ``rank % gpus_per_node``
(Megatron-LM's ``initialize._initialize_distributed``: ``device = rank % device_count``)
then pick the GPU the launcher's local rank names. Orders tried: the group-by-group order
above, the largest hosts first (group by group, and over all groups), and the baselines'.
When no order of the least cost has that property, the plan says so in a note.
"""

from __future__ import annotations

import numpy as np

from rankmap.errors import InfeasibleError
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec
from rankmap.job.traffic import alignment_problems, job_traffic
from rankmap.placement.metrics import human_bytes, measure_order
from rankmap.placement.result import Candidate, PlanResult, with_summary
from rankmap.placement.status import SolverStatus
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host

__all__ = ["packable_gpus", "pack_plan", "tp_shortage", "misaligned_hosts"]


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


def misaligned_hosts(gpus: list[int], counts: list[int]) -> list[int]:
    """Indices of the hosts (in node-rank order) whose first global rank is not a multiple of
    their GPU count, so that ``rank % gpus`` is not their local rank.

    Parameters
    ----------
    gpus : list of int
        ``gpus[N]``: GPUs of each host, in node-rank order.
    counts : list of int
        ``counts[N]``: ranks each host runs.

    Examples
    --------
    Three 4-GPU hosts, then an 8-GPU one (first rank 12), and the 8-GPU host first.

    >>> misaligned_hosts([4, 4, 4, 8], [4, 4, 4, 8]), misaligned_hosts([8, 4, 4, 4], [8, 4, 4, 4])
    ([3], [])
    """
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    return [i for i, (g, o) in enumerate(zip(gpus, offsets)) if o % g]


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
    largest: dict[str, int] = {}
    for h in usable:
        largest[h.tor_group] = max(largest.get(h.tor_group, 0), h.gpus)
    index = {g.name: g.index for g in cluster.tor_groups}
    layout, traffic = ParallelLayout.of(job), job_traffic(job)
    by_name = {h.name: h for h in usable}

    def measure(name: str, hosts_order: list[Host]) -> tuple[Candidate, list[int]]:
        hosts, counts = _take(hosts_order, world, job.tp)
        return Candidate(name, tuple(hosts), measure_order(cluster, layout, traffic, hosts, counts)), counts

    base = tuple(measure(name, [by_name[n] for n in fn(cluster, usable, len(usable), seed)])
                 for name, fn in baselines.items())
    orders = [sorted(usable, key=key) for key in (
        lambda h: (-room[h.tor_group], index[h.tor_group], -h.gpus, natural_key(h.name)),
        lambda h: (-largest[h.tor_group], -room[h.tor_group], index[h.tor_group], -h.gpus, natural_key(h.name)),
        lambda h: (-h.gpus, -room[h.tor_group], index[h.tor_group], natural_key(h.name)))]
    tried = [measure("rankmap", o) for o in orders] + [(Candidate("rankmap", c.hosts, c.metrics), n) for c, n in base]

    def misaligned(option: tuple[Candidate, list[int]]) -> list[int]:
        return misaligned_hosts([by_name[h].gpus for h in option[0].hosts], option[1])

    least = min(c.metrics.cost for c, _ in tried)
    ties = [t for t in tried if t[0].metrics.cost <= least * (1 + 1e-12)]
    ours, counts = min(ties, key=lambda t: (len(misaligned(t)), t[0].metrics.max_uplink_bytes))
    notes = ["hosts have different GPU counts: each runs whole TP groups (hostfile lists slots per host)"]
    notes += _alignment_note(ours, counts, misaligned((ours, counts)), tried, misaligned, by_name)
    rank_node = np.repeat(np.arange(len(counts)), counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    rank_local = np.arange(world) - offsets[rank_node]
    problems = alignment_problems(layout, traffic, rank_node, rank_local, limit=1)
    if any(p.startswith("TP group") for p in problems):
        raise InfeasibleError(f"order {job.order!r} splits TP groups across hosts of different sizes "
                              f"({problems[0]}); put tp first in the order", source=job.source, key="parallel.order")
    base = tuple(c for c, _ in base)
    off_rail = sum(1 for p in problems if "not rail-aligned" in p)
    if off_rail:
        notes.append("inter-host groups on hosts of different sizes cannot keep every edge on one rail")
    rm = RankMap.from_hosts(job, cluster, list(ours.hosts), max(counts), nprocs=counts)
    return with_summary(PlanResult(job, rm, ours, base, 0.0, "none (hosts of different sizes)",
                                   SolverStatus.PACKED,
                                   tuple(notes)))


def _alignment_note(ours: Candidate, counts: list[int], bad: list[int], tried: list, misaligned,
                    by_name: dict) -> list[str]:
    """A note when some host of the plan does not start at a multiple of its GPU count
    (and what the cheapest order where every host does would cost more, if one was tried)."""
    if not bad:
        return []
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    listing = ", ".join(f"{ours.hosts[i]} starts at rank {starts[i]} with {by_name[ours.hosts[i]].gpus} GPUs"
                        for i in bad[:4]) + (" ..." if len(bad) > 4 else "")
    aligned = [c.metrics.cost for c, n in tried if not misaligned((c, n))]
    other = (f"; the cheapest order tried where every host does costs {human_bytes(min(aligned) - ours.metrics.cost)}"
             f" more" if aligned else "")
    return [f"no host order of the least cost starts every host at a multiple of its GPU count ({listing}): "
            f"frameworks that set the device to rank % gpus_per_node pick another GPU than LOCAL_RANK there; "
            f"set the device from LOCAL_RANK{other}"]
