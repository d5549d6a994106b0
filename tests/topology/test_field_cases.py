"""Every topology field case in tests/data/field-cases imports to the answer kept beside it."""

from __future__ import annotations

from pathlib import Path

import hostlist
import pytest
import yaml

from rankmap.errors import SpecError
from rankmap.topology.hostfile import parse_hostfile
from rankmap.topology.hostnames import compress_hostlist, expand_hostlist
from rankmap.topology.importers import import_file
from rankmap.topology.k8s import parse_k8s_nodes
from rankmap.topology.k8s_export import export_k8s_labels
from rankmap.topology.slurm import export_slurm_tree, parse_slurm_tree
from rankmap.topology.slurm_block import export_slurm_block, parse_slurm_block
from rankmap.topology.slurmconf import slurm_hostlist
from rankmap.topology.sources import ImportOptions
from rankmap.topology.tree import block_levels, hosts_under, parents, roots, switch_levels

CASES = Path(__file__).resolve().parents[1] / "data" / "field-cases"


def _import(fmt: str, file: str, **options):
    return import_file(fmt, CASES / file, ImportOptions(**options))


# -- slurm-tree-forward-refs.conf -------------------------------------------------------------

def test_forward_refs_match_expected_answer():
    expected = yaml.safe_load((CASES / "slurm-tree-forward-refs.expected.yaml").read_text())
    r = _import("slurm", "slurm-tree-forward-refs.conf")
    c = r.cluster
    assert len(c.hosts) == expected["hosts"]
    assert roots(c) == (expected["root"],)
    assert {h.name: h.tor_group for h in c.hosts} == expected["leaf_of"]
    up = parents(c)
    assert {k: v[0] for k, v in up.items()} == expected["parent_of"]
    assert all(len(v) == 1 for v in up.values())
    # sp[3,7] is a comma list (sp3, sp7), not the range sp3..sp7
    assert c.switches[0].children == ("sp3", "sp7")
    # 4 hosts fit under one spine; 8 need core1
    assert hosts_under(c, "sp3") == ("gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04")
    assert len(hosts_under(c, "core1")) == 8
    assert switch_levels(c) == {"leaf1": 0, "leaf2": 0, "leaf3": 0, "leaf4": 0, "core1": 2, "sp3": 1, "sp7": 1}
    assert r.warnings == () and c.islands() == (("leaf1", "leaf2", "leaf3", "leaf4"),)


def test_forward_refs_file_really_has_the_quirks():
    raw = (CASES / "slurm-tree-forward-refs.conf").read_bytes()
    assert b"\t" in raw and not raw.endswith(b"\n") and b"sp[3,7]" in raw


# -- slurm-islands.conf -----------------------------------------------------------------------

def test_islands_match_expected_answer():
    expected = yaml.safe_load((CASES / "slurm-islands.expected.yaml").read_text())
    c = _import("slurm", "slurm-islands.conf").cluster
    islands = c.islands()
    assert len(islands) == expected["islands"]
    assert [sum(len(c.tor_group(g).hosts) for g in isl) for isl in islands] == expected["island_sizes"]
    assert islands == (("fabA-leaf1", "fabA-leaf2"), ("fabB-leaf1",))
    assert roots(c) == ("fabA-spine", "fabB-leaf1")


def test_islands_export_keeps_them_apart_and_is_not_empty():
    c = _import("slurm", "slurm-islands.conf", name="slurm-islands").cluster
    text = export_slurm_tree(c)
    switch_lines = [ln for ln in text.splitlines() if ln.startswith("SwitchName=")]
    assert len(switch_lines) == 4  # 3 leaves + fabA-spine, and no invented common root
    assert not any("fabB-leaf1" in ln and "Switches=" in ln for ln in switch_lines)
    again = parse_slurm_tree(text, "exported.conf", ImportOptions(name="slurm-islands")).cluster
    assert again == c and len(again.islands()) == 2


def test_islands_cannot_be_flattened_into_blocks():
    c = _import("slurm", "slurm-islands.conf").cluster
    with pytest.raises(SpecError, match="2 islands; topology/block cannot keep them apart"):
        export_slurm_block(c)


# -- slurm-block.conf -------------------------------------------------------------------------

def test_block_case_has_four_base_blocks_and_three_levels():
    c = _import("slurm-block", "slurm-block.conf").cluster
    assert [(g.name, len(g.hosts)) for g in c.tor_groups] == [("blk1", 4), ("blk2", 4), ("blk3", 4), ("blk4", 4)]
    assert c.tor_group("blk3").hosts == ("r3n1", "r3n2", "r3n3", "r3n4")
    assert c.block_sizes == (4, 8, 16)
    assert block_levels(c) == [
        (4, [("blk1",), ("blk2",), ("blk3",), ("blk4",)]),
        (8, [("blk1", "blk2"), ("blk3", "blk4")]),
        (16, [("blk1", "blk2", "blk3", "blk4")]),
    ]
    again = parse_slurm_block(export_slurm_block(c), "slurm-block.conf").cluster
    assert again == c


# -- hostlists.tsv ----------------------------------------------------------------------------

def _hostlist_rows():
    expand, collect = [], []
    for line in (CASES / "hostlists.tsv").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        expr, count, hosts = line.split("\t")
        if expr.startswith("COLLECT "):
            collect.append((expr.split(" ", 1)[1].split(","), int(count), hosts))
        else:
            expand.append((expr, int(count), hosts.split(",")))
    return expand, collect


