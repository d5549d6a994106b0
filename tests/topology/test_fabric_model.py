"""The switch tree, block sizes and link speeds added to the cluster model and its spec YAML."""

from __future__ import annotations

import dataclasses

import pytest

from rankmap.errors import SpecError, TopologyError
from rankmap.topology import cluster_to_yaml, load_cluster, parse_cluster
from rankmap.topology.model import Cluster, Host, Switch, TorGroup
from rankmap.topology.tree import block_levels, find_cycle, path_to, roots, switch_levels, tiers

TREE = """\
name: t
hosts: {gpus: 8, nics: 4}
tor_groups:
  - {name: l1, hosts: "a[1-2]", link_speed: 100}
  - {name: l2, hosts: "b1"}
  - {name: l3, hosts: "c1"}
switches:
  - {name: sp1, children: [l2, l1], link_speed: 400}
  - {name: core, children: [sp1]}
  - {name: lone, children: [l3]}
"""


def test_spec_reads_the_tree_and_writes_it_back():
    c = parse_cluster(TREE, "t.yaml")
    assert c.switches == (Switch(name="sp1", children=("l1", "l2"), link_speed=400),
                          Switch(name="core", children=("sp1",)), Switch(name="lone", children=("l3",)))
    assert c.tor_group("l1").link_speed == 100 and c.tor_group("l2").link_speed is None
    assert c.islands() == (("l1", "l2"), ("l3",))
    assert switch_levels(c) == {"l1": 0, "l2": 0, "l3": 0, "sp1": 1, "core": 2, "lone": 1}
    assert tiers(c) == 3 and roots(c) == ("core", "lone")
    assert path_to(c, "l2") == ("core", "sp1", "l2")
    again = parse_cluster(cluster_to_yaml(c), "again.yaml")
    assert again == c and again.spec_hash() == c.spec_hash()


def test_hash_of_clusters_without_the_new_fields_is_unchanged():
    # racks: value from before the fields existed (commit ed80891): rank maps made then still verify.
    assert load_cluster("examples/racks/cluster.yaml").spec_hash() == \
        "f9a232fe183dca170d284d28d94537540f5b2a121c0ebfcfeda04d1ad2edaff1"
    # megascale-12k lists its hosts out of name order; the hash sorts them since listing order
    # left it (the old value, 0531d970..., changed then).
    c = load_cluster("examples/megascale-12k/cluster.yaml")
    assert c.spec_hash() == "02b6da0c1610291f3f0b59c5a41f2a66fc82016847039393f2fbc97bb0f235ce"
    assert c.switches is None and c.block_sizes is None and len(c.islands()) == 1
    assert "\nswitches:" not in cluster_to_yaml(c) and "block_sizes" not in cluster_to_yaml(c)


def test_tree_changes_the_hash():
    c = parse_cluster(TREE, "t.yaml")
    flat = dataclasses.replace(c, switches=None)
    assert flat.spec_hash() != c.spec_hash() and len(flat.islands()) == 1


def test_empty_switch_list_means_every_group_is_an_island():
    text = "tor_groups: [{name: a, hosts: x1}, {name: b, hosts: y1}]\nswitches: []\n"
    c = parse_cluster(text, "t.yaml")
    assert c.switches == () and c.islands() == (("a",), ("b",))
    assert parse_cluster(cluster_to_yaml(c), "again.yaml") == c


def test_with_states_keeps_the_tree():
    c = parse_cluster(TREE, "t.yaml").with_states({"a1": "busy"})
    assert c.host("a1").state == "busy" and len(c.islands()) == 2 and c.switches is not None


def test_hash_ignores_listing_order_but_not_the_fabric():
    # the same fabric listed backwards: groups, members, switches and children reversed
    backwards = parse_cluster(
        "tor_groups: [{name: l3, hosts: c1}, {name: l2, hosts: 'b2,b1'}, {name: l1, hosts: 'a2,a1'}]\n"
        "switches: [{name: core, children: [p2, p1]}, {name: p2, children: [l3]}, {name: p1, children: [l2, l1]}]\n")
    same = parse_cluster(
        "tor_groups: [{name: l1, hosts: 'a1,a2'}, {name: l2, hosts: 'b1,b2'}, {name: l3, hosts: c1}]\n"
        "switches: [{name: p1, children: [l1, l2]}, {name: p2, children: [l3]}, {name: core, children: [p1, p2]}]\n")
    assert backwards.spec_hash() == same.spec_hash()
    shouting = parse_cluster(  # host names in capitals: the same hosts (host names ignore case)
        "tor_groups: [{name: l1, hosts: 'A1,A2'}, {name: l2, hosts: 'b1,b2'}, {name: l3, hosts: C1}]\n"
        "switches: [{name: p1, children: [l1, l2]}, {name: p2, children: [l3]}, {name: core, children: [p1, p2]}]\n")
    assert shouting.spec_hash() == same.spec_hash()
    moved = parse_cluster(  # b2 moved to l3: another fabric
        "tor_groups: [{name: l1, hosts: 'a1,a2'}, {name: l2, hosts: 'b1'}, {name: l3, hosts: 'c1,b2'}]\n"
        "switches: [{name: p1, children: [l1, l2]}, {name: p2, children: [l3]}, {name: core, children: [p1, p2]}]\n")
    rewired = parse_cluster(  # l2 under p2: another fabric
        "tor_groups: [{name: l1, hosts: 'a1,a2'}, {name: l2, hosts: 'b1,b2'}, {name: l3, hosts: c1}]\n"
        "switches: [{name: p1, children: [l1]}, {name: p2, children: [l2, l3]}, {name: core, children: [p1, p2]}]\n")
    assert len({same.spec_hash(), moved.spec_hash(), rewired.spec_hash()}) == 3
    # topology/block: base blocks aggregate in listing order, so the order is the fabric
    blocks = "block_sizes: [1, 2]\ntor_groups: [{name: b1, hosts: n1}, {name: b2, hosts: n2}, {name: b3, hosts: n3}]\n"
    swapped = blocks.replace("b2, hosts: n2", "bX, hosts: n3").replace("b3, hosts: n3", "b2, hosts: n2")
    swapped = swapped.replace("bX", "b3")
    assert parse_cluster(blocks).spec_hash() != parse_cluster(swapped).spec_hash()


