"""Nothing lost, nobody let in: hostile names, killed runs, concurrent runs, edited maps.

Every check runs the real command in a subprocess, as a user or a script would.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOSTILE = ["a;rm -rf ~", "$(id)", "x`id`", "n1 n2", "host|cat"]


def rankmap(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_hostnames_are_refused_before_anything_is_written(tmp_path, name):
    out = tmp_path / "out"
    cases = {
        "cluster.yaml": f"tor_groups:\n  - name: a\n    hosts: ['n1', {json.dumps(name)}]\n",
        "topology.conf": f"SwitchName=s1 Nodes=n1,{name}\n",
        "hostfile": f"n1 slots=8\n{name} slots=8\n",
    }
    cases["nodes.json"] = json.dumps({"kind": "List", "items": [{"metadata": {"name": name, "labels": {
        "topology.k8s.aws/network-node-layer-1": "a"}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}]})
    cases["constraints.yaml"] = f"exclude: {json.dumps(name)}\n"
    for file, text in cases.items():
        (tmp_path / file).write_text(text)
    runs = [
        rankmap("plan", "--cluster", tmp_path / "cluster.yaml", "--out", out),
        rankmap("topo", "import", "--from", "slurm", tmp_path / "topology.conf", "--out", out / "c.yaml"),
        rankmap("topo", "import", "--from", "hostfile", tmp_path / "hostfile", "--out", out / "c.yaml"),
        rankmap("plan", "--example", "racks", "--exclude", name, "--out", out),
        rankmap("topo", "import", "--from", "k8s-labels", tmp_path / "nodes.json", "--out", out / "c.yaml"),
        rankmap("plan", "--example", "racks", "--constraints", tmp_path / "constraints.yaml", "--out", out),
    ]
    for run in runs:
        assert run.returncode in (2, 3), run.stderr
        assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert not out.exists()


@pytest.fixture
def planned(tmp_path):
    out = tmp_path / "plan"
    run = rankmap("plan", "--example", "racks", "--tp", "8", "--pp", "2", "--dp", "24", "--model", "gpt3-6.7b",
                  "--micro-batches", "4", "--out", out)
    assert run.returncode == 0, run.stderr
    return out


@pytest.mark.parametrize("edit", ["two-gpus", "other-cluster", "injected-host"])
def test_edited_rank_map_is_rejected_by_every_reader(tmp_path, planned, edit):
    path = planned / "rankmap.json"
    doc = json.loads(path.read_text())
    if edit == "two-gpus":        # rank 5 claims the GPU of rank 4
        doc["ranks"][5]["local_rank"] = 4
    elif edit == "other-cluster":
        doc["cluster"]["sha256"] = "0" * 64
    else:
        doc["ranks"][0]["host"] = "$(id)"
    path.write_text(json.dumps(doc))
    cluster = "examples/racks/cluster.yaml"
    runs = [
        rankmap("verify", path, "--cluster", cluster),
        rankmap("replan", "--rankmap", path, "--cluster", cluster, "--failed", "gpu-r1-n01", "--out", tmp_path / "r"),
        rankmap("plan", "--example", "racks", "--previous", path, "--out", tmp_path / "p"),
        rankmap("plan", "--example", "racks", "--reserve", path, "--out", tmp_path / "p"),
        rankmap("simulate", "--cluster", cluster, "--job", "examples/racks/job.yaml", "--rankmap", path,
                "--seeds", "1", "--out", tmp_path / "s"),
    ]
    for run in runs:
        assert run.returncode == 3, run.stderr
        assert str(path) in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "p").exists() and not (tmp_path / "s").exists()


def consistent_pair(folder: Path) -> bool:
    """Both files parse and the hostfile is the rank map's host order."""
    doc = json.loads((folder / "rankmap.json").read_text())
    hosts = [r["host"] for r in doc["ranks"][::doc["nproc_per_node"]]]
    return (folder / "hostfile").read_text().split() == hosts


def test_sigkill_mid_run_leaves_old_outputs_or_new_never_truncated(tmp_path):
    out = tmp_path / "out"
    assert rankmap("plan", "--example", "racks", "--out", out).returncode == 0
    old = {p: (out / p).read_bytes() for p in ("rankmap.json", "hostfile")}
    outcomes = set()
    for delay in (0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.4, 3.0):
        proc = subprocess.Popen([sys.executable, "-m", "rankmap", "plan", "--out", str(out)], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        now = {p: (out / p).read_bytes() for p in ("rankmap.json", "hostfile")}
        outcomes.add("old" if now == old else "new")
        assert consistent_pair(out)
        assert not [p for p in listing(out) if p.endswith(".tmp")]
        old = now
    assert "old" in outcomes  # at least one kill landed before the commit


def test_concurrent_runs_into_one_folder_do_not_interleave(tmp_path):
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "rankmap", "plan", "--example", ex, "--out", str(out)],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for ex in ("racks", "megascale-12k", "racks")]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    assert consistent_pair(out)
    assert listing(out) == ["hostfile", "rankmap.json"]
