"""Benchmark the CPU training engine and the cost of building its groups from a rank map.

    python benchmarks/engine.py [--steps N] [--quick]

1. Step time and tokens/s of the engine for every (pp, dp, tp) in {1, 2}^3 (1 to 8 processes
   on this machine, gloo, one thread each), through ``rankmap launch --local`` with the
   default tiny model (4 layers, hidden 64, 64-byte sequences, 4 micro-batches of 1 sequence
   per DP rank). The median over steps 2..N is reported (step 1 includes warm-up).
2. Building the groups from a rank map against the default order, 8 processes (pp=dp=tp=2):
   ``init_device_mesh`` as any framework calls it, against the engine's path (claims exchange,
   the same ``init_device_mesh`` on map ranks, then the TP/PP/DP peer checks). Each is timed
   ``--repeat`` times, alternating; medians in milliseconds.

Needs PyTorch (``pip install torch==2.13.0``). Takes about 4 minutes on 2 cores.
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
REPO = HERE.parent

from rankmap.job.rank_map import RankMap, write_plan_files
from rankmap.job.spec import JobSpec, ModelShape

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}


def write_map(folder: Path, pp: int, dp: int, tp: int) -> Path:
    world = pp * dp * tp
    hosts = ("h1", "h2") if world >= 4 else ("h1",)
    per = world // len(hosts)
    job = JobSpec(name="bench", tp=tp, pp=pp, dp=dp, num_micro_batches=4,
                  model=ModelShape(layers=4, hidden=64, heads=4, seq_len=64, vocab=256))
    rm = RankMap(job=job, cluster_name="bench", cluster_hash="0" * 64, hosts=hosts, tor_groups=("t",) * len(hosts),
                 rails=tuple(tuple(range(per)) for _ in hosts), nproc_per_node=per)
    write_plan_files(rm, folder)
    return folder / "rankmap.json"


def bench_layouts(steps: int, quick: bool) -> None:
    print(f"{'pp':>3} {'dp':>3} {'tp':>3} {'procs':>5} {'step ms':>9} {'tokens/s':>9} {'first ms':>9} {'wall s':>7}")
    sizes = [(pp, dp, tp) for pp in (1, 2) for dp in (1, 2) for tp in (1, 2)]
    if quick:
        sizes = [(1, 1, 1), (2, 2, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        for pp, dp, tp in sizes:
            folder = Path(tmp) / f"{pp}{dp}{tp}"
            rankmap = write_map(folder, pp, dp, tp)
            t0 = time.perf_counter()
            run = subprocess.run([sys.executable, "-m", "rankmap", "launch", "--rankmap", str(rankmap),
                                  "--local", "--steps", str(steps), "--out", str(folder / "run"), "--timeout", "300"],
                                 capture_output=True, text=True, env=ENV, cwd=REPO)
            wall = time.perf_counter() - t0
            if run.returncode != 0:
                print(f"pp={pp} dp={dp} tp={tp}: failed: {run.stderr.strip().splitlines()[-1:]}")
                continue
            log = [json.loads(x) for x in (folder / "run" / "train-log.jsonl").read_text().splitlines()]
            step = statistics.median(r["step_time_s"] for r in log[1:])
            print(f"{pp:>3} {dp:>3} {tp:>3} {pp * dp * tp:>5} {step * 1e3:>9.1f} {log[0]['tokens'] / step:>9.0f} "
                  f"{log[0]['step_time_s'] * 1e3:>9.1f} {wall:>7.1f}", flush=True)


def worker(rankmap: str, repeat: int, out: str) -> None:
    """One process of the group-building benchmark (started by torchrun)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from rankmap.engine.mesh import build_mesh, exchange_claims, mesh_dims, verify_peers
    from rankmap.job.rank_map import read_rankmap
    from rankmap.launch.ranks import LaunchEnv

    rm = read_rankmap(rankmap)
    launch = LaunchEnv.from_environ()
    dist.init_process_group("gloo")
    names, shape = mesh_dims(rm)
    default, mapped, mesh_only = [], [], []
    for _ in range(repeat):
        dist.barrier()
        t0 = time.perf_counter()
        init_device_mesh("cpu", shape, mesh_dim_names=names)
        dist.barrier()
        t1 = time.perf_counter()
        build_mesh(rm, "cpu")
        dist.barrier()
        t2 = time.perf_counter()
        exchange_claims(rm, launch)
        mesh = build_mesh(rm, "cpu")
        entry = rm.entry(dist.get_rank())
        verify_peers(rm, mesh, entry["host"], entry["local_rank"])
        dist.barrier()
        t3 = time.perf_counter()
        default.append(t1 - t0)
        mesh_only.append(t2 - t1)
        mapped.append(t3 - t2)
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps({"default": default, "map_mesh": mesh_only, "map_checked": mapped}))
    dist.destroy_process_group()


def bench_groups(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rankmap = write_map(Path(tmp) / "map", 2, 2, 2)
        out = Path(tmp) / "groups.json"
        from rankmap.launch.local import free_port
        procs = []
        for node, host in enumerate(("h1", "h2")):
            argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=4",
                    f"--node-rank={node}", "--rdzv-backend=static", "--master-addr=127.0.0.1", "--master-port=PORT",
                    "--max-restarts=0", str(Path(__file__).resolve()), "--worker", str(rankmap), "--repeat",
                    str(repeat), "--out", str(out)]
            procs.append((argv, {**ENV, "RANKMAP_HOST": host}))
        port = str(free_port())
        running = [subprocess.Popen([a.replace("PORT", port) for a in argv], env=env, cwd=REPO,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                   for argv, env in procs]
        for p in running:
            _, err = p.communicate(timeout=300)
            if p.returncode != 0:
                print(f"group benchmark failed: {err.strip().splitlines()[-1:]}")
                return
        res = json.loads(out.read_text())
    med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
    print(f"\ngroups of 8 processes (pp=dp=tp=2), median of {repeat}:")
    print(f"  init_device_mesh, default order:            {med['default']:8.1f} ms")
    print(f"  the engine's mesh from the rank map:        {med['map_mesh']:8.1f} ms  "
          f"(overhead {med['map_mesh'] - med['default']:+.1f} ms)")
    print(f"  ... with claims exchange and peer checks:   {med['map_checked']:8.1f} ms  "
          f"(one-time start-up checks: {med['map_checked'] - med['map_mesh']:+.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="steps per layout (default 8)")
    parser.add_argument("--repeat", type=int, default=10, help="group-building repetitions (default 10)")
    parser.add_argument("--quick", action="store_true", help="only pp=dp=tp=1 and pp=dp=tp=2")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.repeat, args.out)
        return
    bench_layouts(args.steps, args.quick)
    bench_groups(args.repeat)


if __name__ == "__main__":
    main()
