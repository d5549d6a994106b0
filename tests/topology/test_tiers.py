"""Switch tiers: domains per level, per-tier bandwidth, YAML round trips, importers' levels, order independence."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from rankmap.errors import SpecError, TopologyError
from rankmap.topology import cluster_to_yaml, load_cluster, parse_cluster
from rankmap.topology.k8s import AWS_LAYER, parse_k8s_nodes
from rankmap.topology.model import Tier
from rankmap.topology.slurm import export_slurm_tree, parse_slurm_tree
from rankmap.topology.slurm_block import parse_slurm_block
from rankmap.topology.sources import ImportOptions
from rankmap.topology.summary import tier_lines
from rankmap.topology.volcano import parse_hypernodes

# 2 pods x 2 leaves; 2 hosts per leaf, 2 rails, 4 uplinks per rail ToR.
TWO_PODS = """\
name: small
hosts: {gpus: 2, nics: 2}
links: {tor_uplinks: 4, tor_uplink_gbps: 400, tor_downlink_gbps: 200, nic_gbps: 200}
tor_groups:
  - {name: l4, capacity: 2, hosts: "d[1-2]"}
  - {name: l1, capacity: 2, hosts: "a[1-2]"}
  - {name: l3, capacity: 2, hosts: "c[1-2]"}
  - {name: l2, capacity: 2, hosts: "b[1-2]"}
switches:
  - {name: core, children: [pod2, pod1]}
  - {name: pod2, children: [l4, l3]}
  - {name: pod1, children: [l1, l2]}
tiers:
  - {name: spine, switches: 4, down_ports: 4, up_ports: 2}
  - {name: core, switches: 2, down_ports: 8}
