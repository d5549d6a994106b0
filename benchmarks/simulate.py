"""Benchmark the flow-level simulator.

    python benchmarks/simulate.py [--repeat N] [--seeds N] [--section {1,2,3,4} ...]

1. A ring all-reduce of 1 GB over 16,384 GPUs on a MegaScale-shaped fabric: 32 ToR groups
   x 64 hosts x 8 GPUs, 8 x 200G rail NICs per host, 32 x 400G uplinks per rail ToR, 32
   spine switches, side by side with :func:`reference_completion`, a minimal vectorised
   numpy progressive filling of the same routed flows: ours on the same routed matrix
   (filling and events; target: within 2x of the reference), then ours end to end
   (building the flows, ECMP routing, filling and events) against the same reference
   (target: within 2x). The reference fills the matrix ``run_flows`` builds (int32
   indices, the per-connection cap rows routed with the links); it is printed again on
   the same matrix with int64 indices, as earlier versions built it (scipy's products
   on int64 indices are slower, so that reference is slower too). Everything is measured
   twice: as the process starts, with glibc's initial malloc thresholds, under which
   arrays of a few MiB are mapped and page-faulted in afresh on every call (both sides
   alike), and after one freed 24 MiB array has raised them (see
   :func:`_raise_heap_thresholds`), as in any process that has handled a large array.
2. One iteration of the default job (GPT-3 175B, tp=8 pp=8 dp=144: 9,216 ranks) on the
   default example's 12,288-GPU cluster, placed by the planner and by the worst baseline,
   then the same with every host free (dp=192: all 12,288 GPUs), per ECMP seed
   (target: under 2 s per seed).
3. The same job on megascale-3tier (MegaScale's three-layer Clos, 6 pods, 12,288 GPUs, every
   host free): time per ECMP seed with per-switch salts and with one salt everywhere, and
   under packet spraying (target: under 5 s per seed); bytes on the core (spine uplinks).
4. 100,000 GPUs: :func:`instances.make_cluster` (12,500 hosts of 8 GPUs in 196 ToR groups of
   64) all free, GPT-3 175B at tp=8 pp=16 dp=781 (99,968 ranks), placed by the planner and
   by the worst baseline, per ECMP seed (target: under 10 s per seed).

Prints wall and CPU times (``time.process_time``; section 1 compares CPU times), flows
simulated per second, and after each section the process's peak resident memory so far
(ru_maxrss; run one section alone for its own peak). Planning is not timed. Wall times on
a shared machine vary by 2x or more between runs; CPU times much less.

Measured November 2026 on a 2-core machine shared with other jobs (load average 7-10 on its
2 cores while measuring; CPU times vary by ~20-30% between runs): section 1 end to end
4.4-4.9 ms against the reference's 2.7-3.3 ms, 1.5-1.6x (8.9-9.2 ms, 3.2-3.4x, before the
ring's flows between hosts and NVLink rows came from its host segments instead of a
262,144-row flow table, whose 16.8 MB block raised the malloc thresholds by itself, so
its runs were all in the raised regime), filling alone 1.5-1.6 ms (0.5x); with glibc's
initial thresholds 10.4-11.0 ms against 6.2-7.5 ms, 1.4-1.8x. Sections 2 and 4: 0.05-0.11 s CPU
per seed at 12,288 GPUs, 0.25-0.31 s (plan) and 1.1-1.2 s (worst baseline) at 100,000
GPUs, peak 320-332 MiB (as before, within the noise); section 3: 0.03-0.17 s per seed.

Measured again on November 30, 2026 (same machine, load average 4-5) with the
per-connection cap (each ring hop of all its channels capped at 0.8 of line rate; 8 rows
of 2 coflows here, the ring's from its host segments, not a sort of its flows): section 1
end to end 4.5-4.7 ms against 3.0-3.5 ms, 1.3-1.6x (2.15x before the ring's connections
came from its segments); with glibc's initial thresholds 10.5-11.3 ms against 6.5-7.1 ms,
1.6x; filling alone 1.1 ms; the ring simulates 176.3 ms, busbw 11.3 GB/s (173.8 ms and
11.5 GB/s with the former cap per channel: ECMP collisions, not the cap, bind here).
Sections 2 and 4: 0.05-0.10 s CPU per seed at 12,288 GPUs; 0.31-0.37 s (plan) and
1.22-1.38 s (worst baseline) at 100,000 GPUs, where the phases' flow sets are grouped
into connections by one sort; peak 311 MiB.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
from scipy import sparse

# benchmarks/placement.py is named like the package: keep this folder off the import path.
HERE = Path(__file__).resolve().parent

from instances import make_cluster, make_job  # benchmarks/instances.py, beside this script

from rankmap.examples import example_path
from rankmap.job.rank_map import RankMap
from rankmap.job.spec_file import load_job
from rankmap.placement.plan import plan
from rankmap.simulator.collectives import CollectiveConfig, collective_flows, simulate_collective
from rankmap.simulator.connections import connection_caps, rate_constraints
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.events import complete_coflows
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import job_comm_ops, simulate_iteration
from rankmap.simulator.maxmin import FairShare
from rankmap.simulator.network import Network
from rankmap.topology.model import Cluster, Host, Links, Spine, TorGroup
from rankmap.topology.spec import load_cluster


def reference_rates(matrix: sparse.csr_array, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair ``rates[C]`` of the coflows of ``matrix[L, C]`` by plain progressive filling.

    The textbook loop (Bertsekas and Gallager, *Data Networks*, §6.5.2), vectorised and
    nothing more: every round is two sparse products over the whole matrix.
    """
    by_coflow = matrix.T.tocsr()
    rate = np.full(matrix.shape[1], np.inf)                       # a coflow on no link is instant
    unfrozen = np.diff(by_coflow.indptr) > 0
    free = np.asarray(capacity, dtype=float).copy()
    load = matrix @ unfrozen.astype(float)                        # (L,) weight of unfrozen coflows
    level = 0.0
    while unfrozen.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 1e-9, free / load, np.inf)   # (L,) level at which each link fills
        step = share.min()
        level += step
        free -= step * load
        full = share <= step * (1 + 1e-9)
        newly = unfrozen & (by_coflow @ full.astype(float) > 0)   # (C,) coflows through a full link
        rate[newly] = level
        unfrozen &= ~newly
        load = matrix @ unfrozen.astype(float)
    return rate


