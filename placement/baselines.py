"""Host orders a user would get without rankmap; each is launched in node-rank order.

- hostname order: free hosts sorted by name (digit runs by value), first N -- what a
  hostfile written from ``sinfo`` or ``scontrol show hostnames`` gives.
- arrival order: free hosts in a seeded random order -- a Kubernetes or torchrun c10d
  rendezvous assigns node ranks as agents arrive.
- topology greedy: fewest ToR groups first, best-fit -- Slurm's topology/tree plugin and
  Kueue's Topology Aware Scheduling ("BestFit": take domains by free capacity, largest
  first, then the smallest domain that still fits the remainder; kueue.sigs.k8s.io,
  concepts/topology_aware_scheduling); inside each group, hosts in hostname order.
"""

from __future__ import annotations

import numpy as np

from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host

__all__ = ["hostname_order", "arrival_order", "topology_greedy", "BASELINES"]


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


BASELINES = {"hostname order": hostname_order, "arrival order": arrival_order,
             "topology greedy": topology_greedy}
