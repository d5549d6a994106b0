"""Diagnostics drills on real 8-process gloo runs (tp=2, pp=2, dp=2 on two emulated hosts): a slowed
rank, a quiet run whose second host's clock is 0.3 s ahead, a rank stuck in compute while its TP, PP
and DP peers wait in their collectives, a rank that never joins, and a slow link; and on 4-process
runs (tp=2, pp=2, dp=1 planned on 4 hosts of 2 GPUs): a slowed rank, and a quiet run; (on two
hosts) a rank stalled inside a TP collective."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time

import pytest
from helpers import ENV, LAUNCH, REPO, make_rankmap

pytest.importorskip("torch", reason="the engine needs PyTorch (pip install torch==2.13.0)")
pytestmark = pytest.mark.slow

HOSTS = ("node-a", "node-b")           # ranks 0-3 on node-a, 4-7 on node-b; stage 0 = ranks 0-3
HANG_TIMEOUT_S = 8


def _trace_problems():
    spec = importlib.util.spec_from_file_location("trace_rules", REPO / "tests" / "diagnose" / "test_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.trace_problems


def diagnose(run_dir, rankmap, want_rc):
    out = subprocess.run([sys.executable, "-m", "rankmap", "diagnose", run_dir, "--rankmap", rankmap],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == want_rc, out.stdout + out.stderr
    return json.loads((run_dir / "diagnosis" / "diagnosis.json").read_text()), out.stdout


def train(tmp_path, engine_yaml, diagnostics: str, steps: int = 6, env=None, timeout=170):
    rankmap = make_rankmap(tmp_path / "plan", tp=2, pp=2, dp=2, hosts=HOSTS)
    cfg = engine_yaml(f"train: {{steps: {steps}}}\ndiagnostics: {diagnostics}\n", name=f"{tmp_path.name}.yaml")
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, *LAUNCH, "--rankmap", str(rankmap), "--local", "--config", str(cfg),
                           "--out", str(run_dir)], capture_output=True, text=True, env={**ENV, **(env or {})},
                          cwd=REPO, timeout=timeout)
    return rankmap, run_dir, done


def test_slow_rank_is_named_and_a_quiet_run_with_a_shifted_clock_flags_nothing(tmp_path, engine_yaml):
    rankmap, run_dir, done = train(tmp_path / "slow", engine_yaml,
                                   "{inject_rank: 5, inject_phase: forward, inject_delay_s: 0.25}")
    assert done.returncode == 0, done.stdout + done.stderr
    summary, text = diagnose(run_dir, rankmap, 5)
    # named by its forward's duration (against the 3 other ranks of its stage) and by its late
    # arrivals (against the same ranks), the strongest first: either may lead
    assert (summary["flags"][0]["what"], summary["flags"][0]["who"]) == ("rank", "5")
    assert ("5", "forward", "duration") in {(f["who"], f["phase"], f["measure"]) for f in summary["flags"]}
    assert "node-b" in text                                    # rank 5 is on the second host
    assert {f["who"] for f in summary["flags"] if f["what"] == "rank"} == {"5"}
    assert "node-b" in (run_dir / "diagnosis" / "constraints.yaml").read_text()

    rankmap, run_dir, done = train(tmp_path / "quiet", engine_yaml, "{}", env={"RANKMAP_CLOCK_SHIFT_S": "node-b=0.3"})
    assert done.returncode == 0, done.stdout + done.stderr
    summary, text = diagnose(run_dir, rankmap, 0)
    assert summary["flags"] == [] and summary["hang"] is None
    assert abs(summary["clock_offsets_s"]["node-b"] - 0.3) < 0.02 and "node-b +" in text
    kinds = {e["args"].get("group") for e in json.loads((run_dir / "diagnosis" / "trace.json").read_text())["traceEvents"]
             if e["ph"] == "X"}
    assert {"tp", "pp", "dp", "world"} <= kinds               # every group's operations are timed
    assert _trace_problems()(json.loads((run_dir / "diagnosis" / "trace.json").read_text())) == []


CLUSTER_4x2 = """name: four-by-two
hosts: {gpus: 2, nics: 2}
links: {nic_gbps: 400, tor_downlink_gbps: 400, tor_uplinks: 2, tor_uplink_gbps: 400, nvlink_gbps: 3600}
spine: {switches: 2}
tor_groups:
- {name: rack1, capacity: 4, hosts: "node-[1-4]"}
"""
JOB_TP2_PP2 = """name: tiny
parallel: {tp: 2, pp: 2, dp: 1}
model: {layers: 4, hidden: 64, heads: 4, seq_len: 64, vocab: 256}
batch: {micro_batch_size: 1, num_micro_batches: 4}
"""


def plan_tp2_pp2(folder):
    """``rankmap plan`` of tp=2 pp=2 dp=1 on a cluster of 4 hosts with 2 GPUs each, as a user plans it."""
    folder.mkdir(parents=True)
    (folder / "cluster.yaml").write_text(CLUSTER_4x2)
    (folder / "job.yaml").write_text(JOB_TP2_PP2)
    done = subprocess.run([sys.executable, "-m", "rankmap", "plan", "--cluster", folder / "cluster.yaml", "--job",
                           folder / "job.yaml", "--out", folder / "plan", "--no-picture"], capture_output=True,
                          text=True, cwd=REPO, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    return folder / "plan" / "rankmap.json"


def run_planned(folder, rankmap, engine_yaml, diagnostics: str, steps: int, env=None):
    cfg = engine_yaml(f"train: {{steps: {steps}}}\ndiagnostics: {diagnostics}\n", name=f"{folder.name}.yaml")
    done = subprocess.run([sys.executable, *LAUNCH, "--rankmap", str(rankmap), "--local", "--config", str(cfg),
                           "--out", str(folder / "run")], capture_output=True, text=True, env={**ENV, **(env or {})},
                          cwd=REPO, timeout=170)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "run"


def test_slow_rank_without_data_parallel_peers_is_named_by_its_tp_peer_and_a_quiet_run_names_nobody(tmp_path,
                                                                                                    engine_yaml):
    # tp=2 pp=2 dp=1 on 4 hosts of 2 GPUs (ranks 0-1 on node-1, 2-3 on node-2): no two ranks of a
    # stage beyond the TP pair, so compute is not compared; rank 0 waits for rank 1 in their TP
    # collectives, which names rank 1
    rankmap = plan_tp2_pp2(tmp_path / "plan")
    run_dir = run_planned(tmp_path / "slow", rankmap, engine_yaml,
                          "{inject_rank: 1, inject_phase: forward, inject_delay_s: 0.3}", steps=12)
    summary, _ = diagnose(run_dir, rankmap, 5)
    assert {(f["who"], f["measure"], f["host"]) for f in summary["flags"]} == {("1", "late arrival", "node-1")}
    tp = [f for f in summary["flags"] if f["phase"].startswith("tp-")]
    assert tp and min(f["value_s"] for f in tp) > 0.9          # 0.3 s in each of 4 micro-batches' forwards
    assert any("not compared: fewer than 3 ranks do the same work" in w for w in summary["warnings"])
    assert summary["exclude_hosts"] == ["node-1"]
    # the same job undisturbed, 6 steps (5 after warm-up: the fewest to judge by), node-2's clock 0.3 s ahead
    run_dir = run_planned(tmp_path / "quiet", rankmap, engine_yaml, "{}", steps=6,
                          env={"RANKMAP_CLOCK_SHIFT_S": "node-2=0.3"})
    summary, _ = diagnose(run_dir, rankmap, 0)
    assert summary["flags"] == [] and summary["hang"] is None and summary["exclude_hosts"] == []
    assert abs(summary["clock_offsets_s"]["node-2"] - 0.3) < 0.02


def test_rank_stuck_in_compute_is_named_while_its_peers_wait_in_tp_pp_and_dp(tmp_path, engine_yaml):
    rankmap, run_dir, done = train(tmp_path, engine_yaml, f"{{hang_timeout_s: {HANG_TIMEOUT_S}, stall_rank: 5, "
                                                          f"stall_step: 3, stall_mode: compute}}")
    assert done.returncode != 0                                # the job was torn down, not left hanging
    summary, text = diagnose(run_dir, rankmap, 6)
    named_at = time.time()
    hang = summary["hang"]
    assert hang["culprits"] == [5] and hang["culprit_hosts"] == ["node-b"] and hang["culprit_rails"] == [1]
    assert hang["culprit_state"][0].startswith("stuck in compute (forward, step 3)")
    assert hang["waiting"] == [0, 1, 2, 3, 4, 6, 7]             # the victims, apart from the culprit
    assert "culprit: rank 5 on node-b, rail 1" in text
    folder = run_dir / "events" / summary["run_id"]
    records = {r: json.loads((folder / f"hang-rank-{r:05d}.json").read_text()) for r in range(8)}
    assert {records[r]["group"] for r in (4, 0, 7)} == {"tp", "pp", "dp"}   # its TP, PP and DP peers wait
    assert all((folder / f"stacks-rank-{r:05d}.txt").read_text().count("File ") > 3 for r in range(8))
    assert named_at - records[5]["since_s"] < HANG_TIMEOUT_S + 30


def test_rank_that_never_joins_is_named(tmp_path, engine_yaml):
    rankmap, run_dir, done = train(tmp_path, engine_yaml, f"{{hang_timeout_s: {HANG_TIMEOUT_S}, stall_rank: 6, "
                                                          f"stall_step: 3, stall_mode: freeze}}")
    assert done.returncode != 0
    summary, text = diagnose(run_dir, rankmap, 6)
    assert summary["hang"]["culprits"] == [6] and summary["hang"]["culprit_hosts"] == ["node-b"]
    assert summary["hang"]["culprit_state"][0].startswith("no record: never entered")
    assert 6 not in summary["hang"]["waiting"] and len(summary["hang"]["waiting"]) == 7


def test_rank_stalled_inside_a_collective_is_blocked_there_with_its_group(tmp_path, engine_yaml):
    # tp=2 pp=2 dp=1 on two hosts (ranks 2-3, stage 1, on node-b): rank 3 enters its first TP
    # collective of step 1 and never completes it; its TP partner 2 blocks in the same one
    rankmap = make_rankmap(tmp_path / "plan", tp=2, pp=2, dp=1, hosts=HOSTS)
    cfg = engine_yaml("train: {steps: 3}\ndiagnostics: {hang_timeout_s: 5, stall_rank: 3, stall_step: 1, "
                      "stall_mode: collective}\n")
    done = subprocess.run([sys.executable, *LAUNCH, "--rankmap", str(rankmap), "--local", "--config", str(cfg),
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, env=ENV, cwd=REPO,
                          timeout=170)
    assert done.returncode != 0
    summary, text = diagnose(tmp_path / "run", rankmap, 6)
    hang = summary["hang"]
    folder = tmp_path / "run" / "events" / summary["run_id"]
    stalled = json.loads((folder / "hang-rank-00003.json").read_text())
    assert (stalled["state"], stalled["group"], stalled["step"]) == ("collective", "tp", 1)
    assert stalled["phase"].startswith("tp-")               # in the collective, not "stuck in compute"
    assert "_block_forever" in (folder / "stacks-rank-00003.txt").read_text()   # waiting in a gloo receive
    # the operation hangs with both members in it: host-side records name both, on node-b
    assert hang["culprits"] == [2, 3] and hang["culprit_hosts"] == ["node-b", "node-b"] and hang["waiting"] == [0, 1]
    assert all(s.startswith(f"blocked in {stalled['phase']} (tp #{stalled['seq']}) with every member")
               for s in hang["culprit_state"])
    assert "culprit: rank 3 on node-b" in text and "the operation itself hangs" in text


def test_slow_link_is_attributed_to_the_senders_rail_and_host(tmp_path, engine_yaml):
    rankmap, run_dir, done = train(tmp_path, engine_yaml, "{inject_rank: 1, inject_phase: send, inject_delay_s: 0.15}")
    assert done.returncode == 0, done.stdout + done.stderr
    summary, text = diagnose(run_dir, rankmap, 5)
    links = [f for f in summary["flags"] if f["measure"] == "slow link"]
    assert [(f["who"], f["host"], f["rail"]) for f in links] == [("1", "node-a", 1)]
    # the injected 0.15 s: only receives posted before the send began are timed (a receiver posting
    # late on a loaded machine waits only the rest of the delivery: 0.1025 s, and 0.007 s, seen before)
    assert 0.13 < links[0]["value_s"] < 0.2
    assert "slow link: rank 1 on node-a (rail 1" in text
    # named by its link alone: its sends' delay is time blocked in them, not lateness of its own
    # to its DP collectives, and the ranks waiting for its data are victims (named late before)
    assert {(f["who"], f["measure"]) for f in summary["flags"]} == {("1", "slow link")}
    assert summary["exclude_hosts"] == ["node-a"]
