"""Small clusters and jobs shared by the tests (importable as ``helpers``)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rankmap.job.rank_map import RankMap, write_plan_files
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.topology import parse_cluster

TINY = ModelShape(layers=4, hidden=64, heads=8, seq_len=32, vocab=100)


def cluster_with_free(free: tuple, gpus: int = 2, busy_per_group: int = 1):
    groups, busy = [], []
    for g, n in enumerate(free):
        names = [f"g{g}h{i}" for i in range(n + busy_per_group)]
        groups.append(f"  - {{name: t{g}, hosts: '{','.join(names)}'}}")
        busy += names[n:]
    text = f"hosts: {{gpus: {gpus}, nics: {gpus}}}\ntor_groups:\n" + "\n".join(groups) + "\n"
    if busy:
        text += f"availability: {{busy: '{','.join(busy)}'}}\n"
    return parse_cluster(text, "brute.yaml")


def job(**kw) -> JobSpec:
    """A tiny-model job with tp=8 (one host per TP group) unless overridden."""
    return JobSpec(**{"tp": 8, "model": TINY, "num_micro_batches": 2, "source": "job.yaml", **kw})


# Rank maps and real launches (launch and engine tests).
LAUNCH = ["-m", "rankmap", "launch"]
REPO = Path(__file__).resolve().parents[1]
# Every multi-process run: one OpenMP thread per process, gloo on the loopback interface,
# tracebacks of stuck processes on SIGABRT/timeouts (faulthandler).
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "PYTHONFAULTHANDLER": "1"}


def make_rankmap(folder: Path, *, tp=1, pp=1, dp=1, hosts=("h1",), nprocs=None, vpp=1, micro_batches=4,
                 layers=4, order="tp-cp-ep-dp-pp") -> Path:
    """Write rankmap.json for ``hosts`` (node-rank order), ``nprocs[n]`` ranks on node n."""
    nprocs = list(nprocs or [tp * pp * dp // len(hosts)] * len(hosts))
    job = JobSpec(name="tiny", tp=tp, pp=pp, dp=dp, num_micro_batches=micro_batches, virtual_stages=vpp,
                  order=order, model=ModelShape(layers=layers, hidden=64, heads=4, seq_len=64, vocab=256))
    rm = RankMap(job=job, cluster_name="test", cluster_hash="0" * 64, hosts=tuple(hosts),
                 tor_groups=("t",) * len(hosts), rails=tuple(tuple(range(n)) for n in nprocs),
                 nproc_per_node=max(nprocs))
    write_plan_files(rm, folder)
    return folder / "rankmap.json"


def launch_cli(*args, timeout=170, cwd=None):
    """``rankmap launch ...`` in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, *LAUNCH, *map(str, args)],
                          capture_output=True, text=True, env=ENV, cwd=cwd or REPO, timeout=timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_lines(lines: list[str], hosts: list[str], order: list[int], timeout: float, gap_s: float = 1.0,
              subst: dict | None = None) -> list[int]:
    """Run torchrun lines (one per node rank) in ``order``, each as if on ``hosts[n]``.

    Emulation on one machine: ``RANKMAP_HOST`` names the host, and ``subst`` replaces argv
    words (the plan's master address by 127.0.0.1). Returns exit codes by node rank; on the
    timeout every agent's process group is killed and the test fails.
    """
    procs, logs = {}, {}
    try:
        for i, node in enumerate(order):
            argv = [(subst or {}).get(w, w) for w in shlex.split(lines[node])]
            logs[node] = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: output never blocks
            procs[node] = subprocess.Popen(argv, env={**ENV, "RANKMAP_HOST": hosts[node]}, cwd=REPO,
                                           stdout=logs[node], stderr=subprocess.STDOUT, start_new_session=True)
            if i < len(order) - 1:
                time.sleep(gap_s)
        deadline = time.monotonic() + timeout
        codes = {}
        for node, proc in procs.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # a hang: every process prints its stack, then fail
                for other in procs.values():
                    if other.poll() is None:
                        os.killpg(other.pid, signal.SIGABRT)
                time.sleep(5)
                logs[node].seek(0)
                out = logs[node].read()
                pytest.fail(f"torchrun agent of node rank {node} still running after {timeout} s:\n{out[-4000:]}")
            codes[node] = proc.returncode
        return [codes[n] for n in range(len(lines))]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in logs.values():
            log.close()


def read_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train-log.jsonl").read_text().splitlines() if line.strip()]


def usage_error(capsys, *argv) -> str:
    """Run the command line in this process; assert exit 2, nothing on stdout and one line on
    stderr (a usage error); return stderr."""
    from rankmap.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1, err  # one line
    return err
