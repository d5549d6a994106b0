"""``rankmap launch --local`` names the worker that failed first, not a torchrun agent.

Real launches of a tiny gloo script (tests/launch/fail_on_rank.py) on two emulated hosts, one
worker each: one rank fails, its peer then fails in gloo. The launcher's error line must name
the failing rank, its host, local rank and exit code or signal, and the file holding its stderr
(which must hold its traceback, or faulthandler's dump for a signal).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from helpers import REPO, launch_cli, make_rankmap

from rankmap.launch.local import describe_failure

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                                   reason="a local run starts torchrun: needs PyTorch "
                                                          "(pip install torch==2.13.0)")]
SCRIPT = REPO / "tests" / "launch" / "fail_on_rank.py"


def _launch(tmp_path, rank: int, how: str):
    rankmap = make_rankmap(tmp_path / "plan", dp=2, hosts=("ha", "hb"))
    return launch_cli("--rankmap", rankmap, "--local", "--timeout", 60, "--out", tmp_path / "run", "--",
                      SCRIPT, rank, how, timeout=90)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rankmap: error:")]


def test_a_worker_that_raises_is_named_with_its_stderr_file(tmp_path):
    run = _launch(tmp_path, 1, "raise")
    assert run.returncode == 3, run.stderr[-3000:]
    lines = _error_lines(run.stderr)
    assert len(lines) == 1, run.stderr[-3000:]
    m = re.fullmatch(r"rankmap: error: rank 1 \(host hb, local rank 0, pid \d+\) failed first: exited with code 1; "
                     r"its output: (\S+); then rank 0 failed", lines[0])
    assert m, lines[0]
    log = Path(m.group(1))
    assert log.is_relative_to(tmp_path / "run" / "logs" / "hb") and log.name == "stderr.log"
    assert "ValueError: boom on rank 1" in log.read_text()
    # still printed as it happens, each line prefixed with its rank (torch prefixes tracebacks once more)
    assert any(line.startswith("[rank1]:") and line.endswith("ValueError: boom on rank 1")
               for line in run.stderr.splitlines())


def test_a_worker_killed_by_a_signal_is_named_with_its_fatal_dump(tmp_path):
    run = _launch(tmp_path, 0, "abort")
    assert run.returncode == 3, run.stderr[-3000:]
    line = _error_lines(run.stderr)[0]
    m = re.fullmatch(r"rankmap: error: rank 0 \(host ha, local rank 0, pid \d+\) failed first: killed by SIGABRT "
                     r"\(exit code -6\); its output: (\S+); then rank 1 failed", line)
    assert m, line
    assert "Fatal Python error: Aborted" in Path(m.group(1)).read_text()


def test_describe_failure_quotes_a_recorded_exception():
    row = {"rank": 5, "host": "b", "local_rank": 1, "pid": 9, "exitcode": 1, "signal": None,
           "error_file": "e.json", "stderr": None, "message": "ValueError: boom"}
    assert describe_failure(row) == ("rank 5 (host b, local rank 1, pid 9) failed: exited with code 1: "
                                     "ValueError: boom; its output: e.json")


def test_workers_stopped_by_the_agent_come_after_the_one_that_failed():
    """torchrun's agent stops the other workers of a host with SIGTERM once one has failed: a quiet
    bystander's stderr file is older than the culprit's, but it is not the root cause."""
    from rankmap.launch.local_agent import failure_order

    def row(rank, exitcode, time_s):
        return {"rank": rank, "exitcode": exitcode, "time_s": time_s}

    culprit, bystander = row(2, 3, 50.0), row(3, -15, 10.0)
    assert sorted([bystander, culprit], key=failure_order) == [culprit, bystander]
    # among real failures the earlier one leads; SIGTERM only when every worker ended by it
    assert sorted([row(1, -9, 20.0), row(0, 1, 30.0)], key=failure_order)[0]["rank"] == 1
    assert sorted([row(1, -15, 20.0), row(0, -15, 10.0)], key=failure_order)[0]["rank"] == 0
