"""A cluster survives export then import: same name, ToR group names and spec hash."""

from __future__ import annotations

import json

import pytest

from rankmap import api
from rankmap.errors import SpecError
from rankmap.examples import example_path
from rankmap.topology.identity import PART, embedded_spec
from rankmap.topology.sources import ImportOptions


@pytest.mark.parametrize("example", ["racks", "megascale-3tier"])
@pytest.mark.parametrize("fmt", ["slurm", "slurm-block", "slurm-yaml", "k8s-labels"])
def test_export_then_import_is_the_same_cluster(example, fmt, tmp_path):
    cluster = api.load_cluster(example_path(example, "cluster.yaml"))
    path = tmp_path / "exported"
    path.write_text(api.topo_export(cluster, fmt))
    result, text, _ = api.topo_import(path, fmt)
    assert result.cluster.name == cluster.name
    assert [g.name for g in result.cluster.tor_groups] == [g.name for g in cluster.tor_groups]
    assert result.cluster.spec_hash() == cluster.spec_hash()
    assert api.parse_cluster(text).spec_hash() == cluster.spec_hash()  # the written spec too
    # Formats without host states (topology.conf) keep the exported spec's busy and failed hosts.
    assert {h.name: h.state for h in result.cluster.hosts} == {h.name: h.state for h in cluster.hosts}


def test_comment_lines_stay_short_and_the_scheduler_part_is_unchanged():
    cluster = api.load_cluster(example_path("megascale-3tier", "cluster.yaml"))
    plain = api.topo_export(cluster, "slurm").split("\n")
    tagged = [line for line in plain if line.startswith("# rankmap-cluster-spec: ")]
    assert tagged and all(len(line) <= PART + 24 for line in tagged)
    from rankmap.topology.importers import export_cluster
    assert "\n".join(line for line in plain if not line.startswith("# rankmap-cluster-spec: ")) == \
        export_cluster("slurm", cluster)


def test_an_edited_file_keeps_the_name_only_and_says_why(tmp_path):
    cluster = api.load_cluster(example_path("racks", "cluster.yaml"))
    text = api.topo_export(cluster, "slurm").replace("SwitchName=rack4 Nodes=gpu-r4-n[01-16]",
                                                      "SwitchName=rack4 Nodes=gpu-r4-n[01-15]")
    path = tmp_path / "topology.conf"
    path.write_text(text)
    result, _, _ = api.topo_import(path, "slurm")
    assert result.cluster.name == cluster.name and result.cluster.spec_hash() != cluster.spec_hash()
    assert any("differs from the one exported" in n for n in result.notes)
    named, _, _ = api.topo_import(path, "slurm", ImportOptions(name="mine"))
    assert named.cluster.name == "mine"


def test_a_damaged_embedded_spec_is_refused_naming_the_file(tmp_path):
    cluster = api.load_cluster(example_path("racks", "cluster.yaml"))
    text = api.topo_export(cluster, "slurm").replace('"links":', '"linkz":', 1)
    with pytest.raises(SpecError, match="topology.conf: the embedded rankmap cluster spec is damaged"):
        embedded_spec(text, "topology.conf")
    doc = json.loads(api.topo_export(cluster, "k8s-labels"))
    assert "rankmap.io/cluster-spec" in doc["items"][0]["metadata"]["annotations"]
