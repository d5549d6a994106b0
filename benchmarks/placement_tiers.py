"""Three-tier benchmark instances: time, peak memory and gap per instance.

Clusters of :func:`instances.make_tiered_cluster` (pods of 4 ToR groups under a core,
MegaScale NSDI 2024's three-layer Clos), fresh and 25%/50% busy, 1% of hosts failed;
the job of :func:`instances.make_job`. ``python benchmarks/placement_tiers.py [--sizes 1024 12288]``.
"""

from __future__ import annotations

import argparse
import resource
import time

from instances import SIZES, make_job, make_tiered_cluster  # benchmarks/instances.py, beside this script

from rankmap.placement.plan import plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 12288], choices=sorted(SIZES))
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args()
    for n in args.sizes:
        for busy in (0.0, 0.25, 0.5):
            cluster = make_tiered_cluster(n, busy, 0.01)
            t0 = time.perf_counter()
            result = plan(cluster, make_job(n, cluster), time_limit_s=args.time_limit)
            peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{n:>7} GPUs busy {busy:.0%} failed 1%: {time.perf_counter() - t0:6.1f} s, peak {peak_mb:.0f} MB, "
                  f"gap {100 * result.gap:.2f}%, {result.solver_status}, "
                  f"cost {result.ours.metrics.cost / 1e12:.3f} TB", flush=True)


if __name__ == "__main__":
    main()
