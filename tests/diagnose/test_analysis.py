"""Diagnosis on records with known answers (the real multi-process runs are in test_diagnose_run.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from rankmap.diagnose.analysis import diagnose
from rankmap.diagnose.records import Event, Hang, RunRecords, event_path, hang_path, read_run

HOSTS = {r: f"h{r // 4}" for r in range(8)}          # 2 hosts x 4 ranks
TORS = {"h0": "tg0", "h1": "tg1"}


def run(slow_rank=None, slow_phase="forward", delay=0.3, late_rank=None, steps=6, seed=0):
    """8 ranks, tp=2 pp=2 dp=2-like records with jittered durations."""
    rng = np.random.default_rng(seed)
    events = []
    for step in range(steps):
        t = 100.0 + step * 2.0
        for r in range(8):
            for i, phase in enumerate(("forward", "backward", "optimizer")):
                dur = 0.2 * (1 + 0.05 * rng.standard_normal())
                if r == slow_rank and phase == slow_phase:
                    dur += delay
                events.append(Event(rank=r, host=HOSTS[r], local_rank=r % 4, step=step, phase=phase,
                                    start_s=t + 0.3 * i, dur_s=dur))
            peers = tuple(p for p in range(8) if p % 2 == r % 2)       # a DP group of 4
            start = t + 1.0 + (0.4 if r == late_rank else 0.01 * rng.random())
            events.append(Event(rank=r, host=HOSTS[r], local_rank=r % 4, step=step, phase="dp-reduce-scatter",
                                start_s=start, dur_s=0.05, group="dp", peers=peers, seq=step))
    return RunRecords(tuple(events), (), tuple(range(8)))


def test_quiet_run_flags_nothing():
    for seed in range(5):
        assert diagnose(run(seed=seed), HOSTS, TORS).flags == ()


def test_slow_forward_names_rank_host_and_phase():
    d = diagnose(run(slow_rank=5), HOSTS, TORS)
    top = d.flags[0]
    assert (top.what, top.who, top.phase, top.measure) == ("rank", "5", "forward", "duration")
    assert HOSTS[int(top.who)] == "h1"
    assert {f.who for f in d.flags if f.what == "rank"} == {"5"}


def test_late_arrival_to_a_collective_names_the_late_rank_not_the_waiters():
    d = diagnose(run(late_rank=2), HOSTS, TORS)
    assert [(f.who, f.phase, f.measure) for f in d.flags] == [("2", "dp-reduce-scatter", "late arrival")]


def test_slow_host_is_flagged_as_a_host():
    hosts = {r: f"h{r // 2}" for r in range(8)}       # 4 hosts x 2 ranks
    events = run().events
    slow = tuple(Event(**{**e.__dict__, "dur_s": e.dur_s + 0.3}) if hosts[e.rank] == "h3" and e.phase == "backward"
                 else e for e in events)
    d = diagnose(RunRecords(slow, (), tuple(range(8))), hosts, {h: "tg" for h in hosts.values()})
    assert any(f.what == "host" and f.who == "h3" and f.phase == "backward" for f in d.flags)


def test_hang_names_the_rank_that_never_arrived():
    hangs = tuple(Hang(rank=r, host=HOSTS[r], local_rank=r % 4, step=3, phase="dp-reduce-scatter", group="dp",
                       peers=(1, 3, 5, 7), seq=3, since_s=10.0, timeout_s=5.0) for r in (1, 3, 7))
    d = diagnose(RunRecords(run().events, hangs, tuple(range(8))), HOSTS, TORS)
    assert d.hang.culprits == (5,) and d.hang.culprit_hosts == ("h1",)
    assert d.hang.waiting == (1, 3, 7) and "no record" in d.hang.culprit_state[0]


def test_records_round_trip_and_cli(tmp_path):
    records = run(slow_rank=6)
    for r in range(8):
        path = event_path(tmp_path, r)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(e.to_json() + "\n" for e in records.events if e.rank == r) + '{"rank": 6, "ho')
    again = read_run(tmp_path)
    assert len(again.events) == len(records.events)    # the cut-off last line is skipped
    rm = subprocess.run([sys.executable, "-m", "rankmap", "plan", "--example", "racks", "--tp", "4", "--pp", "2",
                         "--dp", "1", "--order", "tp-pp-dp", "--model", "gpt3-1.3b", "--micro-batches", "2",
                         "--out", tmp_path / "plan"], capture_output=True, text=True, timeout=120)
    assert rm.returncode == 0, rm.stderr
    out = subprocess.run([sys.executable, "-m", "rankmap", "diagnose", tmp_path, "--rankmap",
                          tmp_path / "plan" / "rankmap.json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "diagnosis" / "diagnosis.json").read_text())
    assert summary["flags"][0]["who"] == "6" and summary["flags"][0]["phase"] == "forward"
    trace = json.loads((tmp_path / "diagnosis" / "trace.json").read_text())
    assert {e["ph"] for e in trace["traceEvents"]} == {"M", "X"}
    assert all({"name", "ph", "pid", "tid"} <= set(e) for e in trace["traceEvents"])
    assert (tmp_path / "diagnosis" / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    host = json.loads((tmp_path / "plan" / "rankmap.json").read_text())["ranks"][6]["host"]
    assert host in (tmp_path / "diagnosis" / "constraints.yaml").read_text()


def test_bad_records_are_located(tmp_path):
    path = event_path(tmp_path, 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"rank": 0}\n{"rank": 1}\n')
    with pytest.raises(Exception, match=r"rank-00000.jsonl:1: bad event record"):
        read_run(tmp_path)
    hang_path(tmp_path, 3).write_text("{}")