EXPAND_ROWS, COLLECT_ROWS = _hostlist_rows()


@pytest.mark.parametrize("expr,count,hosts", EXPAND_ROWS, ids=[r[0] for r in EXPAND_ROWS])
def test_hostlist_expansion(expr, count, hosts):
    assert expand_hostlist(expr) == hosts and len(hosts) == count
    # and both compressors give back exactly these hosts, zero padding included
    for compress in (compress_hostlist, slurm_hostlist):
        assert sorted(expand_hostlist(compress(hosts))) == sorted(hosts)


@pytest.mark.parametrize("names,count,answer", COLLECT_ROWS, ids=[",".join(r[0]) for r in COLLECT_ROWS])
def test_hostlist_compression(names, count, answer):
    for compress in (compress_hostlist, slurm_hostlist):
        expr = compress(names)
        back = hostlist.expand_hostlist(expr)
        assert sorted(back) == sorted(names) and len(back) == count
        if "[" in answer:  # the table gives the exact expression
            assert expr == answer


def test_hostlist_table_rows_were_read():
    assert len(EXPAND_ROWS) == 6 and len(COLLECT_ROWS) == 2
    assert slurm_hostlist(["k010", "k10"]) == "k[10,010]"


# -- hostfile-heterogeneous-slots.txt ---------------------------------------------------------

def test_heterogeneous_hostfile_imports_slot_counts():
    r = _import("hostfile", "hostfile-heterogeneous-slots.txt")
    c = r.cluster
    assert [(h.name, h.gpus) for h in c.hosts] == [("worker-a", 8), ("worker-b", 2), ("worker-c", 4),
                                                     ("worker-d", 1)]
    assert c.gpus == 15 and [h.name for h in c.hosts if h.gpus >= 8] == ["worker-a"]
    # a last line without a newline is read like any other
    text = (CASES / "hostfile-heterogeneous-slots.txt").read_text().rstrip("\n")
    assert parse_hostfile(text, "hf.txt").cluster.hosts == c.hosts


def test_heterogeneous_hostfile_bad_line_is_an_error_on_its_line():
    text = (CASES / "hostfile-heterogeneous-slots.txt").read_text().rstrip("\n") + "\nworker-e lots=8"
    with pytest.raises(SpecError) as err:
        parse_hostfile(text, "hostfile-heterogeneous-slots.txt")
    assert str(err.value) == ("hostfile-heterogeneous-slots.txt:6: lots=8: unknown attribute 'lots' "
                              "(expected slots=N or max_slots=N)")


# -- k8s-nodes-aws-layers.json ----------------------------------------------------------------

def test_aws_layers_align_from_the_top():
    c = _import("k8s-labels", "k8s-nodes-aws-layers.json").cluster
    group = {h.name: h.tor_group for h in c.hosts}
    # 11 and 12 share the lowest switch nn-bot0001
    assert group["ip-10-1-0-11"] == group["ip-10-1-0-12"] == "nn-top0001/nn-mid0001/nn-bot0001"
    # 13 shares only layer 2 (nn-mid0001) with them
    assert group["ip-10-1-0-13"] == "nn-top0001/nn-mid0001/nn-bot0002"
    assert parents(c)[group["ip-10-1-0-13"]] == parents(c)[group["ip-10-1-0-11"]] == ("nn-top0001/nn-mid0001",)
    # 14 has four layers: its leaf is nn-low0001, under its own layer-3 switch nn-bot0003
    assert group["ip-10-1-0-14"] == "nn-top0001/nn-mid0002/nn-bot0003/nn-low0001"
    assert hosts_under(c, "nn-top0001/nn-mid0002/nn-bot0003") == ("ip-10-1-0-14",)
    assert hosts_under(c, "nn-top0001/nn-mid0002") == ("ip-10-1-0-14",)
    assert hosts_under(c, "nn-top0001") == ("ip-10-1-0-11", "ip-10-1-0-12", "ip-10-1-0-13", "ip-10-1-0-14")
    assert c.host("ip-10-1-0-14").gpus == 8 and len(c.islands()) == 1


def test_aws_label_values_are_unique_only_under_their_parent():
    doc = yaml.safe_load((CASES / "k8s-nodes-aws-layers.json").read_text())
    # ip-10-1-0-13's leaf gets the same value as 11/12's leaf, but under another layer-2 switch
    labels = doc["items"][2]["metadata"]["labels"]
    labels["topology.k8s.aws/network-node-layer-2"] = "nn-mid0002"
    labels["topology.k8s.aws/network-node-layer-3"] = "nn-bot0001"
    import json
    c = parse_k8s_nodes(json.dumps(doc), "aws.json").cluster
    assert c.host("ip-10-1-0-13").tor_group == "nn-top0001/nn-mid0002/nn-bot0001"
    assert c.host("ip-10-1-0-11").tor_group == "nn-top0001/nn-mid0001/nn-bot0001"
    assert c.host("ip-10-1-0-13").tor_group != c.host("ip-10-1-0-11").tor_group


def test_aws_layers_round_trip_through_export():
    c = _import("k8s-labels", "k8s-nodes-aws-layers.json", name="aws").cluster
    text = export_k8s_labels(c)
    assert '"topology.k8s.aws/network-node-layer-4": "nn-low0001"' in text
    assert parse_k8s_nodes(text, "again.json", ImportOptions(name="aws")).cluster == c
