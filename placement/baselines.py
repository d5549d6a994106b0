"""Host orders a user would get without rankmap; each is launched in node-rank order.

- hostname order: free hosts sorted by name (digit runs by value), first N -- what a
  hostfile written from ``sinfo`` or ``scontrol show hostnames`` gives.
- arrival order: free hosts in a seeded random order -- a Kubernetes or torchrun c10d
  rendezvous assigns node ranks as agents arrive.
- topology greedy: fewest ToR groups first, best-fit -- Slurm's topology/tree plugin and
  Kueue's Topology Aware Scheduling ("BestFit": take domains by free capacity, largest
  first, then the smallest domain that still fits the remainder; kueue.sigs.k8s.io,
  concepts/topology_aware_scheduling); inside each group, hosts in hostname order.
- spread (Arnold): the fewest pods (domains of every tier, top first, best fit), then
  topology greedy inside them, groups taken pod by pod -- Arnold's scheduler minimises the
  number of minipods each DP and PP group spans (arXiv 2509.15940).
"""

from __future__ import annotations

import numpy as np

from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host

__all__ = ["hostname_order", "arrival_order", "topology_greedy", "spread_min", "BASELINES"]


def _sorted(hosts: list[Host]) -> list[Host]:
    return sorted(hosts, key=lambda h: natural_key(h.name))


def hostname_order(cluster: Cluster, usable: list[Host], n: int, seed: int = 0) -> list[str]:
    """The first ``n`` usable hosts by name."""
    return [h.name for h in _sorted(usable)[:n]]


def arrival_order(cluster: Cluster, usable: list[Host], n: int, seed: int = 0) -> list[str]:
    """``n`` usable hosts in a random arrival order (numpy ``default_rng(seed)``)."""
    hosts = _sorted(usable)
    perm = np.random.default_rng(seed).permutation(len(hosts))
    return [hosts[i].name for i in perm[:n]]


def topology_greedy(cluster: Cluster, usable: list[Host], n: int, seed: int = 0) -> list[str]:
    """Fewest ToR groups, best fit, then hostname order inside each group.

    Examples
    --------
    Groups with 19, 10 and 10 free hosts and 20 needed: the two largest cover it, and the
    second is then the smallest group that fits the remaining 1.
    """
    by_group: dict[str, list[Host]] = {}
    for h in usable:
        by_group.setdefault(h.tor_group, []).append(h)
    index = {g.name: g.index for g in cluster.tor_groups}
    groups = sorted(by_group, key=lambda g: (-len(by_group[g]), index[g]))
    chosen: list[str] = []
    remaining = n
    for g in groups:
        if remaining <= 0:
            break
        if len(by_group[g]) >= remaining:
            fits = [x for x in groups if x not in chosen and len(by_group[x]) >= remaining]
            g = min(fits, key=lambda x: (len(by_group[x]), index[x]))
        chosen.append(g)
        remaining -= len(by_group[g])
    order: list[str] = []
    for g in chosen:
        order.extend(h.name for h in _sorted(by_group[g]))
    return order[:n]


def _best_fit(room: dict, need: int) -> list:
    """Domains by free room, largest first, then the smallest that fits the rest (ties by name)."""
    order = sorted(room, key=lambda d: (-room[d], d))
    chosen, left = [], need
    for d in order:
        if left <= 0 or not room[d]:
            break
        if room[d] >= left:
            d = min((x for x in order if x not in chosen and room[x] >= left), key=lambda x: (room[x], x))
        chosen.append(d)
        left -= room[d]
    return chosen


def spread_min(cluster: Cluster, usable: list[Host], n: int, seed: int = 0) -> list[str]:
    """Fewest domains at every tier above the ToR groups (top first, best fit), then
    :func:`topology_greedy` inside them with the chosen groups taken pod by pod."""
    names = [g.name for g in cluster.tor_groups]
    allowed = set(names)
    for level in range(cluster.depth - 1, 0, -1):
        dom = dict(zip(names, cluster.domain_index(level)))
        room: dict = {}
        for h in usable:
            if h.tor_group in allowed:
                room[dom[h.tor_group]] = room.get(dom[h.tor_group], 0) + 1
        keep = set(_best_fit(room, n))
        allowed = {g for g in allowed if dom[g] in keep}
    order = topology_greedy(cluster, [h for h in usable if h.tor_group in allowed], n, seed)
    pod = dict(zip(names, cluster.domain_index(1))) if cluster.depth > 1 else dict.fromkeys(names, 0)
    first = {}
    for i, h in enumerate(order):
        first.setdefault(cluster.host(h).tor_group, i)
    return sorted(order, key=lambda h: (pod[cluster.host(h).tor_group], first[cluster.host(h).tor_group]))


BASELINES = {"hostname order": hostname_order, "arrival order": arrival_order,
             "topology greedy": topology_greedy, "spread (Arnold)": spread_min}
