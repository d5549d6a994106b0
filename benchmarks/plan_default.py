"""Benchmark: what a bare ``rankmap plan`` plans (the embedded default example, the CLI's defaults).

    python benchmarks/plan_default.py [--repeat N] [--example NAME] [--no-picture]

The example, solver budget, seed, workers and objectives come from the ``rankmap plan`` parser
itself, so this measures the command's default run (default example:
:data:`rankmap.examples.DEFAULT_EXAMPLE`). Prints load, plan, picture and write times, the
solver's share, the gap to the lower bound, and the process's peak resident memory (ru_maxrss:
Python, NumPy, OR-Tools and matplotlib included).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

# benchmarks/placement.py is named like the package it measures: keep this folder off the path.
from rankmap import api
from rankmap.cli import build_parser
from rankmap.cli.common import objectives
from rankmap.examples import example_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--example", help="an embedded example (default: the one `rankmap plan` plans)")
    parser.add_argument("--no-picture", action="store_true", help="skip plan.png, as `rankmap plan --no-picture`")
    args = parser.parse_args()
    cli = build_parser().parse_args(["plan"] + (["--example", args.example] if args.example else []))
    cluster_path, job_path = example_inputs(cli.example, cli.cluster, cli.job)
    print(f"rankmap plan defaults: {cluster_path.parent.name}, time limit {cli.time_limit:g} s, seed {cli.seed}, "
          f"workers {cli.workers}, objectives {cli.objective}")
    for i in range(args.repeat):
        t0 = time.perf_counter()
        cluster = api.load_cluster(cluster_path)
        job = api.load_job(job_path)
        t1 = time.perf_counter()
        result = api.plan(cluster, job, time_limit_s=cli.time_limit, seed=cli.seed, workers=cli.workers,
                          objectives=objectives(cli.objective))
        t2 = time.perf_counter()
        extra = {} if args.no_picture else {"plan.png": api.plan_picture(cluster, result)}
        t3 = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:
            api.write_plan_files(result.rankmap, out, extra)
        t4 = time.perf_counter()
        print(f"run {i + 1}: load {t1 - t0:.2f} s, plan {t2 - t1:.2f} s "
              f"(solver + bound {result.ours.solve_time_s:.2f} s), "
              f"picture {t3 - t2:.2f} s, write {t4 - t3:.2f} s, total {t4 - t0:.2f} s; "
              f"{result.rankmap.world_size} ranks, gap {100 * result.gap:.4f}%, status {result.solver_status}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
