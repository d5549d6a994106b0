"""Three-tier benchmark instances: time, peak memory and gap per instance.

The instances live in ``instances.py`` (:func:`instances.tiered_instance`); this is the
loop that plans them, run by ``placement.py`` (``--fabric three-tier|both``) or alone:
``python benchmarks/placement_tiers.py [--sizes 1024 12288] [--kinds gpt3 deep cp ep mixed] [--seeds 1 2 3]
[--csv tiers.csv]`` (``--csv``: one row per instance, exact cost and bound in bytes, to compare
two versions draw by draw).

``--seeds`` draws the busy, failed and small hosts again (seed 1: the benchmark's own
instances). Measured 2026-12-02 at 12,288 GPUs, seeds 2-16: 223 of 225 gaps within 5% (seeds
2-8 all: largest EP and CP at 50% busy, seed 3, 4.99% and 4.82%, mostly the bound's where CP x
EP spans may split; deep pipelines at most 4.64%); above it CP 50% busy seeds 12 and 13
(5.21%, 5.42%). Before the pod counts layout, the ring sets and the two-ring
repartition (:mod:`rankmap.placement.pod_counts_layout`, :mod:`rankmap.placement.ring_sets_layout`,
:mod:`rankmap.placement.row_pairs_search`) the same draws printed up to CP 7.9%, deep 5.9%,
mixed 5.5% and EP 5.3%.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import resource
import time
from pathlib import Path

from instances import KINDS, SIZES, tiered_instance  # benchmarks/instances.py, beside this script

from rankmap.fileio.atomic import atomic_write_text
from rankmap.placement.plan import plan


def run_tiered(sizes: list[int], kinds: list[str], time_limit_s: float = 5.0, seeds: tuple = (1,)) -> list[dict]:
    """Plan every three-tier instance (module docstring) of each seed; print and return one row each."""
    out = []
    print(f"{'GPUs':>7} {'kind':>5} {'busy':>5} {'seed':>4} {'time s':>7} {'CPU s':>6} {'peak MB':>8} {'cost TB':>8} "
          f"{'bound TB':>8} {'gap %':>6}  status; baselines cheaper", flush=True)
    for n in sizes:
        for kind in kinds:
            for busy, seed in itertools.product((0.0, 0.25, 0.5), seeds):
                cluster, job = tiered_instance(kind, n, busy, seed)
                t0, c0 = time.perf_counter(), time.process_time()
                result = plan(cluster, job, time_limit_s=time_limit_s)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                cost = result.ours.metrics.cost
                cheaper = [b.name for b in result.baselines if b.metrics.cost < cost * (1 - 1e-12)]
                row = {"gpus": n, "kind": kind, "busy": busy, "seed": seed, "time_s": wall, "cpu_s": cpu,
                       "peak_MiB": peak, "cost_TB": cost / 1e12, "bound_TB": result.lower_bound_bytes / 1e12,
                       "gap_pct": 100 * result.gap, "status": str(result.solver_status), "cheaper": cheaper,
                       "cost_bytes": cost, "bound_bytes": result.lower_bound_bytes}
                out.append(row)
                print(f"{n:>7} {kind:>5} {busy:>5.0%} {seed:>4} {wall:7.2f} {cpu:6.2f} {peak:8.0f} "
                      f"{row['cost_TB']:8.3f} {row['bound_TB']:8.3f} {row['gap_pct']:6.2f}  {row['status']}; "
                      f"{', '.join(cheaper) or 'none'}", flush=True)
    if out:
        print(f"three-tier: max gap {max(r['gap_pct'] for r in out):.2f}%, max plan time "
              f"{max(r['time_s'] for r in out):.2f} s ({max(r['cpu_s'] for r in out):.2f} s CPU)")
    return out


def write_csv(rows: list[dict], path: Path) -> None:
    """``rows`` of :func:`run_tiered` as CSV at ``path``, written atomically (floats as Python
    prints them, which read back to the same value: costs in bytes to the bit)."""
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({**r, "cheaper": ";".join(r["cheaper"])})
    atomic_write_text(path, text.getvalue())
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 12288], choices=sorted(SIZES))
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1], help="draws of the busy hosts (1: the benchmark's)")
    ap.add_argument("--csv", type=Path, help="also write one row per instance here")
    args = ap.parse_args()
    rows = run_tiered(args.sizes, args.kinds, args.time_limit, tuple(args.seeds))
    if args.csv and rows:
        write_csv(rows, args.csv)


if __name__ == "__main__":
    main()
