"""``rankmap launch --local``: the size limit, a user's script, and that stopping a run (timeout,
SIGINT) leaves no process behind -- workers included (torchrun starts them in their own sessions).

Real processes: a tag in the environment of ``rankmap launch`` is inherited by every process it
starts, so the test lists them from /proc before and after.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers import ENV, LAUNCH, REPO, launch_cli, make_rankmap

from rankmap.launch.local import check_local_size, default_max_procs

# Tests that start torchrun agents (the size check and its message need no torch).
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="a local run starts torchrun: needs PyTorch (pip install torch==2.13.0)")

SLEEPER = "import time\ntime.sleep(600)\n"


def _tagged(tag: str) -> list[str]:
    """``pid ppid sid cmdline`` of every live process carrying ``TEST_TAG=tag``."""
    want = f"TEST_TAG={tag}".encode()
    rows = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and want in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:100]
                rows.append(f"{entry.name} ppid={stat[1]} sid={stat[3]} {cmd}")
        except OSError:
            continue
    return rows


def _wait_for(tag: str, count: int, timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    rows = _tagged(tag)
    while len(rows) < count and time.monotonic() < deadline:
        time.sleep(0.5)
        rows = _tagged(tag)
    return rows


def test_size_limit_names_a_small_example(tmp_path):
    rankmap = make_rankmap(tmp_path, tp=2, dp=5, hosts=("a", "b", "c", "d", "e"))
    run = launch_cli("--rankmap", rankmap, "--local", "--max-procs", 8, "--steps", 0)
    assert run.returncode == 3
    assert ("--local would start 5 torchrun agents and 10 worker processes" in run.stderr
            and "the limit is 8 (--max-procs)" in run.stderr and "rankmap plan --example racks" in run.stderr)
    from rankmap.job.rank_map import read_rankmap
    rm = read_rankmap(rankmap)
    check_local_size(rm, 10)  # raised by --max-procs: allowed
    assert default_max_procs(2) == 8 and default_max_procs(64) == 128


@pytest.mark.slow
@needs_torch
def test_user_script_runs_locally_two_steps(tmp_path):
    t0 = time.perf_counter()
    rankmap = make_rankmap(tmp_path / "plan", pp=2, dp=2, hosts=("hb", "ha"), nprocs=[2, 2])
    run = launch_cli("--rankmap", rankmap, "--local", "--timeout", 150, "--", REPO / "tests" / "launch" / "train_user.py",
                     "--steps", 2, "--out", tmp_path / "run")
    assert run.returncode == 0, run.stderr[-3000:]
    for rank, host in enumerate(("hb", "hb", "ha", "ha")):
        rec = json.loads((tmp_path / "run" / f"rank-{rank}.json").read_text())
        assert (rec["rank"], rec["env_rank"], rec["host"], len(rec["losses"])) == (rank, rank, host, 2)
    print(f"--local -- train_user.py --steps 2: {time.perf_counter() - t0:.1f} s")


def _start_sleepers(tmp_path: Path, tag: str, *extra) -> subprocess.Popen:
    (tmp_path / "sleep.py").write_text(SLEEPER)
    rankmap = make_rankmap(tmp_path / "plan", pp=2, dp=2, hosts=("hb", "ha"), nprocs=[2, 2])
    return subprocess.Popen([sys.executable, *LAUNCH, "--rankmap", str(rankmap), "--local", *map(str, extra), "--",
                             "sleep.py"], cwd=tmp_path, env={**ENV, "TEST_TAG": tag}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("how", ["timeout", "sigint", "sigterm"])
def test_stopping_a_local_run_leaves_no_process(tmp_path, how):
    """1 launcher + 2 torchrun agents + 4 workers; after --timeout, SIGINT or SIGTERM none is left,
    and the exit code says which stopped the run: 124 (timeout(1)'s), 130, 143 (128 + signal)."""
    t0 = time.perf_counter()
    tag = uuid.uuid4().hex
    proc = _start_sleepers(tmp_path, tag, *(["--timeout", 8] if how == "timeout" else []))
    try:
        running = _wait_for(tag, 7, 60)
        assert len(running) == 7, "\n".join(running)
        assert len({row.split()[2] for row in running}) >= 3  # workers sit in sessions of their own
        if how != "timeout":
            proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        left = _tagged(tag)
        assert left == [], "processes left after the run:\n" + "\n".join(left)
        print(f"\nprocess tree during the run ({how}):\n" + "\n".join(running) + f"\nafter: none; "
              f"{time.perf_counter() - t0:.1f} s")
        if how == "timeout":
            assert proc.returncode == 124 and "did not finish within 8 s" in err
            # the hang's stacks come from the workers (sleep.py), announced first
            assert "passed --timeout 8 s" in err and 'File "sleep.py"' in err.replace(str(tmp_path) + "/", ""), err
        elif how == "sigint":
            assert proc.returncode == 130 and "interrupted" in err
        else:
            assert proc.returncode == 143 and "terminated (SIGTERM); stopped every process of the run" in err, err
        # the agents are stopped without their own tracebacks (torchrun's SignalException)
        assert "SignalException" not in err and "torch/distributed/run.py" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
        for row in _tagged(tag):  # never leave one behind, even when the test fails
            os.kill(int(row.split()[0]), signal.SIGKILL)
