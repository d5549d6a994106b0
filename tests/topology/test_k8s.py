"""Kubernetes node labels: AWS layers, GKE blocks, Kueue levels; JSON and YAML input; export."""

from __future__ import annotations

import json

import pytest

from rankmap.errors import SpecError
from rankmap.topology.k8s import AWS_LAYER, parse_k8s_nodes, parse_kueue_levels
from rankmap.topology.k8s_export import export_k8s_labels
from rankmap.topology.sources import ImportOptions
from rankmap.topology.tree import parents

GKE = "cloud.google.com/gce-topology-"


def node(name: str, labels: dict, gpus: str | None = None) -> dict:
    item = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    if gpus is not None:
        item["status"] = {"capacity": {"cpu": "96", "nvidia.com/gpu": gpus}}
    return item


def nodes_json(*items) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}, indent=2)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth occurrence of needle."""
    pos = -1
    for _ in range(nth):
        pos = text.index(needle, pos + 1)
    return text.count("\n", 0, pos) + 1


def parse(text: str, **options):
    return parse_k8s_nodes(text, "nodes.json", ImportOptions(**options))


def test_gke_block_subblock_host_with_gpu_capacity():
    text = nodes_json(
        node("gke-a", {GKE + "block": "b1", GKE + "subblock": "s1", GKE + "host": "h1"}, gpus="8"),
        node("gke-b", {GKE + "block": "b1", GKE + "subblock": "s1", GKE + "host": "h2"}, gpus="8"),
        node("gke-c", {GKE + "block": "b1", GKE + "subblock": "s2", GKE + "host": "h3"}, gpus="4"),
        node("gke-d", {GKE + "block": "b2", GKE + "subblock": "s1", GKE + "host": "h4"}, gpus="8"))
    r = parse(text)
    c = r.cluster
    assert [(g.name, g.hosts) for g in c.tor_groups] == [
        ("b1/s1", ("gke-a", "gke-b")), ("b1/s2", ("gke-c",)), ("b2/s1", ("gke-d",))]
    assert c.host("gke-c").gpus == 4 and c.host("gke-c").nics == 4
    # s1 under b1 and s1 under b2 are different sub-blocks; b1 and b2 are joined by an implied root
    assert c.tier_domains(1) == (("b1/s1", "b1/s2"), ("b2/s1",))
    assert c.islands() == (("b1/s1", "b1/s2", "b2/s1"),)
    assert any("names the host itself" in n for n in r.notes)
    back = parse_k8s_nodes(export_k8s_labels(c, levels=(GKE + "block", GKE + "subblock")), "x.json",
                           ImportOptions(name=c.name)).cluster
    assert back == c
    apart = parse_k8s_nodes(text, "nodes.json", ImportOptions(separate_tops=True)).cluster
    assert apart.islands() == (("b1/s1", "b1/s2"), ("b2/s1",))


def test_kueue_levels_from_a_topology_object():
    levels = parse_kueue_levels("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Topology\nmetadata: {name: t}\n"
                                "spec:\n  levels:\n  - nodeLabel: example.com/block\n"
                                "  - nodeLabel: example.com/rack\n  - nodeLabel: kubernetes.io/hostname\n",
                                "topology.yaml")
    assert levels == ("example.com/block", "example.com/rack", "kubernetes.io/hostname")
    text = nodes_json(
        node("n1", {"example.com/block": "b", "example.com/rack": "r1", "kubernetes.io/hostname": "n1"}),
        node("n2", {"example.com/block": "b", "example.com/rack": "r2", "kubernetes.io/hostname": "n2"}))
    r = parse(text, levels=levels, gpus=4)
    assert [g.name for g in r.cluster.tor_groups] == ["b/r1", "b/r2"]
    n1, n2 = line_of(text, '"name": "n1"'), line_of(text, '"name": "n2"')
    assert [str(w) for w in r.warnings] == [
        f"nodes.json:{n1}: n1: node n1 says nothing about GPUs: assuming 4",
        f"nodes.json:{n2}: n2: node n2 says nothing about GPUs: assuming 4"]
    assert n1 == 9 and n2 > n1


def test_yaml_input_gives_lines_too():
    text = ("apiVersion: v1\nkind: List\nitems:\n"
            "- metadata:\n    name: n1\n    labels: {" + AWS_LAYER + "1: t, nvidia.com/gpu.count: '8'}\n"
            "- metadata:\n    name: n2\n    labels: {" + AWS_LAYER + "2: m}\n")
    with pytest.raises(SpecError) as err:
        parse_k8s_nodes(text, "nodes.yaml")
    assert str(err.value) == (f"nodes.yaml:7: n2: node n2 has {AWS_LAYER}2 but no {AWS_LAYER}1: "
                              "levels must be filled from the top")


def test_nodes_without_labels_or_gpus_are_left_out_with_a_warning():
    text = nodes_json(node("a", {AWS_LAYER + "1": "t"}, gpus="8"), node("cpu1", {}, gpus="0"),
                      node("cpu2", {AWS_LAYER + "1": "t"}, gpus="0"))
    r = parse(text)
    assert [h.name for h in r.cluster.hosts] == ["a"]
    assert [w.message for w in r.warnings] == ["node cpu1 has no topology labels: left out",
                                               "node cpu2 has no GPUs: left out"]
    with pytest.raises(SpecError, match="node cpu1 has no topology labels: left out \\(an error with --strict\\)"):
        parse(text, strict=True)


def test_capacity_and_label_disagree():
    item = node("a", {AWS_LAYER + "1": "t", "nvidia.com/gpu.count": "8"}, gpus="4")
    r = parse(nodes_json(item))
    assert r.cluster.host("a").gpus == 4 and "GPU counts differ" in r.warnings[0].message


@pytest.mark.parametrize("items,message", [
    ([node("a", {AWS_LAYER + "1": "t"}), node("a", {AWS_LAYER + "1": "t"})],
     "nodes.json:19: metadata.name=a: node a is listed twice (first on line 9)"),
    ([node("a", {"x": "y"})], "nodes.json:1: no topology labels found"),
    ([node("a", {AWS_LAYER + "1": "t"}, gpus="eight")], "nodes.json:9: a capacity nvidia.com/gpu: GPU count must be a whole number"),
    ([node("a", {AWS_LAYER + "1": "t/u"})], "label value 't/u' contains '/'"),
    ([node("Not_A_Host", {AWS_LAYER + "1": "t"})], "nodes.json:9: items[0].metadata.name: bad node name 'Not_A_Host'"),
    ([node("a", {AWS_LAYER + "1": "t", AWS_LAYER + "2": "m"}), node("b", {AWS_LAYER + "1": "t"})],
     f"nodes.json:20: b: node b ends at domain t (it has no {AWS_LAYER}2 label) but node a has domains below it"),
])
def test_errors(items, message):
    with pytest.raises(SpecError) as err:
        parse(nodes_json(*items))
    assert message in str(err.value)


def test_bad_json_names_its_line():
    with pytest.raises(SpecError) as err:
        parse('{"items": [\n  {"metadata": {"name": "a"}\n]}')
    assert str(err.value) == "nodes.json:3: invalid JSON: Expecting ',' delimiter"


def test_export_needs_a_single_parent_tree_and_valid_values():
    from rankmap.topology import parse_cluster
    multi = parse_cluster("tor_groups: [{name: l1, hosts: x1}]\nswitches: [{name: s1, children: [l1]}, "
                          "{name: s2, children: [l1]}]", "c.yaml")
    with pytest.raises(SpecError, match="'l1' has 2 parents"):
        export_k8s_labels(multi)
    spine = parse_cluster("tor_groups: [{name: g1, hosts: x1}, {name: g2, hosts: y1}]", "c.yaml")
    doc = json.loads(export_k8s_labels(spine))
    assert doc["items"][1]["metadata"]["labels"] == {
        AWS_LAYER + "1": "spine", AWS_LAYER + "2": "g2", "nvidia.com/gpu.count": "8"}
    back = parse_k8s_nodes(json.dumps(doc), "x.json").cluster
    assert parents(back)["spine/g2"] == ("spine",) and len(back.islands()) == 1
    with pytest.raises(SpecError, match="more than the 1 label keys given"):
        export_k8s_labels(spine, levels=("only.one/level",))


# -- field case turn2/k8s-allocatable -------------------------------------------------------------

def test_field_case_gpus_come_from_allocatable_and_tp8_avoids_the_node():
    # README: gpu-node-2 has capacity 8 but allocatable 7 (an unhealthy GPU): it gets 7 GPUs and a
    # warning naming it; a tp=8 job never lands on it.
    from pathlib import Path

    from rankmap.job.spec_file import load_job
    from rankmap.placement.plan import plan

    case = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2" / "k8s-allocatable"
    r = parse_k8s_nodes((case / "nodes.json").read_text(), "nodes.json")
    assert [(h.name, h.gpus) for h in r.cluster.hosts] == [("gpu-node-1", 8), ("gpu-node-2", 7),
                                                          ("gpu-node-3", 8), ("gpu-node-4", 8)]
    assert [str(w) for w in r.warnings] == [
        "nodes.json:31: gpu-node-2: node gpu-node-2: GPU counts differ (allocatable nvidia.com/gpu=7, capacity "
        "nvidia.com/gpu=8); using allocatable nvidia.com/gpu = 7 (an unhealthy or reserved GPU: the scheduler "
        "cannot give the others)"]
    rm = plan(r.cluster, load_job(case / "job.yaml")).rankmap
    assert rm.job.dp == 3 and "gpu-node-2" not in rm.hosts
    assert sorted(rm.hosts) == ["gpu-node-1", "gpu-node-3", "gpu-node-4"]


def test_allocatable_neighbours():
    def node(name, cap=None, alloc=None, label=None):
        status = {k: {"nvidia.com/gpu": v} for k, v in (("capacity", cap), ("allocatable", alloc)) if v is not None}
        labels = {"topology.k8s.aws/network-node-layer-1": "top", **({"nvidia.com/gpu.count": label} if label else {})}
        return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "status": status}

    import json

    doc = {"kind": "List", "items": [node("a", cap="8"), node("b", alloc="8"), node("c", cap="8", alloc="8"),
                                     node("d", alloc="6", label="8"), node("e", cap="8", alloc="0")]}
    r = parse_k8s_nodes(json.dumps(doc), "nodes.json")
    assert [(h.name, h.gpus) for h in r.cluster.hosts] == [("a", 8), ("b", 8), ("c", 8), ("d", 6)]
    warnings = [str(w) for w in r.warnings]
    assert any("node d: GPU counts differ (allocatable nvidia.com/gpu=6, label nvidia.com/gpu.count=8)" in w
               for w in warnings)
    assert any("node e has no GPUs: left out" in w for w in warnings)


def test_a_level_key_no_node_carries_is_refused_where_it_was_given(tmp_path, capsys):
    """A misspelt level (flag or Kueue nodeLabel) once merged both sub-blocks into one ToR group."""
    from rankmap.cli import main

    text = nodes_json(node("a", {GKE + "block": "b", GKE + "subblock": "s1"}, gpus="8"),
                      node("b", {GKE + "block": "b", GKE + "subblock": "s2"}, gpus="8"))
    nodes = tmp_path / "nodes.json"
    nodes.write_text(text)
    kueue = tmp_path / "kueue.yaml"
    kueue.write_text("kind: Topology\nspec:\n  levels:\n  - nodeLabel: " + GKE + "block\n"
                     "  - nodeLabel: " + GKE + "nope\n  - nodeLabel: kubernetes.io/hostname\n")
    out = tmp_path / "c.yaml"
    why = f"label key '{GKE}nope' is on no node of {nodes} (2 nodes): check its spelling"
    assert main(["topo", "import", "--from", "k8s-labels", str(nodes), "--levels", f"{GKE}block,{GKE}nope",
                 "--out", str(out)]) == 3
    assert capsys.readouterr().err.startswith(f"rankmap: error: --levels: {why}")
    assert main(["topo", "import", "--from", "k8s-labels", str(nodes), "--kueue-topology", str(kueue),
                 "--out", str(out)]) == 3
    assert capsys.readouterr().err.startswith(f"rankmap: error: {kueue}:5: spec.levels[1].nodeLabel: {why}")
    assert not out.exists()
    # spelt right, the two sub-blocks are two ToR groups (the hostname level is not a switch)
    good = parse(text, levels=(GKE + "block", GKE + "subblock", "kubernetes.io/hostname"))
    assert [g.name for g in good.cluster.tor_groups] == ["b/s1", "b/s2"]


def test_kueue_levels_with_one_label_key_twice_are_refused_like_levels_a_a():
    """Kueue refuses such a Topology ("must be unique"); it was imported as if the levels differed."""
    text = "kind: Topology\nspec:\n  levels:\n  - nodeLabel: example.com/rack\n  - nodeLabel: example.com/rack\n"
    with pytest.raises(SpecError) as err:
        parse_kueue_levels(text, "kt.yaml")
    assert str(err.value) == ("kt.yaml:5: spec.levels[1].nodeLabel: label key 'example.com/rack' is given twice "
                              "(spec.levels[0], line 4): each level needs its own key (Kueue: must be unique)")


def test_the_writers_are_still_importable_where_they_were_before_the_split():
    from rankmap.topology import k8s, k8s_export, kubectl_json, slurm_yaml, slurm_yaml_export

    assert k8s.export_k8s_labels is k8s_export.export_k8s_labels
    assert k8s.json_item_lines is kubectl_json.json_item_lines
    assert slurm_yaml.export_slurm_yaml is slurm_yaml_export.export_slurm_yaml
