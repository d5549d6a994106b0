"""Errors a fresh user met without a file, line or value (tester report 4, item 19), as the real
command line prints them: one line, exit 3 (4 for an infeasible request), nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankmap.cli import main

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return code, err.strip()


def test_hostfile_slots_over_the_host_limit_name_the_hostfile_line(tmp_path, capsys):
    hf = tmp_path / "hf.txt"
    hf.write_text("# two hosts\nb slots=8\na slots=100000\n")
    out = tmp_path / "o.yaml"
    assert run(capsys, "topo", "import", "--from", "hostfile", hf, "--out", out) == (
        3, f"rankmap: error: {hf}:3: a: host a has 100000 GPUs (slots), more than 1024")
    hf.write_text("b\n" * 1025)                      # a bare name repeated: 1025 slots, counted at its first line
    assert run(capsys, "topo", "import", "--from", "hostfile", hf, "--out", out) == (
        3, f"rankmap: error: {hf}:1: b: host b has 1025 GPUs (slots), more than 1024")
    assert not out.exists()


def test_hostfile_case_twins_name_both_lines(tmp_path, capsys):
    hf = tmp_path / "hf.txt"
    hf.write_text("node1 slots=8\nnode2 slots=8\nNODE1 slots=8\n")
    assert run(capsys, "topo", "import", "--from", "hostfile", hf, "--out", tmp_path / "o.yaml") == (
        3, f"rankmap: error: {hf}:3: NODE1: hosts 'node1' (line 1) and 'NODE1' are one host (host names ignore case)")


def test_k8s_node_missing_a_level_is_named(tmp_path, capsys):
    gke = "cloud.google.com/gce-topology-"
    nodes = tmp_path / "nodes.json"
    nodes.write_text('{"items": [\n'
                     f' {{"metadata": {{"name": "gpu-node-1", "labels": {{"{gke}block": "a", "{gke}subblock": "s"}}}}}},\n'
                     f' {{"metadata": {{"name": "gpu-node-2", "labels": {{"{gke}block": "a"}}}}}}\n]}}\n')
    assert run(capsys, "topo", "import", "--from", "k8s-labels", nodes, "--out", tmp_path / "o.yaml") == (
        3, f"rankmap: error: {nodes}:3: gpu-node-2: node gpu-node-2 ends at domain a (it has no {gke}subblock "
           "label) but node gpu-node-1 has domains below it: a leaf cannot have children; label every node down "
           "to the same level")


@pytest.mark.parametrize("fmt,text,hint", [
    ("slurm", "BlockName=b1 Nodes=n[1-2]\nBlockSizes=2\n", "this is a topology/block file: import it with --from "
                                                           "slurm-block"),
    ("slurm-block", "SwitchName=s1 Nodes=n[1-2]\n", "this is a topology/tree file: import it with --from slurm"),
])
def test_slurm_tree_and_block_files_point_at_each_other(tmp_path, capsys, fmt, text, hint):
    conf = tmp_path / "topology.conf"
    conf.write_text(text)
    code, err = run(capsys, "topo", "import", "--from", fmt, conf, "--out", tmp_path / "o.yaml")
    assert code == 3 and err.startswith(f"rankmap: error: {conf}:1: ") and err.endswith(hint)


@pytest.mark.parametrize("availability, where, why", [
    ("availability: {busy: 'n[1-4]'}\n", "4: availability.busy", "all 4 hosts are busy"),
    ("availability:\n  failed: 'n[1-4]'\n", "5: availability.failed", "all 4 hosts are failed"),
    ("availability:\n  busy: 'n[1-2]'\n  failed: 'n[3-4]'\n", "4: availability",
     "2 are busy (availability.busy, line 5) and 2 are failed (availability.failed, line 6)"),
])
def test_a_cluster_without_free_hosts_names_the_line_that_took_them(tmp_path, capsys, availability, where, why):
    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: c\ntor_groups:\n  - {name: a, hosts: 'n[1-4]'}\n" + availability)
    assert run(capsys, "plan", "--cluster", cluster, "--job", REPO / "examples" / "racks" / "job.yaml",
               "--out", tmp_path / "p", "--no-picture") == (
        4, f"rankmap: error: {cluster}:{where}: cluster 'c' has no free hosts: {why}")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("pins,message,exit_code", [
    ("pins:\n  stages: {9: rack1}\n", "c.yaml:2: pins.stages.9: stage 9 is pinned, but the job has pp=4", 3),
    ("pins:\n  ranks:\n    0: gpu-r1-n01\n    1: gpu-r1-n02\n",
     "c.yaml:4: pins.ranks.1: rank 1 is pinned to host 'gpu-r1-n02', which conflicts with another pin", 4),
])
def test_pin_errors_name_their_line(tmp_path, capsys, pins, message, exit_code):
    constraints = tmp_path / "c.yaml"
    constraints.write_text(pins)
    code, err = run(capsys, "plan", "--example", "racks", "--constraints", constraints, "--out", tmp_path / "p",
                    "--no-picture")
    assert code == exit_code and err.startswith(f"rankmap: error: {tmp_path}/{message}"), err


@pytest.mark.parametrize("kind", ["Pod", "Node"])
@pytest.mark.parametrize("again", ["GPU-R2-N01", "gpu-r2-n01"])
def test_hosts_file_naming_a_node_twice_is_refused_like_a_hostlist(tmp_path, capsys, kind, again):
    """Two pods on one node were merged silently, then the plan came out '1 short' (exit 4). The
    duplicate is cited at its own line (4), the first item at its line (2), however each is spelled
    (a node listed twice in one spelling was cited at the first's line)."""
    def item(name, node):
        return (f'  {{"kind": "Pod", "metadata": {{"name": "{name}"}}, "spec": {{"nodeName": "{node}"}}}}'
                if kind == "Pod" else f'  {{"kind": "Node", "metadata": {{"name": "{node}"}}}}')
    listed = tmp_path / "list.json"
    listed.write_text('{"kind": "List", "items": [\n' + ",\n".join(
        [item("w-0", "gpu-r2-n01"), item("w-1", "gpu-r2-n02"), item("w-2", again)]) + "\n]}\n")
    code, err = run(capsys, "plan", "--example", "racks", "--dp", "1", "--hosts", f"@{listed}", "--out",
                    tmp_path / "p", "--no-picture")
    who = ("pods w-0 (line 2) and w-2 (one pod" if kind == "Pod"
           else f"node items gpu-r2-n01 (line 2) and {again} (one node item")
    assert (code, err) == (3, f"rankmap: error: {listed}:4: --hosts: host {again!r} is named twice, by {who} "
                              "per host; host names ignore case)")
    assert not (tmp_path / "p").exists()


def test_kubectl_nodes_import_cites_a_duplicate_node_at_its_own_line(tmp_path, capsys):
    """kubectl get nodes -o json as kubectl writes it (metadata.name after the labels, which hold
    the same name): the duplicate is cited at its own metadata.name line, and the first named."""
    import json

    def node(name):
        return {"kind": "Node", "metadata": {"labels": {"kubernetes.io/hostname": name,
                                                        **{f"network.amazonaws.com/network-node-layer-{i}": f"nn-{i}"
                                                           for i in (1, 2, 3)}}, "name": name},
                "status": {"capacity": {"nvidia.com/gpu": "8"}}}
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "NodeList", "items": [node("n1"), node("n2"), node("n1")]}, indent=1))
    lines = [i for i, line in enumerate(nodes.read_text().splitlines(), 1) if '"name": "n1"' in line]
    assert len(lines) == 2
    code, err = run(capsys, "topo", "import", "--from", "k8s-labels", nodes, "--out", tmp_path / "c.yaml")
    assert (code, err) == (3, f"rankmap: error: {nodes}:{lines[1]}: metadata.name=n1: node n1 is listed twice "
                              f"(first on line {lines[0]})")
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize("third, why", [
    ('{"kind": "Pod", "metadata": {"name": "w-2"}, "spec": {}}', "pod w-2 is not scheduled yet (no spec.nodeName)"),
    ('{"kind": "Pod", "metadata": {"name": "w-2"}, "spec": {"nodeName": "a;b"}}', "bad host 'a;b'"),
])
def test_a_pod_without_a_usable_node_name_is_cited_at_its_line(tmp_path, capsys, third, why):
    listed = tmp_path / "pods.json"
    listed.write_text('{"kind": "List", "items": [\n'
                      '  {"kind": "Pod", "metadata": {"name": "w-0"}, "spec": {"nodeName": "gpu-r2-n01"}},\n'
                      '  {"kind": "Pod", "metadata": {"name": "w-1"}, "spec": {"nodeName": "gpu-r2-n02"}},\n'
                      f'  {third}\n]}}\n')
    code, err = run(capsys, "plan", "--example", "racks", "--dp", "1", "--hosts", f"@{listed}", "--out",
                    tmp_path / "p", "--no-picture")
    assert code == 3 and err.startswith(f"rankmap: error: {listed}:4: --hosts: {why}"), err
    assert not (tmp_path / "p").exists()
