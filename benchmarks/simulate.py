"""Benchmark the flow-level simulator.

    python benchmarks/simulate.py [--repeat N] [--section {1,2,3} ...]

1. A ring all-reduce of 1 GB over 16,384 GPUs on a MegaScale-shaped fabric: 32 ToR groups
   x 64 hosts x 8 GPUs, 8 x 200G rail NICs per host, 32 x 400G uplinks per rail ToR, 32
   spine switches (target: under 0.5 s).
2. One iteration of the default job (GPT-3 175B, tp=8 pp=8 dp=144: 9,216 ranks) on the
   default example's 12,288-GPU cluster, placed by the planner and by the worst baseline,
   then the same with every host free (dp=192: all 12,288 GPUs) (target: under 10 s).
3. The same job on megascale-3tier (MegaScale's three-layer Clos, 6 pods, 12,288 GPUs, every
   host free): time per ECMP seed with per-switch salts and with one salt everywhere, and
   under packet spraying (target: under 5 s per seed); bytes on the core (spine uplinks).

Prints wall times, flows simulated per second, and the process's peak resident memory
(ru_maxrss; target under 4 GB). Planning is not timed.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

# benchmarks/placement.py is named like the package: keep this folder off the import path.
HERE = Path(__file__).resolve().parent

from rankmap.examples import example_path
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import load_job
from rankmap.placement.plan import plan
from rankmap.simulator.collectives import simulate_collective
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import job_comm_ops, simulate_iteration
from rankmap.simulator.network import Network
from rankmap.topology.model import Cluster, Host, Links, Spine, TorGroup
from rankmap.topology.spec import load_cluster


def megascale_16k() -> Cluster:
    """32 ToR groups of 64 hosts with 8 GPUs and 8 rails: MegaScale's fabric at 16,384 GPUs."""
    groups, hosts = [], []
    for g in range(32):
        names = tuple(f"g{g:02d}n{h:02d}" for h in range(64))
        groups.append(TorGroup(name=f"g{g:02d}", index=g, hosts=names, capacity=64))
        hosts += [Host(name=n, gpus=8, nics=8, tor_group=f"g{g:02d}") for n in names]
    links = Links(nic_gbps=200, tor_downlink_gbps=200, tor_uplinks=32, tor_uplink_gbps=400, nvlink_gbps=2400)
    return Cluster(name="megascale-16k", tor_groups=tuple(groups), hosts=tuple(hosts), links=links,
                   spine=Spine(switches=32))


def bench_allreduce() -> None:
    cluster = megascale_16k()
    t0 = time.perf_counter()
    network = Network(cluster)
    placement = RankPlacement.on_hosts(network, [h.name for h in cluster.hosts], 8)
    t1 = time.perf_counter()
    result = simulate_collective(network, placement, "allreduce", 1e9)
    t2 = time.perf_counter()
    print(f"ring all-reduce, 1 GB, {placement.world_size} GPUs: {t2 - t1:.3f} s "
          f"(+ {t1 - t0:.3f} s building the network), {result.n_flows} flows, "
          f"{result.n_flows / (t2 - t1):,.0f} flows/s; simulated {result.time_s * 1e3:.1f} ms, "
          f"busbw {result.busbw_gb_s:.1f} GB/s")


def bench_iteration(all_free: bool = False) -> None:
    cluster = load_cluster(example_path("megascale-12k", "cluster.yaml"))
    if all_free:   # every host free: dp=auto fills all 12,288 GPUs
        cluster = cluster.with_states({h.name: "free" for h in cluster.hosts})
    result = plan(cluster, load_job(example_path("megascale-12k", "job.yaml")))
    network = Network(cluster)
    ops = job_comm_ops(result.job)
    worst = max(result.baselines, key=lambda c: c.metrics.cross_tor_bytes)
    maps = [("rankmap plan", result.rankmap),
            (worst.name, RankMap.from_hosts(result.job, cluster, list(worst.hosts), result.rankmap.nproc_per_node))]
    for name, rm in maps:
        t0 = time.perf_counter()
        placement = RankPlacement.from_rankmap(rm, network)
        it = simulate_iteration(network, placement, rm.layout, ops)
        dt = time.perf_counter() - t0
        phases = ", ".join(f"{p.name} {p.time_s:.3f} s ({p.events} events)" for p in it.phases)
        print(f"iteration of {result.job.name} ({result.job.world_size} GPUs, dp={result.job.dp}), {name}: {dt:.3f} s, "
              f"{it.n_flows} flows, {it.n_flows / dt:,.0f} flows/s; simulated {it.comm_time_s:.3f} s: {phases}")


def bench_three_tier() -> None:
    cluster = load_cluster(example_path("megascale-3tier", "cluster.yaml"))
    cluster = cluster.with_states({h.name: "free" for h in cluster.hosts})
    result = plan(cluster, load_job(example_path("megascale-3tier", "job.yaml")))
    network = Network(cluster)
    ops = job_comm_ops(result.job)
    worst = max(result.baselines, key=lambda c: c.metrics.cross_tor_bytes)
    maps = [("rankmap plan", result.rankmap),
            (worst.name, RankMap.from_hosts(result.job, cluster, list(worst.hosts), result.rankmap.nproc_per_node))]
    core = [network.link_range("tier1-up"), network.link_range("tier1-up-all")]   # hashed cables, sprayed bundles
    for name, rm in maps:
        placement = RankPlacement.from_rankmap(rm, network)
        for label, routing in (("per-switch salts", EcmpConfig(seed=1)),
                               ("one salt", EcmpConfig(seed=1, per_switch_salt=False)),
                               ("spraying", EcmpConfig(mode="spray"))):
            t0 = time.perf_counter()
            it = simulate_iteration(network, placement, rm.layout, ops, routing=routing)
            dt = time.perf_counter() - t0
            core_gb = sum(float(p.link_bytes[r.start:r.stop].sum()) for p in it.phases for r in core) / 1e9
            print(f"3-tier iteration ({result.job.world_size} GPUs, dp={result.job.dp}), {name}, {label}: "
                  f"{dt:.3f} s per seed, {it.n_flows} flows; simulated {it.comm_time_s:.3f} s, "
                  f"{core_gb:.1f} GB up spine uplinks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--section", type=int, choices=(1, 2, 3), action="append",
                        help="run only this section (repeatable; default all)")
    args = parser.parse_args()
    sections = set(args.section or (1, 2, 3))
    for _ in range(args.repeat):
        if 1 in sections:
            bench_allreduce()
        if 2 in sections:
            bench_iteration()
            bench_iteration(all_free=True)
        if 3 in sections:
            bench_three_tier()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