"""


def small():
    return parse_cluster(TWO_PODS, "small.yaml")


def test_domains_per_level_on_two_pods():
    c = small()
    assert c.depth == 2
    assert c.tier_domains(0) == (("l1",), ("l2",), ("l3",), ("l4",))
    assert c.tier_domains(1) == (("l1", "l2"), ("l3", "l4"))
    assert c.tier_domains(2) == (("l1", "l2", "l3", "l4"),)
    # tor_groups are in spec order: l4, l1, l3, l2
    assert c.domain_index(0) == (3, 0, 2, 1)
    assert c.domain_index(1) == (1, 0, 1, 0)
    assert c.domain_index(2) == (0, 0, 0, 0)
    with pytest.raises(ValueError):
        c.tier_domains(3)


def test_figures_on_two_pods_by_hand():
    f = small().tier_figures()
    # ToR group: 2 rails x 2 ports x 200 down = 800; 2 rails x 4 x 400 up = 3200.
    assert (f[0].domains, f[0].switches, f[0].down_gbps, f[0].up_gbps, f[0].ratio) == (4, 8, 800.0, 3200.0, 0.25)
    # pod: 4 spines x 4 down x 400 = 6400 (2 groups x 2 rails x 4 uplinks = 16 ports = 4 x 4); up 4 x 2 x 400.
    assert (f[1].domains, f[1].switches, f[1].down_gbps, f[1].up_gbps, f[1].ratio) == (2, 8, 6400.0, 3200.0, 2.0)
    # core: 2 switches x 8 down = 16 ports = 2 pods x 4 spines x 2 up.
    assert (f[2].domains, f[2].switches, f[2].down_gbps, f[2].up_gbps, f[2].ratio) == (1, 2, 6400.0, 0.0, None)


def test_domains_do_not_depend_on_listing_order():
    lines = TWO_PODS.splitlines()
    groups, switches = lines[4:8], lines[9:12]
    rng = random.Random(7)
    base = small()
    for _ in range(5):
        rng.shuffle(groups)
        rng.shuffle(switches)
        text = "\n".join(lines[:4] + groups + ["switches:"] + switches + lines[12:]) + "\n"
        c = parse_cluster(text, "p.yaml")
        for level in range(3):
            assert c.tier_domains(level) == base.tier_domains(level)
        assert c.tier_figures() == base.tier_figures()


def test_megascale_3tier_figures_by_hand():
    c = load_cluster("examples/megascale-3tier/cluster.yaml")
    assert [len(c.tier_domains(lv)) for lv in range(3)] == [24, 6, 1]
    assert all(len(d) == 4 for d in c.tier_domains(1))
    tor, spine, core = c.tier_figures()
    # rail ToR: 64 x 200G down, 32 x 400G up, x 8 rails per group.
    assert (tor.down_gbps, tor.up_gbps, tor.ratio) == (8 * 64 * 200, 8 * 32 * 400, 1.0)
    # pod: 32 spines x 32 ports x 400G each way = 409.6 Tb/s, 1:1.
    assert (spine.switches, spine.down_gbps, spine.up_gbps, spine.ratio) == (6 * 32, 409600.0, 409600.0, 1.0)
    # core: 6 x 32 x 32 = 6,144 spine uplinks on 96 switches x 64 ports.
    assert (core.switches, core.down_gbps, core.ratio) == (96, 6144 * 400.0, None)


def test_oversubscribed_core_figures_by_hand():
    c = load_cluster("examples/oversubscribed-core/cluster.yaml")
    assert [len(c.tier_domains(lv)) for lv in range(3)] == [24, 4, 1]
    _, spine, core = c.tier_figures()
    assert (spine.down_gbps, spine.up_gbps, spine.ratio) == (32 * 48 * 400.0, 32 * 16 * 400.0, 3.0)
    assert (core.switches, core.down_gbps) == (32, 4 * 32 * 16 * 400.0)
    assert tier_lines(c)[1] == ("tier 1 spine: 4 domains, 128 switches (rails share them), "
                                "per domain down 614.4 Tb/s, up 204.8 Tb/s, 3:1")


def test_existing_specs_keep_their_meaning_and_hash():
    racks = load_cluster("examples/racks/cluster.yaml")
    mega = load_cluster("examples/megascale-12k/cluster.yaml")
    # Values computed with the main branch's code before tiers existed (megascale-12k: since the hash
    # sorts hosts, see test_hash_of_clusters_without_the_new_fields_is_unchanged).
    assert racks.spec_hash() == "f9a232fe183dca170d284d28d94537540f5b2a121c0ebfcfeda04d1ad2edaff1"
    assert mega.spec_hash() == "02b6da0c1610291f3f0b59c5a41f2a66fc82016847039393f2fbc97bb0f235ce"
    assert mega.tiers is None and "tiers" not in cluster_to_yaml(mega)
    (spine,) = mega.fabric_tiers  # today's flat spine: 24 groups x 8 rails x 32 uplinks on 32 switches
    assert (spine.name, spine.switches, spine.down_ports, spine.up_ports) == ("spine", 32, 192, 0)
    assert mega.tier_domains(1) == (tuple(f"tg{i:02d}" for i in range(24)),)
    explicit = dataclasses.replace(mega, tiers=mega.fabric_tiers)
    assert explicit.spec_hash() != mega.spec_hash()  # tiers enter the hash only when given


@pytest.mark.parametrize("example", ["megascale-3tier", "oversubscribed-core"])
def test_tiers_round_trip_through_yaml(example):
    c = load_cluster(f"examples/{example}/cluster.yaml")
    again = parse_cluster(cluster_to_yaml(c), "again.yaml")
    assert again == c and again.spec_hash() == c.spec_hash()


def test_rail_planes():
    text = TWO_PODS.replace("{name: spine, switches: 4, down_ports: 4, up_ports: 2}",
                            "{name: spine, switches: 2, down_ports: 4, up_ports: 1, planes: rail}")
    c = parse_cluster(text, "rail.yaml")
    spine = c.tier_figures()[1]
    # per pod: 2 rails x 2 switches = 4 switches; a plane takes 2 groups x 4 uplinks = 8 = 2 x 4 ports.
    assert (spine.planes, spine.switches, spine.down_gbps, spine.up_gbps) == ("rail", 8, 6400.0, 1600.0)
    assert parse_cluster(cluster_to_yaml(c), "again.yaml") == c
    assert "a plane per rail" in tier_lines(c)[1]


def _bad(text: str) -> str:
    with pytest.raises(SpecError) as err:
        parse_cluster(text, "t.yaml")
    return str(err.value)


@pytest.mark.parametrize("old, new, message", [
    ("down_ports: 4, up_ports: 2}", "down_ports: 3, up_ports: 2}",
     "t.yaml:14: tiers[0]: tier 'spine' at 'pod1': 4 switches x 3 down ports = 12 ports per plane cannot "
     "cable the 2 domains below, whose uplinks need 16"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: core, switches: 2, down_ports: 8, ports: 3}",
     "t.yaml:15: tiers[1].ports: unknown key 'ports'"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: core, switches: 0, down_ports: 8}",
     "t.yaml:15: tiers[1].switches: must be >= 1, got 0"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: core, switches: 2, down_ports: 8, planes: both}",
     "t.yaml:15: tiers[1].planes: expected one of shared, rail; got 'both'"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: spine, switches: 2, down_ports: 8}",
     "t.yaml:15: tiers[1].name: tier 'spine' is listed twice"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: ToR, switches: 2, down_ports: 8}",
     "t.yaml:15: tiers[1].name: 'ToR' is the name of tier 0 (the ToR switches): give this tier another name"),
    ("{name: spine, switches: 4", "{name: tor, switches: 4",
     "t.yaml:14: tiers[0].name: 'tor' is the name of tier 0"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: 'a g', switches: 2, down_ports: 8}",
     "t.yaml:15: tiers[1].name: tier name 'a g' must be one word"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: 'core=2', switches: 2, down_ports: 8}",
     "t.yaml:15: tiers[1].name: tier name 'core=2' must be one word"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: Spine, switches: 2, down_ports: 8}",
     "t.yaml:15: tiers[1].name: tier 'Spine' is listed twice"),
    ("  - {name: core, switches: 2, down_ports: 8}\n", "",
     "t.yaml:13: tiers: tiers lists 1 tier but the fabric has 2 levels above the ToR groups"),
    ("down_ports: 4, up_ports: 2}", "down_ports: 4, up_ports: 2, up_gbps: 200}",
     "t.yaml:15: tiers[1]: tier 'core' at 'core': down ports run at 400 Gb/s but the uplinks below run at 200"),
    ("down_ports: 4, up_ports: 2}", "down_ports: 4}",
     "t.yaml:14: tiers[0]: tier 'spine' has no up ports but a tier sits above it"),
    ("{name: core, switches: 2, down_ports: 8}", "{name: core, switches: 2, down_ports: 8, planes: rail}",
     "t.yaml:15: tiers[1]: tier 'core' has rail planes above tier 'spine'"),
])
def test_bad_tiers_name_file_and_line(old, new, message):
    assert old in TWO_PODS
    assert _bad(TWO_PODS.replace(old, new)).startswith(message)


def test_rail_planes_to_the_top_need_one_nic_count():
    text = ("tor_groups: [{name: a, hosts: [x1, {hosts: x2, gpus: 8, nics: 4}]}]\n"
            "tiers: [{name: spine, switches: 32, down_ports: 1, planes: rail}]\n")
    assert "hosts with different NIC counts" in _bad(text)
    with pytest.raises(TopologyError, match="planes must be one of"):
        Tier(name="x", switches=1, down_ports=1, planes="per-rail")


TREE = """\
SwitchName=core Switches=pod[1-2]
SwitchName=pod1 Switches=leaf[1-2]
SwitchName=pod2 Switches=leaf[3-4]
SwitchName=leaf1 Nodes=n[01-02]
SwitchName=leaf2 Nodes=n[03-04]
SwitchName=leaf3 Nodes=n[05-06]
SwitchName=leaf4 Nodes=n[07-08]
"""


def test_slurm_tree_keeps_levels_and_ignores_line_order():
    options = ImportOptions(rails=4)
    first = parse_slurm_tree(TREE, "topology.conf", options)
    c = first.cluster
    assert [t.name for t in c.tiers] == ["tier1", "tier2"]  # one word: --tier-weights tier1=1,tier2=3
    assert c.tier_domains(1) == (("leaf1", "leaf2"), ("leaf3", "leaf4"))
    # defaults: 32 switches (spine.switches); pod: 2 leaves x 4 rails x 32 uplinks = 256 = 32 x 8 ports
    assert [(t.switches, t.down_ports, t.up_ports, t.planes) for t in c.tiers] == [(32, 8, 8, "shared"),
                                                                                  (32, 16, 0, "shared")]
    assert any("edit tiers: in the cluster YAML" in n for n in first.notes)
    lines = TREE.splitlines()
    rng = random.Random(12)
    for _ in range(6):
        rng.shuffle(lines)
        assert parse_slurm_tree("\n".join(lines), "topology.conf", options).cluster == c
    again = parse_slurm_tree(export_slurm_tree(c), "topology.conf", options).cluster
    assert again == c and parse_cluster(cluster_to_yaml(c), "c.yaml") == c


def test_slurm_block_levels_become_tiers():
    text = "BlockName=b[1-4] Nodes=n[01-08]\nBlockSizes=2,4\n".replace("b[1-4] Nodes=n[01-08]",
                                                                      "b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n"
                                                                      "BlockName=b3 Nodes=n[5-6]\nBlockName=b4 Nodes=n[7-8]")
    c = parse_slurm_block(text, "b.conf").cluster
    assert [t.name for t in c.tiers] == ["block4", "spine"]
    assert c.tier_domains(1) == (("b1", "b2"), ("b3", "b4"))
    assert c.tier_domains(2) == (("b1", "b2", "b3", "b4"),)
    assert parse_cluster(cluster_to_yaml(c), "c.yaml") == c


def test_k8s_label_keys_name_the_tiers():
    items = [{"metadata": {"name": f"n{i}", "labels": {f"{AWS_LAYER}1": "top", f"{AWS_LAYER}2": f"sp{i // 4}",
                                                        f"{AWS_LAYER}3": f"leaf{i // 2}"}}} for i in range(8)]

    c = parse_k8s_nodes(json.dumps({"kind": "List", "items": items}), "nodes.json").cluster
    assert [t.name for t in c.tiers] == [f"{AWS_LAYER}2", f"{AWS_LAYER}1"]
    assert [len(c.tier_domains(lv)) for lv in range(3)] == [4, 2, 1]


def test_volcano_tier_names():
    text = "\n---\n".join(
        [f"kind: HyperNode\nmetadata: {{name: s{i}}}\nspec:\n  tier: 1\n  members:\n"
         f"  - {{type: Node, selector: {{exactMatch: {{name: n{i}}}}}}}" for i in range(2)]
        + ["kind: HyperNode\nmetadata: {name: top}\nspec:\n  tier: 2\n  tierName: spine-block\n  members:\n"
           "  - {type: HyperNode, selector: {exactMatch: {name: s0}}}\n"
           "  - {type: HyperNode, selector: {exactMatch: {name: s1}}}"])
    c = parse_hypernodes(text, "hn.yaml").cluster
    assert [t.name for t in c.tiers] == ["spine-block"]
    assert c.tier_domains(1) == (("s0", "s1"),)
    # a tierName a tier cannot take (not one word, or the ToRs' name) keeps the default name
    for bad in ("spine block", "ToR", "a=b"):
        assert [t.name for t in parse_hypernodes(text.replace("spine-block", repr(bad)), "hn.yaml").cluster.tiers] \
            == ["spine"], bad


FIELD_AWS = Path(__file__).parents[1] / "data" / "field-cases" / "k8s-nodes-aws-layers.json"

# Tester 6 #7: 4 ToR groups of 16 hosts, 8 x 800G uplinks per rail ToR; pods p1 (t1, t2) and p2 (t3, t4);
# each agg plane has 8 switches x 16 down ports = 128, of which 2 ToRs x 8 uplinks = 16 are cabled.
HALF_EMPTY_PODS = """\
name: planes
hosts: {gpus: 8, nics: 8}
links: {nic_gbps: 400, tor_downlink_gbps: 400, tor_uplinks: 8, tor_uplink_gbps: 800}
spine: {switches: 8}
tor_groups:
  - {name: t1, capacity: 16, hosts: "a[01-16]"}
  - {name: t2, capacity: 16, hosts: "b[01-16]"}
  - {name: t3, capacity: 16, hosts: "c[01-16]"}
  - {name: t4, capacity: 16, hosts: "d[01-16]"}
