"""Three-tier benchmark instances: time, peak memory and gap per instance.

Clusters of :func:`instances.make_tiered_cluster` (pods of 4 ToR groups under a core,
MegaScale NSDI 2024's three-layer Clos), fresh and 25%/50% busy, 1% of hosts failed;
jobs of :func:`instances.make_job` (``gpt3``) and, with ``--kinds``, a deep pipeline
(``deep``: pp 32), context parallel (``cp``: cp=2 across hosts) and expert parallel
(``ep``: ep=2 across hosts) of the same size.
``python benchmarks/placement_tiers.py [--sizes 1024 12288] [--kinds gpt3 deep cp ep]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time

from instances import SIZES, make_job, make_tiered_cluster  # benchmarks/instances.py, beside this script

from rankmap.placement.plan import plan


def job_of(kind: str, n: int, cluster):
    """The benchmark job of ``kind`` on ``cluster`` (see the module docstring)."""
    job = make_job(n, cluster)
    hosts = job.pp * job.dp
    if kind == "deep":
        pp = 32
        return dataclasses.replace(job, name="deep-pp32", pp=pp, dp=max(1, hosts // pp), num_micro_batches=2 * pp)
    if kind == "cp":  # a CP pair of 8-GPU TP groups spans two hosts: half the DP replicas
        return dataclasses.replace(job, name="cp2", dp=job.dp // 2, cp=2)
    if kind == "ep":  # EP groups are carved out of DP: dp even
        return dataclasses.replace(job, name="ep2", dp=job.dp // 2 * 2, ep=2)
    return job


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 12288], choices=sorted(SIZES))
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--kinds", nargs="+", default=["gpt3"], choices=["gpt3", "deep", "cp", "ep"])
    args = ap.parse_args()
    for n in args.sizes:
        for busy, kind in ((b, k) for k in args.kinds for b in (0.0, 0.25, 0.5)):
            cluster = make_tiered_cluster(n, busy, 0.01)
            t0, c0 = time.perf_counter(), time.process_time()
            result = plan(cluster, job_of(kind, n, cluster), time_limit_s=args.time_limit)
            peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{n:>7} GPUs {kind:>4} busy {busy:.0%} failed 1%: {time.perf_counter() - t0:6.1f} s "
                  f"({time.process_time() - c0:.1f} s CPU), peak {peak_mb:.0f} MB, "
                  f"gap {100 * result.gap:.2f}%, {result.solver_status}, "
                  f"cost {result.ours.metrics.cost / 1e12:.3f} TB", flush=True)


if __name__ == "__main__":
    main()
