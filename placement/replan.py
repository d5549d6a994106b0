"""Re-plan after failures: replace failed hosts, moving no rank that need not move.

Only the ranks of failed hosts move (the fewest possible). A host of the map that the cluster
spec marks busy is the job's own (a spec refreshed from the scheduler while the job runs, e.g.
from Slurm's ``sinfo``, marks every host of the job allocated), so its ranks stay. Each failed host is replaced,
in node-rank order, by a usable host of its own ToR group when one exists (the cost does
not change), else by the usable host whose ToR group adds the least to the cost the planner
optimises: bytes crossing each tier times the tier's weight (:mod:`rankmap.placement.tier_weights`;
the weights the map was planned with, ``summary.tier_weights``), measured with the plan's exact
cost model. On a fabric with pods this keeps a replacement in the failed host's pod when a spare
there costs the same at the ToR tier: a byte crossing an oversubscribed core weighs more.
"""

from __future__ import annotations

from dataclasses import dataclass

from rankmap.errors import InfeasibleError, SpecError
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map import RankMap
from rankmap.job.traffic import job_traffic
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.metrics import PlacementMetrics, measure_order
from rankmap.placement.tier_weights import crossed_tiers, default_tier_weights
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster

__all__ = ["ReplanResult", "replan", "map_tier_weights"]

@dataclass(frozen=True)
class ReplanResult:
    """The new map, which hosts were replaced by which, and the cost before and after
    (``before.tier_bytes[L]``, ``before.weighted_bytes`` with ``weights[L]``)."""

    rankmap: RankMap
    replaced: tuple        # ((node_rank, failed host, new host), ...)
    moved_ranks: int
    before: PlacementMetrics
    after: PlacementMetrics
    weights: tuple = ()    # w[L]: the tier weights the replacements were chosen by
    tiers: tuple = ()      # [L]: the names of the tiers, lowest first (crossed_tiers)
    not_in_map: tuple = () # failed hosts outside the map (a whole rack named): kept out of the spares

def replan(cluster: Cluster, previous: RankMap, failed: list[str],
           constraints: PlacementConstraints | None = None, weights: tuple | None = None) -> ReplanResult:
    """Replace ``failed`` hosts (and hosts of the map the cluster marks failed) in ``previous``.

    Hosts of the map that the cluster marks busy are taken to run this job: they keep their
    ranks. Spares are the cluster's free hosts outside the map.

    Parameters
    ----------
    cluster : Cluster
        The cluster the map was made for (checked by spec hash).
    previous : RankMap
    failed : list of str
        Hosts that failed since the plan; they are marked failed. Those outside the map (a whole
        failed rack, named by its hostlist) replace nothing and are no spares
        (``ReplanResult.not_in_map``).
    constraints : PlacementConstraints, optional
        Exclusions and reservations the replacements must respect.
    weights : tuple of float, optional
        ``w[L]``: tier weights to choose replacements by (default: :func:`map_tier_weights`, those
        the map was planned with).

    Returns
    -------
    ReplanResult
        Its summary (``rankmap.summary["replan"]``) holds the replacements and, before and after,
        the bytes per iteration crossing each tier and the weighted cost.

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
    weights = tuple(weights) if weights is not None else map_tier_weights(previous, cluster)

    def cost(hosts: list[str]) -> PlacementMetrics:
        return measure_order(cluster, layout, traffic, hosts, gpn, weights)

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
                          "cross_tor_bytes_after": after.cross_tor_bytes,
                          "tier_bytes_before": list(before.tier_bytes), "tier_bytes_after": list(after.tier_bytes),
                          "weighted_bytes_before": before.cost, "weighted_bytes_after": after.cost,
                          "tier_weights": list(weights)}}
    rm = RankMap.from_hosts(previous.job, cluster, hosts, gpn, summary)
    outside = tuple(sorted({h for h in failed if h not in in_map}, key=natural_key))
    return ReplanResult(rm, tuple(replaced), len(replaced) * gpn, before, after, weights, crossed_tiers(cluster),
                        outside)


def map_tier_weights(previous: RankMap, cluster: Cluster) -> tuple:
    """``w[L]``: the tier weights ``previous`` was planned with (``summary.tier_weights`` of a plan,
    ``summary.replan.tier_weights`` of a replan), else the cluster's defaults
    (:func:`rankmap.placement.tier_weights.default_tier_weights`), e.g. for a map from another tool
    or one whose recorded weights do not fit the cluster's tiers."""
    summary = previous.summary if isinstance(previous.summary, dict) else {}
    recorded = (summary.get("replan") or {}).get("tier_weights") if "replan" in summary else summary.get("tier_weights")
    if (isinstance(recorded, list) and len(recorded) == cluster.depth
            and all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in recorded)):
        return tuple(float(w) for w in recorded)
    return default_tier_weights(cluster)

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
    else the group whose first spare gives the least tier-weighted cost (the planner's objective),
    then the fewest bytes on the highest tier, then the busiest ToR uplinks, then the lowest index."""
    if pool.get(own):
        return own

    def with_group(g: int) -> tuple:
        trial = list(hosts)
        trial[node] = pool[g][0]
        m = cost(trial)
        return m.cost, tuple(reversed(m.tier_bytes)), m.max_uplink_bytes, g

    return min((g for g in pool if pool[g]), key=with_group)
