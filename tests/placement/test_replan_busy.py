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
from rankmap.topology.hostnames import compress_hostlist


def rankmap(*args):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def job_a(racks_plan):
    """The racks example planned with dp=3 (12 hosts)."""
    return racks_plan(3)


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


def other_job(tmp_path, hosts):
    """A 4-host job (dp=1) of the racks example planned on exactly ``hosts``: its rankmap.json."""
    run = rankmap("plan", "--example", "racks", "--dp", "1", "--hosts", ",".join(hosts), "--out", tmp_path / "b",
                  "--no-picture")
    assert run.returncode == 0, run.stderr
    return tmp_path / "b" / "rankmap.json"


def spare_hosts(job_a, count):
    cluster = api.load_cluster(example_inputs("racks", None, None)[0])
    mine = set(api.read_rankmap(job_a).hosts)
    return [h.name for h in cluster.free_hosts() if h.name not in mine][:count]


def test_a_reserved_map_on_hosts_replan_keeps_is_refused_naming_it(job_a, tmp_path):
    """Another job (a --reserve map) on a host of this map that is not failed: the replanned map
    would start this job beside it. Refused (exit 3) naming the file and the host; nothing written."""
    hosts = api.read_rankmap(job_a).hosts
    other = other_job(tmp_path, [hosts[1], *spare_hosts(job_a, 3)])
    run = rankmap("replan", "--rankmap", job_a, "--failed", hosts[5], "--reserve", other, "--out", tmp_path / "r")
    assert run.returncode == 3 and run.stderr == (
        f"rankmap: error: --reserve {other}: its job holds 1 host(s) of the map that replan keeps ({hosts[1]}); two "
        f"jobs cannot share hosts: drop that --reserve if the map is stale, or name the hosts in --failed to move "
        f"this job's ranks off them\n")
    assert not (tmp_path / "r").exists()
    # naming the shared host failed moves this job off it, next to the other job
    run = rankmap("replan", "--rankmap", job_a, "--failed", f"{hosts[1]},{hosts[5]}", "--reserve", other, "--out",
                  tmp_path / "r", "--json")
    assert run.returncode == 0, run.stderr
    new = api.read_rankmap(tmp_path / "r" / "rankmap.json").hosts
    assert not set(new) & set(api.read_rankmap(other).hosts)


def test_this_jobs_own_map_given_to_reserve_is_refused(job_a, tmp_path):
    hosts = api.read_rankmap(job_a).hosts
    run = rankmap("replan", "--rankmap", job_a, "--failed", hosts[0], "--reserve", job_a, "--out", tmp_path / "r")
    kept = compress_hostlist(sorted(hosts[1:]))
    assert run.returncode == 3 and run.stderr == (
        f"rankmap: error: --reserve {job_a}: this is the job of --rankmap {job_a} itself, whose kept hosts ({kept}) "
        f"would be reserved against it: drop that --reserve\n")
    assert not (tmp_path / "r").exists()


def test_a_reserved_map_on_the_failed_host_only_is_fine(job_a, tmp_path):
    """The failed host leaves the map: another job there shares nothing with the new map."""
    hosts = api.read_rankmap(job_a).hosts
    other = other_job(tmp_path, [hosts[5], *spare_hosts(job_a, 3)])
    run = rankmap("replan", "--rankmap", job_a, "--failed", hosts[5], "--reserve", other, "--out", tmp_path / "r",
                  "--json")
    assert run.returncode == 0, run.stderr
    [(node, old, new)] = [(r["node_rank"], r["old"], r["new"]) for r in json.loads(run.stdout)["replaced"]]
    assert (node, old) == (5, hosts[5]) and new not in api.read_rankmap(other).hosts


def test_the_library_refuses_reserved_kept_hosts_from_any_source(job_a):
    """A reservation from a constraints file, or a library caller's, gets the same refusal."""
    from rankmap.errors import SpecError
    from rankmap.placement.constraints import PlacementConstraints

    previous = api.read_rankmap(job_a)
    cluster = api.load_cluster(example_inputs("racks", None, None)[0])
    hosts = previous.hosts
    with pytest.raises(SpecError) as err:
        api.replan(cluster, previous, [hosts[0]], PlacementConstraints(reserve=(hosts[7], hosts[0], hosts[2])))
    assert str(err.value) == (f"--reserve: 2 host(s) of the map that replan keeps are reserved for another job: "
                              f"{compress_hostlist(sorted([hosts[2], hosts[7]]))} (node ranks 2, 7); two jobs cannot "
                              f"share hosts: drop that reservation if the map is stale, or name the hosts in --failed "
                              f"to move this job's ranks off them")
