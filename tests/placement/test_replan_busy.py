"""A host of the map that the cluster spec marks busy is the job's own: replan keeps its ranks.

The shapes of the fresh-user report: the racks example planned with dp=3 (12 hosts), then a
cluster spec refreshed from the scheduler while the job runs (every host of the map busy), or
one host of the map busy, and one host failed: only the failed host's ranks move.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rankmap import api
from rankmap.examples import example_inputs


def rankmap(*args):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def job_a(tmp_path_factory):
    out = tmp_path_factory.mktemp("jobA")
    run = rankmap("plan", "--example", "racks", "--dp", "3", "--out", out, "--no-picture")
    assert run.returncode == 0, run.stderr
    return out / "rankmap.json"


def busy_spec(tmp_path, hosts):
    """The racks cluster spec with ``hosts`` added to its busy hosts (the spec hash ignores states)."""
    text = example_inputs("racks", None, None)[0].read_text()
    changed = tmp_path / "cluster.yaml"
    changed.write_text(text.replace("busy: gpu-r1-n03,", f"busy: {','.join(hosts)},gpu-r1-n03,"))
    assert all(api.load_cluster(changed).host(h).state == "busy" for h in hosts)
    return changed


@pytest.mark.parametrize("which", ["every host of the map busy", "node rank 0 busy"])
def test_busy_hosts_of_the_map_keep_their_ranks(job_a, tmp_path, which):
    hosts = [r["host"] for r in json.loads(job_a.read_text())["ranks"][::8]]
    assert len(hosts) == 12
    cluster = busy_spec(tmp_path, hosts if which.startswith("every") else hosts[:1])
    failed = hosts[5]
    run = rankmap("replan", "--rankmap", job_a, "--cluster", cluster, "--failed", failed, "--out", tmp_path / "r",
                  "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert [(r["node_rank"], r["old"]) for r in doc["replaced"]] == [(5, failed)]
    assert doc["moved_ranks"] == 8
    new = [r["host"] for r in json.loads((tmp_path / "r" / "rankmap.json").read_text())["ranks"][::8]]
    assert new[:5] + new[6:] == hosts[:5] + hosts[6:] and new[5] not in hosts
    # the spare comes from the failed host's own rack: the cross-ToR bytes do not change
    assert doc["cross_tor_bytes_after"] == doc["cross_tor_bytes_before"]
    assert new[5].split("-n")[0] == failed.split("-n")[0]


def test_a_host_the_spec_marks_failed_is_replaced_without_failed_flag(job_a, tmp_path):
    hosts = [r["host"] for r in json.loads(job_a.read_text())["ranks"][::8]]
    cluster = busy_spec(tmp_path, hosts[:2] + hosts[3:])
    cluster.write_text(cluster.read_text().rstrip("\n") + f"\n  failed: {hosts[2]}\n")  # under availability:
    run = rankmap("replan", "--rankmap", job_a, "--cluster", cluster, "--out", tmp_path / "r", "--json")
    assert run.returncode == 0, run.stderr
    assert [(r["node_rank"], r["old"]) for r in json.loads(run.stdout)["replaced"]] == [(2, hosts[2])]