def reference_completion(matrix: sparse.csr_array, capacity: np.ndarray, size_bytes: np.ndarray) -> np.ndarray:
    """``finish_s[C]`` of coflows that start together: rates recomputed from scratch after every completion."""
    remaining = np.asarray(size_bytes, dtype=float).copy()
    finish, now = np.zeros(remaining.size), 0.0
    active = remaining > 0
    while active.any():
        idx = np.flatnonzero(active)
        rate = reference_rates(matrix[:, idx], capacity)
        left = remaining[idx] / rate
        step = left.min()
        done = left <= step * (1 + 1e-6)
        now += step
        remaining[idx] -= rate * step
        finish[idx[done]] = now
        active[idx[done]] = False
    return finish


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


def _best_of(repeat: int, fn):
    """(least CPU time of ``repeat`` calls, the last call's value).

    CPU time of this process (``time.process_time``): on a machine shared with other jobs
    it varies far less than wall time, and the work is single-threaded numpy/scipy.
    """
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        value = fn()
        best = min(best, time.process_time() - t0)
    return best, value


def _raise_heap_thresholds() -> None:
    """Allocate and free one 24 MiB array, so glibc keeps freed memory for reuse from now on.

    glibc's malloc starts with a 128 KiB mmap threshold and a 256 KiB trim threshold and
    raises both when a block above the threshold (up to 32 MiB) is freed (mallopt(3),
    M_MMAP_THRESHOLD and M_TRIM_THRESHOLD, "dynamic threshold"). Until then every array of
    a few MiB is mapped afresh and page-faulted in on each call -- the reference filling
    as much as ours; after it, freed blocks are reused, as in any process that has handled
    one large array (a simulated iteration handles many).
    """
    block = np.ones(3 << 20)            # 24 MiB, touched
    del block


