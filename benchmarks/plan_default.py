"""Benchmark: plan the embedded default example (GPT-3 175B on the MegaScale-shaped cluster).

    python benchmarks/plan_default.py [--repeat N]

Prints load, plan and write times, the solver's share, the gap to the lower bound, and the
process's peak resident memory (ru_maxrss: Python, NumPy and OR-Tools included).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

from rankmap.examples import example_path
from rankmap.job.rank_map import write_plan_files

# benchmarks/placement.py is named like the package it measures: keep this folder off the path.
from rankmap.job.spec import load_job
from rankmap.placement.plan import plan
from rankmap.topology.spec import load_cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--example", default="megascale-12k")
    args = parser.parse_args()
    for i in range(args.repeat):
        t0 = time.perf_counter()
        cluster = load_cluster(example_path(args.example, "cluster.yaml"))
        job = load_job(example_path(args.example, "job.yaml"))
        t1 = time.perf_counter()
        result = plan(cluster, job)
        t2 = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:
            write_plan_files(result.rankmap, out)
        t3 = time.perf_counter()
        print(f"run {i + 1}: load {t1 - t0:.2f} s, plan {t2 - t1:.2f} s (solver + bound {result.ours.solve_time_s:.2f} s), "
              f"write {t3 - t2:.2f} s, total {t3 - t0:.2f} s; {result.rankmap.world_size} ranks, "
              f"gap {100 * result.gap:.4f}%, status {result.solver_status}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
