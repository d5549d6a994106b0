"""Slurm topology.conf, tree and block plugins: what slurmctld accepts, refuses and warns about."""

from __future__ import annotations

import pytest

from rankmap.errors import SpecError
from rankmap.topology import parse_cluster
from rankmap.topology.slurm import export_slurm_tree, parse_slurm_tree
from rankmap.topology.slurm_block import export_slurm_block, parse_slurm_block
from rankmap.topology.slurmconf import slurm_hostlist, slurm_rejects
from rankmap.topology.sources import ImportOptions


def tree(text: str, **options):
    return parse_slurm_tree(text, "topology.conf", ImportOptions(**options))


def error(parse, text: str, **options) -> str:
    with pytest.raises(SpecError) as err:
        parse(text, "topology.conf", ImportOptions(**options))
    return str(err.value)


def test_keys_case_whitespace_comments_quotes_and_continuations():
    text = ("# comment line\n"
            "switchname = top   SWITCHES=\"l[1-2]\"  # trailing comment\n"
            "SwitchName=l1 \\\n"
            "    Nodes=n[01-02]\tlinkspeed=400\n"
            "\n"
            "SwitchName=l2\tNodes=n03\r\n")
    c = tree(text, rails=4, gpus=4, nic_gbps=400).cluster
    assert [(g.name, g.hosts, g.link_speed) for g in c.tor_groups] == [
        ("l1", ("n01", "n02"), 400), ("l2", ("n03",), None)]
    assert c.switches[0].name == "top" and c.switches[0].children == ("l1", "l2")
    assert c.host("n01").nics == 4 and c.links.nic_gbps == 400 and c.links.tor_downlink_gbps == 400


def test_escaped_hash_is_part_of_a_name():
    c = tree("SwitchName=s\\#1 Nodes=n1 # comment").cluster
    assert c.tor_groups[0].name == "s#1"
    out = export_slurm_tree(c)
    assert "SwitchName=s\\#1 Nodes=n1" in out and tree(out, name=c.name).cluster == c


def test_link_speed_kept_on_upper_switches_and_exported():
    text = "SwitchName=top Switches=l1 LinkSpeed=800\nSwitchName=l1 Nodes=n1 LinkSpeed=200\n"
    c = tree(text, name="t").cluster
    assert c.switches[0].link_speed == 800 and c.tor_groups[0].link_speed == 200
    out = export_slurm_tree(c)
    assert "SwitchName=top Switches=l1 LinkSpeed=800" in out and "SwitchName=l1 Nodes=n1 LinkSpeed=200" in out
    assert tree(out, name="t").cluster == c


def test_capacity_grows_to_the_leaf_size():
    c = tree("SwitchName=l1 Nodes=n[1-100]\nSwitchName=l2 Nodes=m[1-2]", capacity=64).cluster
    assert c.tor_group("l1").capacity == 100 and c.tor_group("l2").capacity == 64


def test_multi_parent_leaves_as_slurmibtopology_writes_them():
    text = "SwitchName=s1 Switches=l[1-2]\nSwitchName=s2 Switches=l[1-2]\nSwitchName=l1 Nodes=a1\nSwitchName=l2 Nodes=b1"
    result = tree(text)
    c = result.cluster
    assert len(c.islands()) == 1 and [s.name for s in c.switches] == ["s1", "s2"]
    assert tree(export_slurm_tree(c), name=c.name).cluster == c
    # said once, as Volcano refuses the shape and Slurm keeps one parent; an error with --strict
    assert [str(w) for w in result.warnings] == [
        "topology.conf:2: Switches=l[1-2]: switch l1 has 2 parents (s1 line 1, s2 line 2) (and 1 more switches): "
        "read as a fabric where each parent reaches it, not a tree; Slurm keeps only the last parent listed (s2) "
        "when it walks up the tree"]
    with pytest.raises(SpecError, match="switch l1 has 2 parents .* \\(an error with --strict\\)"):
        tree(text, strict=True)