def _allreduce_times(repeat: int, network, placement, flows, matrix, capacity) -> dict:
    """CPU ms (best of ``repeat``) of ours end to end, our filling on ``matrix``, and the reference
    on it with int32 and int64 indices; and how far our finish times are from the reference's."""
    end_s, _ = _best_of(repeat, lambda: simulate_collective(network, placement, "allreduce", 1e9))
    fill_s, (ours, _, _) = _best_of(repeat, lambda: complete_coflows(FairShare(matrix, capacity), flows.coflow_bytes))
    ref_s, ref = _best_of(repeat, lambda: reference_completion(matrix, capacity, flows.coflow_bytes))
    wide = sparse.csr_array((matrix.data, matrix.indices.astype(np.int64), matrix.indptr.astype(np.int64)),
                            shape=matrix.shape)
    wide_s, _ = _best_of(repeat, lambda: reference_completion(wide, capacity, flows.coflow_bytes))
    return {"end": end_s * 1e3, "fill": fill_s * 1e3, "ref": ref_s * 1e3, "wide": wide_s * 1e3,
            "differ": float(np.abs(ours - ref).max() / ours.max())}


def bench_allreduce(repeat: int = 10) -> None:
    cluster = megascale_16k()
    network = Network(cluster)
    placement = RankPlacement.on_hosts(network, [h.name for h in cluster.hosts], 8)
    config, routing = CollectiveConfig(), EcmpConfig()
    result = simulate_collective(network, placement, "allreduce", 1e9)
    flows = collective_flows(placement, np.arange(placement.world_size)[None, :], "allreduce", 1e9, config=config,
                             comm="allreduce")
    rows, _ = connection_caps(network, flows, config)
    route = network.route(flows, routing, extra_rows=rows)              # as run_flows routes them
    matrix, capacity = rate_constraints(network, flows, route, config)
    print(f"ring all-reduce, 1 GB, {placement.world_size} GPUs ({result.n_flows} flows in {flows.n_coflows} coflows, "
          f"{matrix.nnz} matrix entries, {matrix.indices.dtype} indices): simulated {result.time_s * 1e3:.1f} ms, "
          f"busbw {result.busbw_gb_s:.1f} GB/s (CPU times, best of {repeat} each)")
    for heap in ("glibc's initial heap thresholds", "heap thresholds raised by one freed 24 MiB array"):
        if heap.startswith("heap"):
            _raise_heap_thresholds()
        t = _allreduce_times(repeat, network, placement, flows, matrix, capacity)
        print(f"  {heap}:")
        print(f"    filling and events on the routed flows: ours {t['fill']:.1f} ms, reference numpy filling "
              f"{t['ref']:.1f} ms: {t['fill'] / t['ref']:.2f}x (target <= 2x); finish times differ by {t['differ']:.1e}")
        print(f"    end to end (building flows, routing, filling, events): {t['end']:.1f} ms, "
              f"{t['end'] / t['ref']:.2f}x the reference's filling (target <= 2x)")
        print(f"    the reference on the same matrix with int64 indices: {t['wide']:.1f} ms "
              f"(end to end is {t['end'] / t['wide']:.2f}x that)")


def _maps(result, cluster):
    """The planner's map and the worst baseline's (most cross-ToR bytes), by name."""
    worst = max(result.baselines, key=lambda c: c.metrics.cross_tor_bytes)
    return [("rankmap plan", result.rankmap),
            (worst.name, RankMap.from_hosts(result.job, cluster, list(worst.hosts), result.rankmap.nproc_per_node))]


