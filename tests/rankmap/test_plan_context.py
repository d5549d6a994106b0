"""A plan remembers what it was told (exclusions, reservations); replan and verify use it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rankmap import api
from rankmap.examples import example_inputs
from rankmap.topology.hostnames import expand_hostlist

EXCLUDED = "gpu-r1-n[01-04],gpu-r2-n[01-04]"


def rankmap(*args):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_replan_keeps_the_plans_exclusions(tmp_path):
    run = rankmap("plan", "--example", "racks", "--dp", "12", "--exclude", EXCLUDED, "--out", tmp_path / "p")
    assert run.returncode == 0, run.stderr
    assert "constraints excluded gpu-r" in run.stdout  # the header says what the plan was told
    doc = json.loads((tmp_path / "p" / "rankmap.json").read_text())
    assert set(expand_hostlist(doc["context"]["excluded"])) == set(expand_hostlist(EXCLUDED))
    cluster = api.load_cluster(example_inputs("racks", None, None)[0])
    used = [r["host"] for r in doc["ranks"][::8]]
    excluded = set(expand_hostlist(EXCLUDED))
    spares = sorted(h.name for h in cluster.free_hosts() if h.name not in set(used) | excluded)
    assert len(used) == 48 and len(spares) == 5 and not excluded & set(used)  # 60 free - 7 excluded - 48
    failed = used[:5]  # as many as there are spares: only the spares may replace them
    run = rankmap("replan", "--rankmap", tmp_path / "p" / "rankmap.json", "--cluster",
                  example_inputs("racks", None, None)[0], "--failed", ",".join(failed), "--out", tmp_path / "r",
                  "--json")
    assert run.returncode == 0, run.stderr
    new = sorted(r["new"] for r in json.loads(run.stdout)["replaced"])
    assert new == spares
    again = json.loads((tmp_path / "r" / "rankmap.json").read_text())
    assert again["context"]["excluded"] == doc["context"]["excluded"]
    assert set(expand_hostlist(again["context"]["failed"])) == set(failed)
    # One more failure: no spare is left outside the exclusions and the hosts replaced before
    # (remembered, though the cluster spec does not mark them failed), so the replan is refused.
    run = rankmap("replan", "--rankmap", tmp_path / "r" / "rankmap.json", "--cluster",
                  example_inputs("racks", None, None)[0], "--failed", used[6], "--out", tmp_path / "r2")
    assert run.returncode == 4 and "spare" in run.stderr and not (tmp_path / "r2").exists()


@pytest.mark.parametrize("command", ["verify", "simulate"])
def test_verify_refuses_a_map_whose_hosts_failed_and_points_to_replan(tmp_path, command):
    """verify, and simulate given the map (it would time an iteration on a dead host), refuse it."""
    cluster_path = example_inputs("racks", None, None)[0]
    assert rankmap("plan", "--example", "racks", "--dp", "12", "--out", tmp_path / "p").returncode == 0
    master = (tmp_path / "p" / "hostfile").read_text().split()[0]
    text = cluster_path.read_text()
    cluster = api.load_cluster(cluster_path)
    changed = tmp_path / "cluster.yaml"
    changed.write_text(text.rstrip("\n") + f"\n  failed: {master}\n")  # under `availability:`, the last key
    assert api.load_cluster(changed).host(master).state == "failed", "the edited spec must mark the master failed"
    assert api.load_cluster(changed).spec_hash() == cluster.spec_hash()
    if command == "verify":
        run = rankmap("verify", tmp_path / "p" / "rankmap.json", "--cluster", changed)
    else:
        run = rankmap("simulate", "--cluster", changed, "--rankmap", tmp_path / "p" / "rankmap.json", "--seeds", "1",
                      "--out", tmp_path / "s")
        assert not (tmp_path / "s").exists()
    assert run.returncode == 3
    assert run.stderr == (f"rankmap: error: {tmp_path}/p/rankmap.json: ranks: 1 host(s) of the map are failed in "
                          f"cluster {cluster.name!r}: {master} (node rank 0, the rendezvous master); replace them with "
                          f"`rankmap replan --rankmap {tmp_path}/p/rankmap.json --cluster {changed}`\n")


def test_replan_refuses_a_failed_host_outside_the_map(tmp_path):
    cluster_path = example_inputs("racks", None, None)[0]
    assert rankmap("plan", "--example", "racks", "--dp", "2", "--out", tmp_path / "a", "--no-picture").returncode == 0
    hosts = api.read_rankmap(tmp_path / "a" / "rankmap.json").hosts  # in node-rank order
    assert "gpu-r4-n01" not in hosts
    run = rankmap("replan", "--rankmap", tmp_path / "a" / "rankmap.json", "--cluster", cluster_path,
                  "--failed", "gpu-r4-n01", "--out", tmp_path / "x2")
    assert run.returncode == 3 and not (tmp_path / "x2").exists()
    assert run.stderr.splitlines() == ["rankmap: error: --failed: host 'gpu-r4-n01' is not in the rank map: it holds "
                                       "none of the job's ranks (the map's 8 hosts: gpu-r1-n[01-02,04-09])"]
    # a host of the map, in capitals, is that host (host names ignore case)
    run = rankmap("replan", "--rankmap", tmp_path / "a" / "rankmap.json", "--cluster", cluster_path,
                  "--failed", hosts[0].upper(), "--out", tmp_path / "x3")
    assert run.returncode == 0, run.stderr
    again = api.read_rankmap(tmp_path / "x3" / "rankmap.json").hosts
    assert hosts[0] not in again and again[1:] == hosts[1:]


def test_replan_of_a_whole_failed_rack_replaces_the_maps_hosts_and_keeps_the_rest_out(tmp_path):
    cluster_path = example_inputs("racks", None, None)[0]
    assert rankmap("plan", "--example", "racks", "--dp", "2", "--out", tmp_path / "a", "--no-picture").returncode == 0
    hosts = api.read_rankmap(tmp_path / "a" / "rankmap.json").hosts
    assert sorted(hosts) == expand_hostlist("gpu-r1-n[01-02,04-09]")
    run = rankmap("replan", "--rankmap", tmp_path / "a" / "rankmap.json", "--cluster", cluster_path,
                  "--failed", "gpu-r1-n[01-16]", "--out", tmp_path / "r")
    assert run.returncode == 0, run.stderr
    assert run.stderr == ("rankmap replan: note: 8 failed host(s) outside the map (gpu-r1-n[03,10-16]) held no ranks; "
                          "they are kept out of the spares\n")
    new = api.read_rankmap(tmp_path / "r" / "rankmap.json")
    assert len(new.hosts) == 8 and not any(h.startswith("gpu-r1-") for h in new.hosts)
    assert set(expand_hostlist(new.context["failed"])) == set(expand_hostlist("gpu-r1-n[01-16]"))
    none = rankmap("replan", "--rankmap", tmp_path / "a" / "rankmap.json", "--cluster", cluster_path,
                   "--failed", "gpu-r4-n[01-02]", "--out", tmp_path / "x")
    assert none.returncode == 3 and not (tmp_path / "x").exists()
    assert none.stderr.startswith("rankmap: error: --failed: none of its 2 hosts is in the rank map: they hold none")