@pytest.mark.parametrize("text,message", [
    ("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2",
     "topology.conf:2: SwitchName=a: Switch (a) has already been defined (line 1)"),
    ("SwitchName=a Nodes=n1 Switches=b\nSwitchName=b Nodes=n2",
     "topology.conf:1: Switches=b: switch a has both child switches and nodes"),
    ("SwitchName=top Switches=l[1-3]\nSwitchName=l1 Nodes=n1\nSwitchName=l2 Nodes=n2",
     "topology.conf:1: Switches=l[1-3]: Switch configuration top has invalid child (l3): no SwitchName line defines it"),
    ("SwitchName=a Switches=a", "topology.conf:1: Switches=a: Switch configuration a has invalid child (a)"),
    ("SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a",
     "topology.conf:1: Switches=b: Switch configuration is not a tree: it has a cycle a -> b -> c -> a"),
    ("SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[2-3]",
     "topology.conf:2: Nodes=n[2-3]: Multiple leaf switches contain nodes: n2 is under l1 (line 1) and l2"),
    ("# nothing\n\n", "topology.conf:2: No switches configured (no SwitchName= line)"),
    ("SwitchName=l1 Nodes=n[1-2", "topology.conf:1: Nodes=n[1-2: bad hostlist 'n[1-2': unbalanced brackets"),
    ("SwitchName=l1 Nodes=n1 LinkSpeed=fast",
     "topology.conf:1: LinkSpeed=fast: LinkSpeed must be an unsigned 32-bit integer, got 'fast'"),
    ("Nodes=n1 SwitchName=l1", "topology.conf:1: Nodes=n1: a line must start with SwitchName=, not Nodes="),
    ("BlockName=b1 Nodes=n1", "topology.conf:1: BlockName=b1: unknown key 'BlockName'"),
    ("SwitchName=" + "x" * 65 + " Nodes=n1", "topology.conf:1: SwitchName=" + "x" * 65 + ": bad switch name: switch "
     "names must be shorter than 64 characters (65 given)"),
    ("SwitchName=l1 Nodes=bad_host", "topology.conf:1: Nodes=bad_host: bad host 'bad_host'"),
    ("SwitchName=top Switches=l1,l1\nSwitchName=l1 Nodes=n1", "topology.conf:1: Switches=l1,l1: 'l1' is listed twice"),
])
def test_errors_like_slurmctld(text, message):
    assert error(parse_slurm_tree, text).startswith(message)


def test_empty_leaf_is_a_warning_and_an_error_with_strict():
    text = "SwitchName=top Switches=l[1-2]\nSwitchName=l1 Nodes=n1\nSwitchName=l2"
    r = tree(text)
    assert [str(w) for w in r.warnings] == [
        "topology.conf:3: SwitchName=l2: switch l2 has neither Nodes= nor Switches= (an empty leaf switch)"]
    assert r.cluster.tor_group("l2").hosts == ()
    assert error(parse_slurm_tree, text, strict=True).endswith("(an error with --strict)")
    assert tree(export_slurm_tree(r.cluster), name=r.cluster.name).cluster == r.cluster


def test_known_hosts_find_hosts_under_no_leaf_and_unknown_names():
    text = "SwitchName=l1 Nodes=n[1-3]\nSwitchName=l2 Nodes=m1"
    r = tree(text, hosts=("n1", "n2", "m1", "x7", "x8"))
    assert [str(w) for w in r.warnings] == [
        "topology.conf:1: l1: Invalid hostnames in switch configuration: n3 (not in --hosts; left out)",
        "topology.conf:1: switches lack access to 2 nodes: x[7-8] (hosts under no leaf are left out)"]
    assert [h.name for h in r.cluster.hosts] == ["n1", "n2", "m1"]
    assert "lack access" in error(parse_slurm_tree, "SwitchName=l1 Nodes=n1", hosts=("n1", "n2"), strict=True)


def test_hostlist_text_after_bracket_depends_on_the_slurm_release():
    # Slurm reads text after a bracket from 23.02.5 on; earlier releases refuse it.
    for version in ("23.02.5", "24.11", "25.05"):
        r = tree("SwitchName=l1 Nodes=ip-10-[1-2]-5", slurm_version=version)
        assert [h.name for h in r.cluster.hosts] == ["ip-10-1-5", "ip-10-2-5"]
        assert r.warnings == ()
    for version in ("22.05", "23.02.4"):
        r = tree("SwitchName=l1 Nodes=ip-10-[1-2]-5", slurm_version=version)
        assert [h.name for h in r.cluster.hosts] == ["ip-10-1-5", "ip-10-2-5"]
        assert f"slurmctld {version} cannot read 'ip-10-[1-2]-5'" in str(r.warnings[0])