switches:
  - {name: p1, children: [t1, t2]}
  - {name: p2, children: [t3, t4]}
  - {name: top, children: [p1, p2]}
tiers:
  - {name: agg, switches: 8, down_ports: 16, up_ports: 4, down_gbps: 800, up_gbps: 800, planes: rail}
  - {name: core, switches: 4, down_ports: 16, up_ports: 0, down_gbps: 800, up_gbps: 800, planes: rail}
"""


def test_oversubscription_counts_cabled_ports_only():
    from rankmap.placement.tier_weights import default_tier_weights

    c = parse_cluster(HALF_EMPTY_PODS, "pl.yaml")
    tor, agg, core = c.tier_figures()
    # ToR: 16 hosts x 400 x 8 rails in, 8 x 800 x 8 out: 1:1
    assert (tor.down_gbps, tor.cabled_gbps, tor.up_gbps, tor.ratio) == (51200.0, 51200.0, 51200.0, 1.0)
    # agg: 8 rails x 8 switches x 16 ports x 800 = 819.2 Tb/s of ports, but only 2 ToRs x 8 uplinks x 800 x 8 rails
    # = 102.4 Tb/s arrive, against 8 x 8 x 4 x 800 = 204.8 Tb/s up: 1:2 (the declared ports said 4:1)
    assert (agg.down_gbps, agg.cabled_gbps, agg.up_gbps, agg.ratio) == (819200.0, 102400.0, 204800.0, 0.5)
    # core: 2 pods x 8 switches x 4 up per plane = 64 of its 4 x 16 = 64 ports: all cabled
    assert (core.down_gbps, core.cabled_gbps) == (409600.0, 409600.0)
    assert default_tier_weights(c) == (1.0, 1.0)   # the core is not scarce: weight 1, not 4
    assert tier_lines(c)[1] == ("tier 1 agg: 2 domains, 128 switches (a plane per rail), per domain down 819.2 Tb/s "
                                "(102.4 Tb/s cabled), up 204.8 Tb/s, 1:2")


def test_half_filled_racks_are_not_oversubscribed():
    c = load_cluster("examples/racks/cluster.yaml")   # 16 hosts in 32-port rail ToRs: half the host ports empty
    tor = c.tier_figures()[0]
    assert (tor.down_gbps, tor.cabled_gbps, tor.up_gbps, tor.ratio) == (102400.0, 51200.0, 51200.0, 1.0)


def test_topo_show_prints_tier_lines_of_a_two_tier_cluster():
    from rankmap.topology.sources import ImportResult
    from rankmap.topology.summary import summarize

    c = load_cluster("examples/racks/cluster.yaml")
    lines = summarize(ImportResult(cluster=c, format="cluster", source="cluster.yaml", warnings=(), notes=()))
    assert [line for line in lines if line.startswith("tier ")] == [
        "tier 0 ToR: 4 ToR groups, 32 switches (one per rail), per domain down 102.4 Tb/s (51.2 Tb/s cabled), "
        "up 51.2 Tb/s, 1:1",
        "tier 1 spine: 1 domain, 16 switches (rails share them), per domain down 204.8 Tb/s, top tier (no uplinks)"]


def test_block_island_is_named_by_its_top_block():
    from rankmap.topology.summary import island_names

    c = parse_slurm_block("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,8", "t.conf").cluster
    assert [t.name for t in c.tiers] == ["block8"] and island_names(c) == ["8-host block 1"]


def test_aws_tiers_of_unequal_depth_are_not_named_by_one_layer():
    r = parse_k8s_nodes(FIELD_AWS.read_text(), "aws.json", ImportOptions(gpus=8))
    # tier 1 holds nn-mid0001 (layer 2, above the 3-layer nodes' leaves) and nn-bot0003 (layer 3)
    assert [t.name for t in r.cluster.tiers] == ["tier1", AWS_LAYER + "2", AWS_LAYER + "1"]
    assert any("tier 1 holds domains of label levels" in n for n in r.notes)


def test_tiers_built_in_code_refuse_the_tor_name_and_one_name_twice():
    with pytest.raises(TopologyError, match="'TOR' is the name of tier 0"):
        Tier(name="TOR", switches=1, down_ports=1)
    cluster = parse_cluster(TWO_PODS)
    twice = (cluster.tiers[0], dataclasses.replace(cluster.tiers[1], name="SPINE"))
    with pytest.raises(TopologyError, match="tiers 1 and 2 are both named 'SPINE' \\(names ignore case\\)"):
        dataclasses.replace(cluster, tiers=twice)
