"""Seeded benchmark clusters and jobs: N GPUs in ToR groups of 64 hosts x 8 GPUs, a fraction busy.

Hostnames follow the ToR groups (node00000 ...), so the fragmentation, not the naming,
is what the planners face. The one place where the benchmark instances are defined:
flat clusters (:func:`make_cluster`), three-tier clusters (:func:`make_tiered_cluster`,
optionally with some hosts of 4 GPUs), and the jobs of each kind (:func:`job_of`).
"""

from __future__ import annotations

import numpy as np

from rankmap.job.spec import MODEL_PRESETS, JobSpec
from rankmap.topology.model import Cluster, Host, Links, Spine, TorGroup

__all__ = ["make_cluster", "make_tiered_cluster", "make_job", "job_of", "tiered_instance", "KINDS", "SIZES"]

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
                        per_group: int = 64, groups_per_pod: int = 4, small_fraction: float = 0.0) -> Cluster:
    """:func:`make_cluster` under a three-tier Clos (MegaScale, NSDI 2024: pods of
    ``groups_per_pod`` ToR groups joined by a core), ``failed_fraction`` of the hosts down,
    ``small_fraction`` of them with 4 GPUs (and 4 NICs) instead of 8 (mixed host sizes)."""
    import dataclasses

    from rankmap.topology.model import Switch

    flat = make_cluster(n_gpus, busy_fraction, seed, per_group)
    rng = np.random.default_rng(seed + 1)
    down = set(rng.choice(len(flat.hosts), size=int(failed_fraction * len(flat.hosts)), replace=False).tolist())
    small = set(np.random.default_rng(seed + 2).choice(len(flat.hosts), size=int(small_fraction * len(flat.hosts)),
                                                       replace=False).tolist())
    hosts = tuple(dataclasses.replace(h, state="failed") if i in down else h for i, h in enumerate(flat.hosts))
    hosts = tuple(dataclasses.replace(h, gpus=4, nics=4) if i in small else h for i, h in enumerate(hosts))
    names = [g.name for g in flat.tor_groups]
    pods = [tuple(names[i:i + groups_per_pod]) for i in range(0, len(names), groups_per_pod)]
    switches = tuple(Switch(name=f"pod{i:02d}", children=p) for i, p in enumerate(pods))
    switches += (Switch(name="core", children=tuple(s.name for s in switches)),)
    return dataclasses.replace(flat, name=f"bench3-{n_gpus}-{busy_fraction}-{failed_fraction}", hosts=hosts,
                               switches=switches)


# Job kinds of the three-tier instances: GPT-3 175B as sized by make_job, a deep pipeline
# (pp 32), context parallel across hosts (cp=2), expert parallel across hosts (ep=2), and
# the GPT-3 job on a cluster where 10% of the hosts have 4 GPUs (tp=8 runs on the 8-GPU hosts).
KINDS = ("gpt3", "deep", "cp", "ep", "mixed")


def job_of(kind: str, n_gpus: int, cluster: Cluster) -> JobSpec:
    """The benchmark job of ``kind`` (:data:`KINDS`) on ``cluster``."""
    import dataclasses

    job = make_job(n_gpus, cluster)
    hosts = job.pp * job.dp
    if kind == "deep":
        pp = 32
        return dataclasses.replace(job, name="deep-pp32", pp=pp, dp=max(1, hosts // pp), num_micro_batches=2 * pp)
    if kind == "cp":  # a CP pair of 8-GPU TP groups spans two hosts: half the DP replicas
        return dataclasses.replace(job, name="cp2", dp=job.dp // 2, cp=2)
    if kind == "ep":  # EP groups are carved out of DP: dp even
        return dataclasses.replace(job, name="ep2", dp=job.dp // 2 * 2, ep=2)
    if kind == "mixed":  # only the 8-GPU hosts hold a TP group of 8
        eight = sum(1 for h in cluster.free_hosts() if h.gpus == 8)
        return dataclasses.replace(job, name="gpt3-mixed-hosts", dp=int(eight * 0.98) // job.pp)
    return job


def tiered_instance(kind: str, n_gpus: int, busy_fraction: float, seed: int = 1) -> tuple[Cluster, JobSpec]:
    """A three-tier instance: cluster (1% of hosts failed; 10% of 4 GPUs for ``mixed``; busy,
    failed and small hosts drawn with ``seed``, 1 for the benchmark's own) and job."""
    cluster = make_tiered_cluster(n_gpus, busy_fraction, 0.01, seed=seed,
                                  small_fraction=0.1 if kind == "mixed" else 0.0)
    return cluster, job_of(kind, n_gpus, cluster)