def test_export_uses_only_hostlists_slurm_reads():
    names = ["ip-10-20-6-18", "ip-10-25-6-18", "ip-10-20-1-4", "ip-10-20-1-16"]
    assert slurm_hostlist(names) == "ip-10-20-1-[4,16],ip-10-20-6-18,ip-10-25-6-18"
    assert slurm_rejects("ip-10-[20,25]-6-18") == "ip-10-[20,25]-6-18"
    c = parse_cluster("tor_groups: [{name: g, hosts: [" + ", ".join(names) + "]}]", "c.yaml")
    out = export_slurm_tree(c)
    assert slurm_rejects(out.splitlines()[1].split("Nodes=")[1]) is None


def test_export_of_a_spine_cluster_adds_one_root_named_after_the_spine():
    c = parse_cluster("tor_groups: [{name: spine, hosts: a1}, {name: g2, hosts: b1}]", "c.yaml")
    out = export_slurm_tree(c)
    assert out.splitlines()[-1] == "SwitchName=spine1 Switches=g2,spine"
    back = tree(out).cluster
    assert len(back.islands()) == 1 and back.switches[0].children == ("g2", "spine")


def test_names_slurm_cannot_read_are_refused_at_load():  # the name grammar (rankmap.names) comes first
    with pytest.raises(SpecError, match=r"c.yaml:1: tor_groups\[0\].name: bad ToR group name 'a,b'"):
        parse_cluster("tor_groups: [{name: 'a,b', hosts: a1}]", "c.yaml")


# -- topology/block ---------------------------------------------------------------------------

def block(text: str, **options):
    return parse_slurm_block(text, "topology.conf", ImportOptions(**options))


def test_block_default_sizes_are_slurms():
    text = "\n".join(f"BlockName=b{i} Nodes=r{i}n[1-2]" for i in range(1, 6))
    c = block(text).cluster
    assert c.block_sizes == (2, 4, 8, 16)  # 1, 2, 4, 8 blocks: 8 >= 5 blocks ends the list


def test_block_sizes_past_all_blocks_are_a_warning():
    r = block("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\nBlockSizes=2,4,8,16")
    assert r.cluster.block_sizes == (2, 4)
    assert str(r.warnings[0]) == ("topology.conf:3: BlockSizes=2,4,8,16: BlockSizes 8,16 exceed the 2 blocks: "
                                  "slurmctld ignores them")


@pytest.mark.parametrize("text,message", [
    ("BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2", "topology.conf:2: BlockName=b1: Block (b1) has already been defined"),
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12", "topology.conf:2: BlockSizes=4,12: Invalid BlockSizes value: 12"),
    ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,x", "topology.conf:2: BlockSizes=4,x: Invalid BlockSizes value: 'x'"),
    ("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[2-3]", "topology.conf:2: Nodes=n[2-3]: host n2 is in block b1"),
    ("BlockSizes=4\nBlockSizes=8\nBlockName=b1 Nodes=n[1-4]", "topology.conf:2: BlockSizes=8: BlockSizes is given twice"),
    ("BlockSizes=4", "topology.conf:1: No blocks configured"),
    ("SwitchName=s1 Nodes=n1", "topology.conf:1: SwitchName=s1: unknown key 'SwitchName'"),
    ("BlockName=b1 Nodes=n[1-4] BlockSizes=4", "topology.conf:1: BlockSizes=4: BlockSizes= stands alone"),
])
def test_block_errors(text, message):
    assert error(parse_slurm_block, text).startswith(message)


@pytest.mark.parametrize("version", ["23.11", "24.11"])
def test_block_rules_before_25_05(version):
    # Before 25.05 slurmctld refuses a block without nodes and one smaller than the base size.
    assert error(parse_slurm_block, "BlockName=b1", slurm_version=version).startswith(
        "topology.conf:1: BlockName=b1: block b1 hasn't got nodes")
    assert error(parse_slurm_block, "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=m[1-2]\nBlockSizes=4",
                 slurm_version=version).startswith(
        "topology.conf:2: BlockName=b2: Block configuration (b2) children count lower than the base block size")
    c = parse_cluster("tor_groups: [{name: b1, hosts: 'n[1-4]'}, {name: b2, hosts: 'm[1-2]'}]\n"
                      "block_sizes: [4, 8]", "c.yaml")
    with pytest.raises(SpecError, match=f"slurmctld {version} would refuse it"):
        export_slurm_block(c, slurm_version=version)


