"""Regenerate the example clusters (seeded, so the files are byte-identical every run).

    python examples/generate.py

megascale-12k: MegaScale's published shape (NSDI 2024): 24 ToR groups x 64 hosts x 8 GPUs
= 12,288 GPUs, 8 x 200G rail NICs per host, 400G ToR ports split into two 200G
downlinks, so each rail ToR has 32 uplinks of 400G (2x a downlink); hostnames come from
addresses, as in clouds, so they do not follow ToR groups; a quarter of the hosts are
busy with other jobs, scattered.

racks: 4 racks of 16 hosts whose names follow the racks (gpu-r1-n01 ...), so hostname
order is already topology order.

megascale-3tier: the same hosts, ToR groups and busy hosts as megascale-12k, with the
three-layer Clos of MegaScale (NSDI 2024, §3.3) spelled out as tiers: spine pods as large
as a 64-port switch allows, and a core above them (see MEGASCALE_3TIER_NOTE).

oversubscribed-core: the same hosts with a 3:1 oversubscribed core (OVERSUBSCRIBED_NOTE),
the case where knowing the tiers matters most.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from rankmap.fileio import atomic_write_files
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host, Links, Spine, Switch, Tier, TorGroup
from rankmap.topology.spec import cluster_to_yaml

HERE = Path(__file__).resolve().parent


def megascale(seed: int = 2024) -> Cluster:
    rng = np.random.default_rng(seed)
    n_groups, per_group = 24, 64
    n = n_groups * per_group
    names = [f"ip-10-{20 + i // 256}-{(i // 16) % 16}-{i % 16 + 4}" for i in range(n)]
    names = [names[i] for i in rng.permutation(n)]
    busy = set(rng.choice(n, size=n // 4, replace=False).tolist())
    groups, hosts = [], []
    for g in range(n_groups):
        members = sorted(names[g * per_group:(g + 1) * per_group], key=natural_key)
        groups.append(TorGroup(name=f"tg{g:02d}", index=g, hosts=tuple(members), capacity=per_group))
    state = {names[i]: "busy" for i in busy}
    for group in groups:
        hosts += [Host(name=h, gpus=8, nics=8, tor_group=group.name, state=state.get(h, "free")) for h in group.hosts]
    links = Links(nic_gbps=200, tor_downlink_gbps=200, tor_uplinks=32, tor_uplink_gbps=400, nvlink_gbps=2400)
    return Cluster(name="megascale-12k", tor_groups=tuple(groups), hosts=tuple(hosts), links=links,
                   spine=Spine(switches=32))


def racks() -> Cluster:
    groups, hosts = [], []
    busy = {"gpu-r1-n03", "gpu-r2-n11", "gpu-r3-n07", "gpu-r4-n16"}
    for r in range(1, 5):
        members = tuple(f"gpu-r{r}-n{i:02d}" for i in range(1, 17))
        groups.append(TorGroup(name=f"rack{r}", index=r - 1, hosts=members, capacity=32))
        hosts += [Host(name=h, gpus=8, nics=8, tor_group=f"rack{r}", state="busy" if h in busy else "free")
                  for h in members]
    links = Links(nic_gbps=400, tor_downlink_gbps=400, tor_uplinks=16, tor_uplink_gbps=400, nvlink_gbps=3600)
    return Cluster(name="racks-512", tor_groups=tuple(groups), hosts=tuple(hosts), links=links, spine=Spine(switches=16))


MEGASCALE_3TIER_NOTE = """\
# MegaScale's three-layer Clos (Jiang et al., NSDI 2024, §3.3): Broadcom Tomahawk 4 switches,
# 64 x 400G ports, 1:1 down:up at every layer (32 ports down, 32 up); ToR downlinks split
# 400G -> 2 x 200G, so a rail ToR serves 64 hosts' NICs of its rail with 32 x 400G uplinks.
# Derivation (shared planes: the rails of a ToR group share the spines, as in MegaScale):
#   ToR group  = 8 rail ToRs x 64 hosts = 512 GPUs; 24 groups = 1,536 hosts = 12,288 GPUs.
#   spine tier = each rail ToR sends one uplink to each of 32 spines of its pod, and a spine
#                has 32 down ports, so a pod holds 32 rail ToRs = 4 ToR groups = 256 hosts
#                = 2,048 GPUs: 6 pods (pod1..pod6, 4 groups each), 32 spines per pod.
#   core tier  = 6 pods x 32 spines x 32 uplinks = 6,144 x 400G links; the core is the top,
#                so all 64 ports of a core switch face down: 6,144 / 64 = 96 core switches.
# With rail planes (each rail its own spines, as in NVIDIA's rail-optimised reference
# designs) a pod's spines would serve 32 rail ToRs of one rail, i.e. 32 ToR groups: all 24
# groups would share one pod per rail plane, and only cross-rail traffic would need a core.
"""

OVERSUBSCRIBED_NOTE = """\
# The megascale-12k hosts under a three-tier Clos whose core is oversubscribed 3:1, a common
# way to save core switches (Arnold, arXiv 2509.15940: bandwidth shrinks at higher tiers).
# Derivation, 64-port 400G switches: rail ToRs 1:1 as in MegaScale (64 x 200G down,
# 32 x 400G up); spines split 48 ports down / 16 up = 3:1; each rail ToR reaches the 32
# spines of its pod and a spine takes 48 rail ToRs, so a pod holds 6 ToR groups = 384 hosts
# = 3,072 GPUs: 4 pods (pod1..pod4). Core: 4 pods x 32 spines x 16 uplinks = 2,048 links
# / 64 down ports = 32 core switches. Traffic that leaves a pod gets a third of the
# bandwidth it has inside the pod.
"""

MEGASCALE_JOB = """\
# GPT-3 175B on the free hosts of megascale-12k (shape: Brown et al. 2020, Table 2.1).
name: gpt3-175b
parallel: {tp: 8, pp: 8, dp: auto, order: tp-cp-ep-dp-pp}
model: {preset: gpt3-175b}
batch: {micro_batch_size: 1, num_micro_batches: 12}
precision: {activation_bytes: 2, param_bytes: 2, grad_bytes: 4}
data_parallel: zero
"""

RACKS_JOB = """\
# GPT-3 13B with tp=8, pp=4 on the free hosts of the racks cluster.
name: gpt3-13b
parallel: {tp: 8, pp: 4, dp: auto}
model: {preset: gpt3-13b}
batch: {micro_batch_size: 1, num_micro_batches: 8}
"""


def three_tier(name: str, groups_per_pod: int, spine_down: int, spine_up: int) -> Cluster:
    """The megascale-12k hosts under spine pods of ``groups_per_pod`` ToR groups and one core.

    Spines: 32 per pod (one per rail ToR uplink), ``spine_down`` / ``spine_up`` ports of
    400G; core: all 64 ports down, as many switches as the spines' uplinks need.
    """
    base = megascale()
    names = [g.name for g in base.tor_groups]
    pods = [names[i:i + groups_per_pod] for i in range(0, len(names), groups_per_pod)]
    switches = tuple(Switch(name=f"pod{p + 1}", children=tuple(kids)) for p, kids in enumerate(pods))
    switches += (Switch(name="core", children=tuple(s.name for s in switches)),)
    core = len(pods) * 32 * spine_up // 64
    tiers = (Tier(name="spine", switches=32, down_ports=spine_down, up_ports=spine_up, down_gbps=400, up_gbps=400),
             Tier(name="core", switches=core, down_ports=64, up_ports=0, down_gbps=400, up_gbps=400))
    return dataclasses.replace(base, name=name, switches=switches, tiers=tiers)


def _job(example: str) -> str:
    return MEGASCALE_JOB.replace("megascale-12k", example)


def main() -> None:
    head = "# Generated by examples/generate.py; see its docstring.\n"
    examples = (("megascale-12k", megascale(), MEGASCALE_JOB, ""), ("racks", racks(), RACKS_JOB, ""),
                ("megascale-3tier", three_tier("megascale-3tier", 4, 32, 32), _job("megascale-3tier"),
                 MEGASCALE_3TIER_NOTE),
                ("oversubscribed-core", three_tier("oversubscribed-core", 6, 48, 16), _job("oversubscribed-core"),
                 OVERSUBSCRIBED_NOTE))
    for folder, cluster, job, note in examples:
        atomic_write_files(HERE / folder, {"cluster.yaml": head + note + cluster_to_yaml(cluster), "job.yaml": job})


if __name__ == "__main__":
    main()
