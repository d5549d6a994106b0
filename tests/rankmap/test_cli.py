"""The rankmap command, run as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def rankmap(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_plan_racks_example_writes_both_files(tmp_path):
    out = tmp_path / "out"
    run = rankmap("plan", "--example", "racks", "--out", out)
    assert run.returncode == 0, run.stderr
    for name in ("rankmap plan", "hostname order", "arrival order", "topology greedy", "busiest ToR"):
        assert name in run.stdout
    assert "framework engine (current release)" in run.stdout  # whose rules the plan followed
    doc = json.loads((out / "rankmap.json").read_text())
    assert doc["world_size"] == 480 and doc["summary"]["plan"]["gap_to_bound"] < 1e-5
    assert len((out / "hostfile").read_text().split()) == 60
    verify = rankmap("verify", out / "rankmap.json", "--cluster", "examples/racks/cluster.yaml")
    assert verify.returncode == 0 and "valid rank map: 480 ranks on 60 hosts" in verify.stdout
    wrong = rankmap("verify", out / "rankmap.json", "--cluster", "examples/megascale-12k/cluster.yaml")
    assert wrong.returncode == 3 and "was made for cluster 'racks-512'" in wrong.stderr


def test_map_verifies_against_the_same_fabric_listed_in_another_order(tmp_path):
    import yaml
    spec = yaml.safe_load(open("examples/racks/cluster.yaml"))
    spec["tor_groups"].reverse()
    backwards = tmp_path / "cluster-gr.yaml"
    backwards.write_text(yaml.safe_dump(spec))
    assert rankmap("plan", "--example", "racks", "--dp", "2", "--out", tmp_path / "o1", "--no-picture").returncode == 0
    run = rankmap("verify", tmp_path / "o1" / "rankmap.json", "--cluster", backwards)
    assert run.returncode == 0 and run.stdout == (f"{tmp_path}/o1/rankmap.json: valid rank map: 64 ranks on 8 hosts, "
                                                  "cluster 'racks-512' (verified); its summary (the planner's figures) "
                                                  "is not checked\n"), run.stderr
    # the cluster's name edited in the map: caught, though the hash still matches
    edited = tmp_path / "edited.json"
    edited.write_text((tmp_path / "o1" / "rankmap.json").read_text().replace('"name": "racks-512"', '"name": "other"'))
    run = rankmap("verify", edited, "--cluster", backwards)
    assert run.returncode == 3 and run.stderr == (
        f"rankmap: error: {edited}: cluster.name: rank map names cluster 'other', but its sha256 is that of "
        "'racks-512': the map was edited\n")
    spec["tor_groups"][0]["hosts"] = "gpu-r4-n[01-17]"  # one host more: another fabric
    backwards.write_text(yaml.safe_dump(spec))
    run = rankmap("verify", tmp_path / "o1" / "rankmap.json", "--cluster", backwards)
    assert run.returncode == 3 and "was made for cluster 'racks-512' as it was then" in run.stderr
    assert "its spec has changed since (hosts, ToR groups, switches or links" in run.stderr


def test_inline_job_overrides(tmp_path):
    run = rankmap("plan", "--example", "racks", "--tp", "8", "--pp", "2", "--dp", "4", "--model", "gpt3-6.7b",
                  "--micro-batches", "4", "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    job = json.loads((tmp_path / "rankmap.json").read_text())["job"]
    assert job["parallel"]["pp"] == 2 and job["parallel"]["dp"] == 4 and job["model"]["layers"] == 32


@pytest.mark.parametrize("job_text, args, code, message", [
    ("model: {preset: gpt3-13b}\nbatch: {num_micro_batches: 2}\nparalel: {tp: 8}\n", [], 3,
     "job.yaml:3: paralel: unknown key 'paralel'"),
    ("parallel: {tp: 5}\nmodel: {layers: 4, hidden: 640, heads: 10, seq_len: 64}\nbatch: {num_micro_batches: 2}\n",
     [], 4, "job.yaml:1: parallel.tp: tp=5 does not fit the hosts"),
    ("parallel: {tp: 8, pp: 4, dp: 100}\nmodel: {preset: gpt3-13b}\nbatch: {num_micro_batches: 2}\n", [], 4,
     "job.yaml:1: parallel.dp: the job (tp*cp*pp*dp = 3200 GPUs on 8-GPU hosts) needs 400 hosts; 60 usable in "
     "4 ToR groups (rack4: 15, rack3: 15, rack2: 15, rack1: 15): 340 short"),
    ("model: {preset: gpt3-13b}\nbatch: {num_micro_batches: 2}\n", ["--tp", "x"], 2, "expected a positive integer"),
    ("model: {preset: gpt3-13b}\nbatch: {num_micro_batches: 2}\n", ["--model", "gpt9"], 3, "unknown model preset"),
])
def test_bad_input_exits_non_zero_and_writes_nothing(tmp_path, job_text, args, code, message):
    job = tmp_path / "job.yaml"
    job.write_text(job_text)
    out = tmp_path / "out"
    run = rankmap("plan", "--cluster", "examples/racks/cluster.yaml", "--job", job, "--out", out, *args)
    assert run.returncode == code
    assert message in run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists()


def test_bad_cluster_names_file_line_and_key(tmp_path):
    cluster = tmp_path / "c.yaml"
    cluster.write_text("tor_groups:\n  - name: a\n    hosts: 'n[1-4]'\n    speed: 400\n")
    run = rankmap("plan", "--cluster", cluster, "--job", "examples/racks/job.yaml", "--out", tmp_path / "out")
    assert run.returncode == 3
    assert f"{cluster}:4: tor_groups[0].speed: unknown key 'speed'" in run.stderr
    assert not (tmp_path / "out").exists()


def test_failed_run_keeps_previous_outputs(tmp_path):
    out = tmp_path / "out"
    assert rankmap("plan", "--example", "racks", "--out", out).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    run = rankmap("plan", "--example", "racks", "--tp", "3", "--out", out)
    assert run.returncode != 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("cluster_text, args, message", [
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
     "g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n", [], "document too large"),
    ("hosts: {gpus: 1099511627776}\ntor_groups: [{hosts: n1}]\n", [], "hosts.gpus: must be <= 1024"),
    ("tor_groups: [{hosts: 'n[1-8]'}]\n", ["--order", "tp-pp", "--tp", "8", "--pp", "2"], "lacks dp"),
    ("tor_groups: [{hosts: 'n[1-8]'}]\n", ["--seed", "99999999999999999999"], "below 2**31"),
    ("tor_groups: [{hosts: 'n[1-8]'}]\n", ["--time-limit", "nan"], "expected a positive number"),
])
def test_more_bad_input_is_one_line(tmp_path, cluster_text, args, message):
    cluster = tmp_path / "c.yaml"
    cluster.write_text(cluster_text)
    run = rankmap("plan", "--cluster", cluster, "--job", "examples/racks/job.yaml", "--out", tmp_path / "o", *args)
    assert run.returncode in (2, 3, 4) and message in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "o").exists()


def test_bare_rankmap_prints_help_and_plans_nothing(tmp_path):
    for args in ((), ("--debug",)):
        run = rankmap(*args, cwd=tmp_path)
        assert run.returncode == 0 and run.stdout.startswith("usage: rankmap") and "plan" in run.stdout
        assert not (tmp_path / "rankmap-out").exists()


def test_version():
    from importlib.metadata import version
    run = rankmap("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"rankmap {version('rankmap')}"


def test_debug_is_taken_after_the_command_too(tmp_path):
    run = rankmap("verify", tmp_path / "missing.json", "--debug")
    assert run.returncode == 3 and "Traceback" in run.stderr and "cannot read file" in run.stderr
    quiet = rankmap("verify", tmp_path / "missing.json")
    assert quiet.returncode == 3 and "Traceback" not in quiet.stderr


def test_host_names_match_in_any_case_and_a_host_named_twice_is_refused(tmp_path):
    """Host names ignore case (RFC 4343) wherever a user names one: node-rank, --hosts, constraints."""
    out = tmp_path / "a"
    assert rankmap("plan", "--example", "racks", "--dp", "2", "--out", out, "--no-picture").returncode == 0
    run = rankmap("node-rank", "--rankmap", out / "rankmap.json", "--host", "GPU-R1-N04")
    assert run.returncode == 0 and run.stdout.split()[0] == "2", run.stderr  # node 2: gpu-r1-n[01-02] come first
    run = rankmap("plan", "--example", "racks", "--hosts", "GPU-R2-N[01-08]", "--out", tmp_path / "b", "--no-picture")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "b" / "hostfile").read_text().split()[0] == "gpu-r2-n01"  # the cluster's spelling
    (tmp_path / "hl.txt").write_text("gpu-r2-n[01-08]\n# the same host again\nGPU-R2-N01\n")
    run = rankmap("plan", "--example", "racks", "--hosts", f"@{tmp_path / 'hl.txt'}", "--out", tmp_path / "c")
    assert run.returncode == 3 and not (tmp_path / "c").exists()
    assert run.stderr == (f"rankmap: error: {tmp_path / 'hl.txt'}:3: --hosts: host 'GPU-R2-N01' is listed twice "
                          "(line 1 too; host names ignore case)\n")
    (tmp_path / "cons.yaml").write_text("quotas: {rack1: 4}\nexclude: GPU-R1-N01\n")
    run = rankmap("plan", "--example", "racks", "--dp", "2", "--constraints", tmp_path / "cons.yaml",
                  "--out", tmp_path / "d", "--no-picture")
    assert run.returncode == 0 and "gpu-r1-n01" not in (tmp_path / "d" / "hostfile").read_text(), run.stderr
    (tmp_path / "cons.yaml").write_text("quotas: {rack1: 4}\nexclude: gpu-r1-n017\n")
    run = rankmap("plan", "--example", "racks", "--constraints", tmp_path / "cons.yaml", "--out", tmp_path / "e")
    assert run.returncode == 3 and run.stderr == (f"rankmap: error: {tmp_path / 'cons.yaml'}:2: exclude: host "
                                                  "'gpu-r1-n017' is not in cluster 'racks-512'\n")