def _per_seed(network, result, cluster, seeds: int, label: str) -> None:
    ops = job_comm_ops(result.job)
    for name, rm in _maps(result, cluster):
        placement = RankPlacement.from_rankmap(rm, network)
        times, cpu, it = [], [], None
        for seed in range(seeds):
            t0, c0 = time.perf_counter(), time.process_time()
            it = simulate_iteration(network, placement, rm.layout, ops, routing=EcmpConfig(seed=seed))
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        phases = ", ".join(f"{p.name} {p.time_s:.3f} s ({p.events} events)" for p in it.phases)
        print(f"{label} ({result.job.world_size} GPUs, dp={result.job.dp}), {name}: "
              f"{', '.join(f'{t:.2f}' for t in times)} s per seed (CPU {', '.join(f'{t:.2f}' for t in cpu)} s), "
              f"{it.n_flows} flows, "
              f"{it.n_flows / np.mean(times):,.0f} flows/s; seed {seeds - 1} simulated {it.comm_time_s:.3f} s: "
              f"{phases}")


def bench_iteration(all_free: bool = False, seeds: int = 2) -> None:
    cluster = load_cluster(example_path("megascale-12k", "cluster.yaml"))
    if all_free:   # every host free: dp=auto fills all 12,288 GPUs
        cluster = cluster.with_states({h.name: "free" for h in cluster.hosts})
    result = plan(cluster, load_job(example_path("megascale-12k", "job.yaml")))
    _per_seed(Network(cluster), result, cluster, seeds, "megascale-12k iteration")


def bench_100k(seeds: int = 2) -> None:
    cluster = make_cluster(100_000, 0.0)
    result = plan(cluster, make_job(100_000, cluster, spare=0.0))
    _per_seed(Network(cluster), result, cluster, seeds, "100k iteration")


def bench_three_tier() -> None:
    cluster = load_cluster(example_path("megascale-3tier", "cluster.yaml"))
    cluster = cluster.with_states({h.name: "free" for h in cluster.hosts})
    result = plan(cluster, load_job(example_path("megascale-3tier", "job.yaml")))
    network = Network(cluster)
    ops = job_comm_ops(result.job)
    core = [network.link_range("tier1-up"), network.link_range("tier1-up-all")]   # hashed cables, sprayed bundles
    for name, rm in _maps(result, cluster):
        placement = RankPlacement.from_rankmap(rm, network)
        for label, routing in (("per-switch salts", EcmpConfig(seed=1)),
                               ("one salt", EcmpConfig(seed=1, per_switch_salt=False)),
                               ("spraying", EcmpConfig(mode="spray"))):
            t0, c0 = time.perf_counter(), time.process_time()
            it = simulate_iteration(network, placement, rm.layout, ops, routing=routing)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            core_gb = sum(float(p.link_bytes[r.start:r.stop].sum()) for p in it.phases for r in core) / 1e9
            print(f"3-tier iteration ({result.job.world_size} GPUs, dp={result.job.dp}), {name}, {label}: "
                  f"{dt:.3f} s per seed (CPU {dc:.3f} s), {it.n_flows} flows; simulated {it.comm_time_s:.3f} s, "
                  f"{core_gb:.1f} GB up spine uplinks")


def _peak() -> None:
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory so far (max RSS): {peak_mib:.0f} MiB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=2, help="ECMP seeds per iteration (sections 2 and 4)")
    parser.add_argument("--section", type=int, choices=(1, 2, 3, 4), action="append",
                        help="run only this section (repeatable; default all)")
    args = parser.parse_args()
    sections = set(args.section or (1, 2, 3, 4))
    for _ in range(args.repeat):
        if 1 in sections:
            bench_allreduce()
            _peak()
        if 2 in sections:
            bench_iteration(seeds=args.seeds)
            bench_iteration(all_free=True, seeds=args.seeds)
            _peak()
        if 3 in sections:
            bench_three_tier()
            _peak()
        if 4 in sections:
            bench_100k(seeds=args.seeds)
            _peak()


if __name__ == "__main__":
    main()
