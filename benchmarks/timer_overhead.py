"""Overhead of the engine's timing (phases and every collective / P2P op): the same local run on and off.

    python benchmarks/timer_overhead.py [--steps 12] [--repeat 2]

Plans nothing: writes a 2-host rank map (tp=2, pp=2, dp=2, 8 processes), runs
``rankmap launch --local`` with ``diagnostics.timing`` on and off (alternating, ``--repeat``
times each), and prints the median step time of each (steps after the first two) and the
overhead in percent, over the median run and over the best run of each (on a shared 2-core
machine runs differ by +-10%, more than the timer costs), and the timer's own work per step
(records per step x measured cost of one timed segment: a begin/end pair of a compute
phase, or a collective through the CommHooks path -- open, blocked-in, close -- each
writing its record line, measured as the time CommHooks add to a real 1-process gloo
all-reduce). The target is under 2%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from rankmap.job.rank_map import RankMap, write_plan_files
from rankmap.job.spec import JobSpec, ModelShape


def timer_cost_per_event(n: int = 20000) -> tuple[float, float]:
    """Seconds one record costs: (a compute begin/end pair, one timed collective), each writing its line."""
    from rankmap.engine.config import DiagnosticsConfig
    from rankmap.engine.timing import PhaseTimer

    with tempfile.TemporaryDirectory() as tmp:
        timer = PhaseTimer(Path(tmp), 0, "h", 0, False, DiagnosticsConfig(hang_timeout_s=0))
        t0 = time.perf_counter()
        for _ in range(n):
            timer.begin("forward")
            timer.end("forward")
        phase = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        for i in range(n):
            op = timer.open_comm("all-reduce", "tp", (0, 1), i)
            with timer.comm_wait(op):
                pass
            timer.close_comm(op)
        comm = (time.perf_counter() - t0) / n
        timer.end_step(1)
        timer.close()
    return phase, comm


def hook_cost_per_op(n: int = 5000) -> float:
    """Seconds CommHooks add to one ``dist.all_reduce`` (a 1-process gloo group, a 1-element tensor):
    the wrapper, the group lookup and the record line, measured against the bare call."""
    import socket

    import torch
    import torch.distributed as dist

    from rankmap.engine.comms import CommHooks
    from rankmap.engine.config import DiagnosticsConfig
    from rankmap.engine.timing import PhaseTimer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    x = torch.ones(1)

    def loop() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(x)
        return (time.perf_counter() - t0) / n

    with tempfile.TemporaryDirectory() as tmp:
        bare = min(loop() for _ in range(3))
        timer = PhaseTimer(Path(tmp), 0, "h", 0, False, DiagnosticsConfig(hang_timeout_s=0))
        hooks = CommHooks(timer, {}).install()
        hooked = min(loop() for _ in range(3))
        hooks.uninstall()
        timer.close()
    dist.destroy_process_group()
    return max(0.0, hooked - bare)


def events_per_step(run: Path) -> tuple[float, float]:
    """(compute records, operation records) per step of rank 0 in the newest run under ``run``."""
    (folder,) = sorted((run / "events").iterdir())[-1:]
    recs = [json.loads(line) for line in (folder / "rank-00000.jsonl").read_text().splitlines()]
    steps = max(1, len({r["step"] for r in recs}))
    ops = sum(1 for r in recs if r["group"] is not None)
    return (len(recs) - ops) / steps, ops / steps


def median_step(folder: Path, timing: bool, steps: int) -> float:
    cfg = folder / f"engine-{timing}.yaml"
    cfg.write_text(f"train: {{steps: {steps}}}\ndiagnostics: {{timing: {str(timing).lower()}}}\n")
    run = folder / f"run-{timing}"
    out = subprocess.run([sys.executable, "-m", "rankmap", "launch", "--rankmap", folder / "rankmap.json", "--local",
                          "--config", cfg, "--out", run], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    if out.returncode:
        raise SystemExit(out.stdout + out.stderr)
    log = [json.loads(line) for line in (run / "train-log.jsonl").read_text().splitlines()]
    return statistics.median(r["step_time_s"] for r in log[2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        job = JobSpec(name="tiny", tp=2, pp=2, dp=2, num_micro_batches=4,
                      model=ModelShape(layers=4, hidden=64, heads=4, seq_len=64, vocab=256))
        write_plan_files(RankMap(job=job, cluster_name="bench", cluster_hash="0" * 64, hosts=("node-a", "node-b"),
                                 tor_groups=("t", "t"), rails=((0, 1, 2, 3),) * 2, nproc_per_node=4), folder)
        on, off = [], []
        for _ in range(args.repeat):
            off.append(median_step(folder, False, args.steps))
            on.append(median_step(folder, True, args.steps))
        per_step = events_per_step(folder / "run-True")
    t_on, t_off = statistics.median(on), statistics.median(off)
    b_on, b_off = min(on), min(off)
    print(f"median step time: timing off {t_off * 1e3:.1f} ms, timing on {t_on * 1e3:.1f} ms; "
          f"overhead {100 * (t_on - t_off) / t_off:+.2f}% (median of runs), {100 * (b_on - b_off) / b_off:+.2f}% "
          f"(best run each, the least disturbed by other load) (runs: off {[round(x * 1e3, 1) for x in off]}, "
          f"on {[round(x * 1e3, 1) for x in on]} ms)")
    phase_cost, _ = timer_cost_per_event()
    comm_cost = hook_cost_per_op()
    n_phase, n_ops = per_step
    own = n_phase * phase_cost + n_ops * comm_cost
    print(f"timer's own work: {n_phase:.0f} compute records x {phase_cost * 1e6:.1f} us + {n_ops:.0f} operation "
          f"records x {comm_cost * 1e6:.1f} us = {own * 1e3:.3f} ms per step per rank, {100 * own / b_off:.3f}% of a step")


if __name__ == "__main__":
    main()
