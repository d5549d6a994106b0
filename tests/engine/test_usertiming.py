"""The engine's timing for a user's own script (rankmap.engine.usertiming): a real 4-process gloo job."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ENV, REPO, free_port, make_rankmap

pytest.importorskip("torch", reason="the engine needs PyTorch (pip install torch==2.13.0)")


def test_a_users_script_is_timed_and_diagnosed(tmp_path):
    rankmap = make_rankmap(tmp_path / "plan", tp=2, pp=2, hosts=("h1",))
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-addr",
                           "127.0.0.1", "--master-port", str(free_port()), str(REPO / "tests" / "engine" / "user_timed.py"),
                           str(out), "3"], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**ENV, "RANKMAP_FILE": str(rankmap), "RANKMAP_HOST": "h1"})
    assert done.returncode == 0, done.stdout + done.stderr
    (run_id,) = [p.name for p in (out / "events").iterdir()]
    lines = [json.loads(line) for line in (out / "events" / run_id / "rank-00001.jsonl").read_text().splitlines()]
    ops = {(e["phase"], e["group"], tuple(e["peers"])) for e in lines if e["group"]}
    assert ops == {("tp-all-reduce", "tp", (0, 1)), ("pp-send", "pp", (1, 3)),
                   ("world-all-reduce", "world", (0, 1, 2, 3))}
    assert [e["seq"] for e in lines if e["phase"] == "pp-send"] == [0, 1, 2, 3, 4]
    diag = subprocess.run([sys.executable, "-m", "rankmap", "diagnose", out, "--rankmap", rankmap],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert diag.returncode == 5, diag.stdout + diag.stderr
    flags = json.loads((out / "diagnosis" / "diagnosis.json").read_text())["flags"]
    # rank 3 computes late: it is the one that arrives last at its world all-reduce
    assert {f["who"] for f in flags} == {"3"} and "late arrival" in {f["measure"] for f in flags}
