"""Re-plan after failures: replace failed hosts, moving no rank that need not move.

Only the ranks of failed hosts move (the fewest possible). A host of the map that the cluster
spec marks busy is the job's own (a spec refreshed from the scheduler while the job runs, e.g.
from Slurm's ``sinfo``, marks every host of the job allocated), so its ranks stay. Each failed host is replaced,
in node-rank order, by a usable host of its own ToR group when one exists (the cost does
not change), else by the usable host whose ToR group adds the fewest bytes crossing ToR
groups, measured with the plan's exact cost model.
"""

from __future__ import annotations

from dataclasses import dataclass

from rankmap.errors import InfeasibleError, SpecError
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map import RankMap
from rankmap.job.traffic import job_traffic
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.metrics import PlacementMetrics, measure_order
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster

__all__ = ["ReplanResult", "replan"]

@dataclass(frozen=True)
class ReplanResult:
    """The new map, which hosts were replaced by which, and the cost before and after."""

    rankmap: RankMap
    replaced: tuple        # ((node_rank, failed host, new host), ...)
    moved_ranks: int
    before: PlacementMetrics
    after: PlacementMetrics

def replan(cluster: Cluster, previous: RankMap, failed: list[str],
           constraints: PlacementConstraints | None = None) -> ReplanResult:
    """Replace ``failed`` hosts (and hosts of the map the cluster marks failed) in ``previous``.

    Hosts of the map that the cluster marks busy are taken to run this job: they keep their
    ranks. Spares are the cluster's free hosts outside the map.

    Parameters
    ----------
    cluster : Cluster
        The cluster the map was made for (checked by spec hash).
    previous : RankMap
    failed : list of str
        Hosts that failed since the plan; they are marked failed.
    constraints : PlacementConstraints, optional
        Exclusions and reservations the replacements must respect.

    Returns
    -------
    ReplanResult

    Raises
    ------
    RankMapFileError
        The map was made for another cluster.
    SpecError
        No host of the map is failed (nothing to replace).
    InfeasibleError
        Fewer usable spare hosts than failed ones (names the shortfall).
    """
    constraints = constraints or PlacementConstraints()
    previous.verify_cluster(cluster)
    if not previous.uniform:
        raise InfeasibleError("the map runs different numbers of ranks per host; re-plan it with `rankmap plan`",
                              key="--rankmap")
    cluster = cluster.with_states({h: "failed" for h in failed})
    constraints.check_names(cluster)
    gpn = previous.nproc_per_node
    in_map = set(previous.hosts)
    # only failed hosts are replaced: a busy host of the map is this job's own (the scheduler marks
    # a running job's hosts allocated), not another job's
    down = [n for n, h in enumerate(previous.hosts) if cluster.host(h).state == "failed"]
    if not down:  # rewriting the map would only drop its plan summary (and its launch files)
        raise SpecError("no host of the map is failed: nothing to replace (name them with --failed, or mark them "
                        "failed in the cluster spec)", key="--failed")
    _check_reserved(previous, down, constraints)
    island = next(set(i) for i in cluster.islands() if previous.tor_groups[0] in i)  # a job never leaves its island
    spares = [h for h in constraints.usable(list(cluster.free_hosts()))
              if h.name not in in_map and h.gpus >= gpn and h.tor_group in island]
    if len(spares) < len(down):
        raise InfeasibleError(f"{len(down)} hosts of the plan are down, only {len(spares)} usable spare hosts with "
                              f">= {gpn} GPUs: {len(down) - len(spares)} short", key="--failed")
    layout, traffic = ParallelLayout.of(previous.job), job_traffic(previous.job)
    tor_index = {g.name: g.index for g in cluster.tor_groups}

    def cost(hosts: list[str]) -> PlacementMetrics:
        return measure_order(cluster, layout, traffic, hosts, gpn)

    hosts = list(previous.hosts)
    before = cost(hosts)
    pool: dict[int, list[str]] = {}
    for h in sorted(spares, key=lambda h: natural_key(h.name)):
        pool.setdefault(tor_index[h.tor_group], []).append(h.name)
    replaced = []
    for node in down:
        g = _replacement_group(cost, hosts, node, pool, tor_index[cluster.host(hosts[node]).tor_group])
        new = pool[g].pop(0)
        replaced.append((node, hosts[node], new))
        hosts[node] = new
    after = cost(hosts)
    summary = {"replan": {"replaced": [[n, a, b] for n, a, b in replaced], "moved_ranks": len(replaced) * gpn,
                          "cross_tor_bytes_before": before.cross_tor_bytes,
                          "cross_tor_bytes_after": after.cross_tor_bytes}}
    rm = RankMap.from_hosts(previous.job, cluster, hosts, gpn, summary)
    return ReplanResult(rm, tuple(replaced), len(replaced) * gpn, before, after)

def _check_reserved(previous: RankMap, down: list[int], constraints: PlacementConstraints) -> None:
    """Refuse a map whose kept hosts another job holds (``constraints.reserve``: its rank map
    was given to ``--reserve``): replan moves only the failed hosts' ranks, so the new map would
    start this job on hosts a running job uses. Refused rather than warned about: a launch on
    them fails (GPU memory, ports) or slows both jobs, and the fix is the user's choice -- drop
    that reservation (a stale map, this job's own) or name the hosts in ``--failed`` to move off them.

    Raises
    ------
    SpecError
        Located where the reservation was made (``FILE:LINE: reserve[I]`` of a constraints file,
        or ``--reserve PATH``), naming the hosts (a hostlist) and their node ranks.
    """
    from rankmap.names import host_identity
    from rankmap.topology.hostnames import compress_hostlist

    reserved = {host_identity(h) for h in constraints.reserve}
    clash = [(n, h) for n, h in enumerate(previous.hosts) if n not in down and host_identity(h) in reserved]
    if clash:
        source, line, key, path = constraints.reserved_by.get(host_identity(clash[0][1]),
                                                              (None, None, "--reserve", None))
        clash = [(n, h) for n, h in clash  # the hosts of that one reservation
                 if constraints.reserved_by.get(host_identity(h), (None, None, "--reserve", None))[2] == key]
        hosts = compress_hostlist(sorted(h for _, h in clash))
        held = f"the job of rank map {path}" if path else "another job"
        raise SpecError(f"{len(clash)} host(s) of the map that replan keeps are reserved for {held}: {hosts} "
                        f"(node ranks {', '.join(str(n) for n, _ in clash[:8])}{' ...' if len(clash) > 8 else ''}); "
                        f"two jobs cannot share hosts: drop that reservation if the map is stale, or name the hosts in "
                        f"--failed to move this job's ranks off them", source=source, line=line, key=key)


def _replacement_group(cost, hosts: list[str], node: int, pool: dict[int, list[str]], own: int) -> int:
    """The ToR group to replace node ``node``'s host from: its own group while it has spares,
    else the group whose first spare adds the fewest cross-ToR bytes (then the lowest index)."""
    if pool.get(own):
        return own

    def with_group(g: int) -> float:
        trial = list(hosts)
        trial[node] = pool[g][0]
        return cost(trial).cross_tor_bytes

    return min((g for g in pool if pool[g]), key=lambda g: (with_group(g), g))
