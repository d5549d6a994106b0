"""Seeded benchmark clusters: N GPUs in ToR groups of 64 hosts x 8 GPUs, a fraction busy.

Hostnames follow the ToR groups (node00000 ...), so the fragmentation, not the naming,
is what the planners face.
"""

from __future__ import annotations

import numpy as np

from rankmap.job.spec import MODEL_PRESETS, JobSpec
from rankmap.topology.model import Cluster, Host, Links, Spine, TorGroup

__all__ = ["make_cluster", "make_tiered_cluster", "make_job", "SIZES"]

# GPUs -> pipeline stages of the benchmark job (GPT-3 175B shape, tp=8, dp filling the hosts)
SIZES = {1024: 4, 12288: 8, 100000: 16}


def make_cluster(n_gpus: int, busy_fraction: float, seed: int = 1, per_group: int = 64) -> Cluster:
    """``n_gpus / 8`` hosts in ToR groups of ``per_group``; ``busy_fraction`` of them busy, scattered."""
    rng = np.random.default_rng(seed)
    n_hosts = n_gpus // 8
    busy = set(rng.choice(n_hosts, size=int(busy_fraction * n_hosts), replace=False).tolist())
    groups, hosts = [], []
    for start in range(0, n_hosts, per_group):
        index = start // per_group
        names = tuple(f"node{i:05d}" for i in range(start, min(start + per_group, n_hosts)))
        groups.append(TorGroup(name=f"tg{index:03d}", index=index, hosts=names, capacity=per_group))
        hosts += [Host(name=h, gpus=8, nics=8, tor_group=groups[-1].name,
                       state="busy" if start + i in busy else "free") for i, h in enumerate(names)]
    return Cluster(name=f"bench-{n_gpus}-{busy_fraction}", tor_groups=tuple(groups), hosts=tuple(hosts),
                   links=Links(), spine=Spine())


def make_job(n_gpus: int, cluster: Cluster, spare: float = 0.02) -> JobSpec:
    """GPT-3 175B shape, tp=8, pp by size, dp filling all but ``spare`` of the free hosts
    (kept for re-planning after failures), 2*pp micro-batches."""
    pp = SIZES[n_gpus]
    dp = int(len(cluster.free_hosts()) * (1 - spare)) // pp
    return JobSpec(name=f"gpt3-175b-pp{pp}", tp=8, pp=pp, dp=dp, model=MODEL_PRESETS["gpt3-175b"],
                   num_micro_batches=2 * pp, source="benchmark")


def make_tiered_cluster(n_gpus: int, busy_fraction: float, failed_fraction: float = 0.0, seed: int = 1,
                        per_group: int = 64, groups_per_pod: int = 4) -> Cluster:
    """:func:`make_cluster` under a three-tier Clos (MegaScale, NSDI 2024: pods of
    ``groups_per_pod`` ToR groups joined by a core), ``failed_fraction`` of the hosts down."""
    import dataclasses

    from rankmap.topology.model import Switch

    flat = make_cluster(n_gpus, busy_fraction, seed, per_group)
    rng = np.random.default_rng(seed + 1)
    down = set(rng.choice(len(flat.hosts), size=int(failed_fraction * len(flat.hosts)), replace=False).tolist())
    hosts = tuple(dataclasses.replace(h, state="failed") if i in down else h for i, h in enumerate(flat.hosts))
    names = [g.name for g in flat.tor_groups]
    pods = [tuple(names[i:i + groups_per_pod]) for i in range(0, len(names), groups_per_pod)]
    switches = tuple(Switch(name=f"pod{i:02d}", children=p) for i, p in enumerate(pods))
    switches += (Switch(name="core", children=tuple(s.name for s in switches)),)
    return dataclasses.replace(flat, name=f"bench3-{n_gpus}-{busy_fraction}-{failed_fraction}", hosts=hosts,
                               switches=switches)