def test_block_relaxations_of_25_05():
    # 25.05: a block may be smaller than the base block size; a block without nodes is a placeholder.
    r = block("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=m[1-2]\nBlockName=b3\nBlockName=b4 Nodes=k[1-4]\n"
              "BlockSizes=4,8,16")
    assert [(g.name, len(g.hosts)) for g in r.cluster.tor_groups] == [("b1", 4), ("b2", 2), ("b3", 0), ("b4", 4)]
    assert r.cluster.block_sizes == (4, 8, 16)
    out = export_slurm_block(r.cluster)
    assert out.splitlines()[1:] == ["BlockName=b1 Nodes=n[1-4]", "BlockName=b2 Nodes=m[1-2]", "BlockName=b3",
                                    "BlockName=b4 Nodes=k[1-4]", "BlockSizes=4,8,16"]
    assert block(out, name=r.cluster.name).cluster == r.cluster


def test_block_export_of_a_plain_cluster_and_back():
    c = parse_cluster("tor_groups: [{name: b1, hosts: 'n[1-3]'}, {name: b2, hosts: 'n[4-5]'}, "
                      "{name: b3, hosts: 'n[6-7]'}]", "c.yaml")
    out = export_slurm_block(c)
    assert out.splitlines()[-1] == "BlockSizes=2,4,8"  # 1, 2 and 4 base blocks: 4 covers all 3
    back = block(out, name="cluster").cluster
    assert back.block_sizes == (2, 4, 8) and [g.hosts for g in back.tor_groups] == [g.hosts for g in c.tor_groups]


def test_12k_gpu_topology_conf_imports_well_under_two_seconds(tmp_path):
    import importlib.util
    import time
    from pathlib import Path

    from rankmap.topology.importers import import_file

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "topo_import.py"
    spec = importlib.util.spec_from_file_location("topo_import_bench", bench)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "topology.conf"
    path.write_text(module.topology_conf("address"))
    t0 = time.perf_counter()
    c = import_file("slurm", path, ImportOptions(gpus=8, rails=8)).cluster
    elapsed = time.perf_counter() - t0
    assert c.gpus == 12288 and len(c.tor_groups) == 24 and {len(g.hosts) for g in c.tor_groups} == {64}
    assert elapsed < 2.0


def test_import_summary_counts_the_tiers_it_lists():
    from pathlib import Path

    from rankmap.topology.summary import summarize
    path = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "slurm-block.conf"
    lines = summarize(parse_slurm_block(path.read_text(), str(path), ImportOptions()))
    listed = [line for line in lines if line.startswith("tier ")]
    assert "tiers: 3 (rail ToRs and 2 tiers above: block8, block16)" in lines
    assert [line.split(":")[0] for line in listed] == ["tier 0 ToR", "tier 1 block8", "tier 2 block16"]
    plain = summarize(parse_slurm_block("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\nBlockSizes=2,4\n",
                                        "topology.conf", ImportOptions()))
    assert "tiers: 2 (rail ToRs and 1 tier above: block4)" in plain
    assert sum(line.startswith("tier ") for line in plain) == 2


def test_block_export_names_levels_that_join_parts_of_different_pods():
    from rankmap.topology import load_cluster
    from rankmap.topology.slurm_block import mixed_blocks

    # 4 pods of 6 ToR groups of 64 hosts: BlockSizes 64, 128, 256, ... as runs of 1, 2, 4, ... groups
    c = load_cluster("examples/oversubscribed-core/cluster.yaml")
    lines = mixed_blocks(c)
    assert [line.split(":")[0] for line in lines] == ["BlockSizes level 256 hosts", "BlockSizes level 512 hosts",
                                                      "BlockSizes level 1024 hosts"]
    assert lines[0].startswith("BlockSizes level 256 hosts: 2 of 6 blocks join parts of different pod1, pod2, pod3, "
                               "pod4 domains across tier 'core', e.g. tg04+tg05+tg06+tg07: part of pod1 (tg04, tg05), "
                               "part of pod2 (tg06, tg07)")
    # pods of 4 groups are runs of 2**k groups: nothing to report; nor on a one-tier fabric
    assert mixed_blocks(load_cluster("examples/megascale-3tier/cluster.yaml")) == []
    assert mixed_blocks(load_cluster("examples/racks/cluster.yaml")) == []
