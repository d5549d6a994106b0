"""Diagnostics on real 8-process gloo runs: a slowed rank, a quiet run, a rank that stalls."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from helpers import REPO, launch_cli, make_rankmap

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

HOSTS = ("node-a", "node-b")


def diagnose(run_dir, rankmap):
    out = subprocess.run([sys.executable, "-m", "rankmap", "diagnose", run_dir, "--rankmap", rankmap],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads((run_dir / "diagnosis" / "diagnosis.json").read_text()), out.stdout


def train(tmp_path, engine_yaml, diagnostics: str, steps: int = 6, timeout=170):
    rankmap = make_rankmap(tmp_path / "plan", tp=2, pp=2, dp=2, hosts=HOSTS)
    cfg = engine_yaml(f"train: {{steps: {steps}}}\ndiagnostics: {diagnostics}\n")
    run_dir = tmp_path / "run"
    t0 = time.monotonic()
    done = launch_cli("--rankmap", rankmap, "--local", "--config", cfg, "--out", run_dir, timeout=timeout)
    return rankmap, run_dir, done, time.monotonic() - t0


def test_slow_rank_is_named_and_a_quiet_run_flags_nothing(tmp_path, engine_yaml):
    rankmap, run_dir, done, _ = train(tmp_path / "slow", engine_yaml,
                                      "{inject_rank: 5, inject_phase: forward, inject_delay_s: 0.25}")
    assert done.returncode == 0, done.stdout + done.stderr
    summary, text = diagnose(run_dir, rankmap)
    first = summary["flags"][0]
    assert (first["what"], first["who"], first["phase"]) == ("rank", "5", "forward")
    assert "node-b" in text                                    # rank 5 is on the second host
    assert {f["who"] for f in summary["flags"] if f["what"] == "rank" and f["measure"] == "duration"} == {"5"}
    assert "node-b" in (run_dir / "diagnosis" / "constraints.yaml").read_text()

    rankmap, run_dir, done, _ = train(tmp_path / "quiet", engine_yaml, "{}")
    assert done.returncode == 0, done.stdout + done.stderr
    summary, _ = diagnose(run_dir, rankmap)
    assert summary["flags"] == [] and summary["hang"] is None


def test_stalled_rank_is_named_within_the_timeout(tmp_path, engine_yaml):
    timeout_s = 10
    rankmap, run_dir, done, elapsed = train(tmp_path, engine_yaml,
                                            f"{{hang_timeout_s: {timeout_s}, stall_rank: 6, stall_step: 3}}")
    assert done.returncode != 0                                # the job was torn down, not left hanging
    summary, text = diagnose(run_dir, rankmap)
    assert summary["hang"]["culprits"] == [6] and summary["hang"]["culprit_hosts"] == ["node-b"]
    assert 6 not in summary["hang"]["waiting"] and len(summary["hang"]["waiting"]) >= 1
    assert "rank 6 on node-b" in text
    # from the stall to the diagnosis: the watchdog timeout plus start-up, teardown and analysis
    assert elapsed < 60 + timeout_s + 30