def test_block_sizes_in_spec():
    text = "block_sizes: [2, 4]\ntor_groups: [{name: b1, hosts: 'n[1-2]'}, {name: b2, hosts: 'n[3-4]'}]\n"
    c = parse_cluster(text, "b.yaml")
    assert c.block_sizes == (2, 4) and block_levels(c)[1] == (4, [("b1", "b2")])
    assert parse_cluster(cluster_to_yaml(c), "again.yaml") == c


@pytest.mark.parametrize("extra,message", [
    ("switches:\n  - {name: s, children: [nope]}\n", "t.yaml:3: switches[0].children: unknown switch or ToR group 'nope'"),
    ("switches:\n  - {name: a, children: [b]}\n", "t.yaml:3: switches[0].name: switch 'a' is defined twice"),
    ("switches:\n  - {name: s, children: [t]}\n  - {name: t, children: [s]}\n",
     "t.yaml:3: switches[0].children: switch tree has a cycle: s -> t -> s"),
    ("switches:\n  - {name: s, children: []}\n", "t.yaml:3: switches[0].children: expected a non-empty list"),
    ("switches:\n  - {name: s, children: [a, a]}\n", "t.yaml:3: switches[0].children: a child is listed twice"),
    ("switches:\n  - {name: s, kids: [a]}\n", "t.yaml:3: switches[0].kids: unknown key 'kids'"),
    ("block_sizes: [0]\n", "t.yaml:2: block_sizes: expected a non-empty list of positive integers"),
    ("block_sizes: [1, 3]\n", "t.yaml: block size 3 is not the base block size 1 times a power of two"),
    ("block_sizes: [1]\nswitches: []\n", "t.yaml: a cluster has either a switch tree or block sizes"),
])
def test_spec_errors_name_the_line(extra, message):
    text = "tor_groups: [{name: a, hosts: x1}, {name: b, hosts: y1}]\n" + extra
    with pytest.raises(SpecError) as err:
        parse_cluster(text, "t.yaml")
    assert str(err.value).startswith(message)


def test_model_rejects_bad_trees_directly():
    hosts = (Host(name="x1", gpus=8, nics=8, tor_group="a"),)
    groups = (TorGroup(name="a", index=0, hosts=("x1",)),)
    with pytest.raises(TopologyError, match="invalid child 'zz'"):
        Cluster(name="c", tor_groups=groups, hosts=hosts, switches=(Switch(name="s", children=("zz",)),))
    with pytest.raises(TopologyError, match="cycle: s -> t -> s"):
        Cluster(name="c", tor_groups=groups, hosts=hosts, switches=(
            Switch(name="s", children=("t", "a")), Switch(name="t", children=("s",))))
    with pytest.raises(TopologyError, match="has no children"):
        Cluster(name="c", tor_groups=groups, hosts=hosts, switches=(Switch(name="s", children=()),))


def test_find_cycle_self_loop_and_diamond():
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"top": ["l", "r"], "l": ["x"], "r": ["x"]}) is None


def test_multi_parent_tree_is_one_island_and_has_no_single_path():
    # slurmibtopology writes every spine over every leaf: a leaf with two parents
    text = ("tor_groups: [{name: l1, hosts: x1}, {name: l2, hosts: y1}]\n"
            "switches: [{name: s1, children: [l1, l2]}, {name: s2, children: [l1, l2]}]\n")
    c = parse_cluster(text, "t.yaml")
    assert c.islands() == (("l1", "l2"),) and roots(c) == ("s1", "s2")
    with pytest.raises(ValueError, match="'l1' has 2 parents"):
        path_to(c, "l1")
