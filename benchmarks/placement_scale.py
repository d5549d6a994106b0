"""Planning very large clusters: CPU seconds and peak memory of ``rankmap plan`` per size.

    python benchmarks/placement_scale.py [--hosts 12500,50000,100000]

Clusters shaped like a large three-tier Clos (MegaScale, NSDI 2024): ToR groups of 64
hosts of 8 GPUs, pods of 16 ToR groups under one core, the last group partial (100,000
hosts = 800,000 GPUs in 1,563 groups under 98 pods). The topology is written as a Slurm
topology.conf, imported with ``rankmap topo import --from slurm``, and planned with
``rankmap plan`` for GPT-3 175B (tp=8, pp=8, dp=auto: every free GPU); the map is read back
with ``rankmap verify --cluster`` (what ``launch`` and ``replan`` read; the input size limit
raised to fit its 130 MB at 100,000 hosts). The import, the plan and the verify each run in
a fresh process (``RANKMAP_MAX_HOSTS`` raised to fit); for each, prints
its CPU seconds (user + system of the child, which other processes sharing the cores do
not inflate much), wall seconds (inflated on a loaded machine) and peak resident memory
(``ru_maxrss``); then the sha256 of rankmap.json (the same on every run: the plan never
depends on the machine's speed). Targets: import < 3 s; plan of 100,000 hosts < 15 s CPU
and < 500 MB; verify of 100,000 hosts well under 500 MB (the writer's rank lines are read
straight into columns, :mod:`rankmap.job.rank_map_text`, not into 800,000 dicts).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOSTS_PER_GROUP, GROUPS_PER_POD = 64, 16

JOB = """name: gpt3-175b
parallel: {tp: 8, pp: 8, dp: auto, order: tp-cp-ep-dp-pp}
model: {preset: gpt3-175b}
batch: {micro_batch_size: 1, num_micro_batches: 12}
precision: {activation_bytes: 2, param_bytes: 2, grad_bytes: 4}
data_parallel: zero
"""


def topology_conf(n_hosts: int) -> str:
    """Slurm topology.conf text: leaves of 64 hosts (the last partial), pods of 16 leaves, one core."""
    lines, leaves = [], []
    for i, first in enumerate(range(1, n_hosts + 1, HOSTS_PER_GROUP), start=1):
        last = min(n_hosts, first + HOSTS_PER_GROUP - 1)
        leaves.append(f"leaf{i:05d}")
        lines.append(f"SwitchName={leaves[-1]} Nodes=n[{first:06d}-{last:06d}]")
    pods = []
    for p, start in enumerate(range(0, len(leaves), GROUPS_PER_POD), start=1):
        pods.append(f"pod{p:04d}")
        lines.append(f"SwitchName={pods[-1]} Switches={','.join(leaves[start:start + GROUPS_PER_POD])}")
    lines.append(f"SwitchName=core Switches=pod[0001-{len(pods):04d}]")
    return "\n".join(lines) + "\n"


_PROBE = ("import resource, runpy, sys\n"
          "sys.argv = ['rankmap'] + sys.argv[1:]\n"
          "try:\n    runpy.run_module('rankmap', run_name='__main__')\n"
          "finally:\n    u = resource.getrusage(resource.RUSAGE_SELF)\n"
          "    print(f'@@ {u.ru_utime + u.ru_stime:.2f} {u.ru_maxrss / 1024:.0f}', file=sys.stderr)\n")


def measured(args: list[str], env: dict) -> tuple[float, float, float]:
    """(CPU s, wall s, peak MB) of one ``rankmap`` command in a fresh process: the probe reports the
    process's own CPU (user + system) and ``ru_maxrss`` (KiB on Linux)."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", _PROBE, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode:
        sys.exit(f"rankmap {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}")
    cpu_s, peak_mb = (float(x) for x in res.stderr.strip().splitlines()[-1].split()[1:])
    return cpu_s, wall, peak_mb


def scale_figures(n_hosts: int, tmp: Path) -> tuple[tuple, tuple, tuple, str]:
    """Figures of importing the topology.conf of ``n_hosts`` hosts, planning on it and verifying
    the map: ``((CPU s, wall s, peak MB) of each of the three, rankmap.json sha256)``."""
    conf, cluster, job = tmp / f"topo{n_hosts}.conf", tmp / f"cluster{n_hosts}.yaml", tmp / "job.yaml"
    conf.write_text(topology_conf(n_hosts))
    job.write_text(JOB)
    env = dict(os.environ, RANKMAP_MAX_HOSTS=str(max(200_000, 2 * n_hosts)))
    imported = measured(["topo", "import", "--from", "slurm", "--gpus", "8", str(conf), "--out", str(cluster)], env)
    out = tmp / f"plan{n_hosts}"
    planned = measured(["plan", "--cluster", str(cluster), "--job", str(job), "--out", str(out), "--no-picture"], env)
    data = (out / "rankmap.json").read_bytes()
    env["RANKMAP_MAX_INPUT_BYTES"] = str(max(64 << 20, 2 * len(data)))     # 130 MB at 100,000 hosts
    verified = measured(["verify", "--cluster", str(cluster), str(out / "rankmap.json")], env)
    return imported, planned, verified, hashlib.sha256(data).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="12500,50000,100000", help="cluster sizes in hosts, comma-separated")
    args = ap.parse_args()
    print(f"{'':>8} {'':>8} {'':>6} " + "  ".join(f"{what:^24}" for what in ("topo import", "plan", "verify")))
    print(f"{'hosts':>8} {'GPUs':>8} {'groups':>6} " + "  ".join([f"{'CPU s':>7} {'wall s':>7} {'peak MB':>8}"] * 3)
          + "  rankmap.json sha256")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.hosts.split(",")):
            *runs, digest = scale_figures(n, Path(tmp))
            groups = -(-n // HOSTS_PER_GROUP)
            figures = "  ".join(f"{cpu:>7.1f} {wall:>7.1f} {peak:>8.0f}" for cpu, wall, peak in runs)
            print(f"{n:>8,} {8 * n:>8,} {groups:>6} {figures}  {digest}", flush=True)


if __name__ == "__main__":
    main()
