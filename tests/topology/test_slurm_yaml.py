"""Slurm 25.05 topology.yaml: import (the default or a named topology), export, round trips.

No slurmctld 25.05 runs here (Debian's 22.05 has no topology.yaml), so the exported files
are checked against the documented grammar (topology.yaml(5)) and read back.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rankmap.errors import SpecError
from rankmap.topology import parse_cluster
from rankmap.topology.importers import detect_format, import_file, import_text
from rankmap.topology.slurm import parse_slurm_tree
from rankmap.topology.slurm_yaml import parse_slurm_yaml
from rankmap.topology.slurm_yaml_export import export_slurm_yaml
from rankmap.topology.sources import ImportOptions
from rankmap.topology.spec import cluster_to_yaml
from rankmap.yamlio import parse_yaml

CASE = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2" / "slurm-topology-yaml"


def read(text: str, **options):
    return parse_slurm_yaml(text, "topology.yaml", ImportOptions(**options))


def error(text: str, **options) -> str:
    with pytest.raises(SpecError) as err:
        read(text, **options)
    return str(err.value)


def test_field_case_default_tree_both_spellings_of_the_format():
    # README: --from slurm (or slurm-yaml) imports the default tree: leaf1 = gpu-[001-004], leaf2 = gpu-[005-008].
    for fmt in ("slurm", "slurm-yaml"):
        r = import_file(fmt, CASE / "topology.yaml")
        c = r.cluster
        assert r.format == "slurm-yaml" and c.name == "fabric"
        assert [(g.name, g.hosts) for g in c.tor_groups] == [
            ("leaf1", ("gpu-001", "gpu-002", "gpu-003", "gpu-004")),
            ("leaf2", ("gpu-005", "gpu-006", "gpu-007", "gpu-008"))]
        assert [(s.name, s.children) for s in c.switches] == [("spine", ("leaf1", "leaf2"))]
        assert r.notes[0] == ("topology.yaml: read topology 'fabric' (tree, cluster_default); "
                              "also in the file: nvl (block)")
    assert detect_format((CASE / "topology.yaml").read_text()) == "slurm-yaml"


def test_field_case_topology_flag_picks_the_block_topology():
    r = import_file("slurm", CASE / "topology.yaml", ImportOptions(topology="nvl"))
    c = r.cluster
    assert c.name == "nvl" and c.block_sizes == (2, 4)
    assert [(g.name, g.hosts) for g in c.tor_groups] == [("b1", ("gpu-001", "gpu-002")), ("b2", ("gpu-003", "gpu-004"))]
    with pytest.raises(SpecError, match=r"no topology named 'spine' \(the file has: fabric, nvl\)"):
        import_file("slurm", CASE / "topology.yaml", ImportOptions(topology="spine"))


def test_field_case_export_writes_the_same_topologies_back():
    """Import then export keeps every topology of the file, in file order, with its cluster_default."""
    text = (CASE / "topology.yaml").read_text()
    theirs = [_plain(e) for e in parse_yaml(text)]
    for name in ("fabric", "nvl"):
        c = read(text, topology=name).cluster
        assert [(t.name, t.position, t.default) for t in c.slurm_topologies] == \
            ([("nvl", 1, False)] if name == "fabric" else [("fabric", 0, True)])
        assert parse_cluster(cluster_to_yaml(c), "c.yaml") == c          # the cluster spec keeps them too
        out = export_slurm_yaml(c)
        assert read(out, topology=name).cluster == c
        mine = [_plain(e) for e in parse_yaml(out)]
        assert [(e["topology"], e["cluster_default"]) for e in mine] == [("fabric", True), ("nvl", False)]
        assert mine[1] == theirs[1]                                      # the block topology, as written
        assert sorted(map(str, mine[0]["tree"]["switches"])) == sorted(map(str, theirs[0]["tree"]["switches"]))


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def test_other_topologies_of_the_file_are_checked_too():
    text = (CASE / "topology.yaml").read_text().replace("block: b2\n        nodes: gpu-[003-004]",
                                                         "block: b2\n        nodes: gpu-[002-004]")
    with pytest.raises(SpecError, match=r"gpu-002"):
        read(text)                                                       # slurmctld refuses the whole file


def test_same_tree_as_topology_conf():
    yaml_text = ("- topology: t\n  tree:\n    switches:\n      - switch: top\n        children: [sp1, sp2]\n"
                 "      - switch: sp1\n        children: l[1-2]\n      - switch: sp2\n        children: l3\n"
                 "      - switch: l1\n        nodes: a[1-2]\n        link_speed: 400\n"
                 "      - switch: l2\n        nodes: b[1-2]\n      - switch: l3\n        nodes: c1\n")
    conf = ("SwitchName=top Switches=sp[1-2]\nSwitchName=sp1 Switches=l[1-2]\nSwitchName=sp2 Switches=l3\n"
            "SwitchName=l1 Nodes=a[1-2] LinkSpeed=400\nSwitchName=l2 Nodes=b[1-2]\nSwitchName=l3 Nodes=c1\n")
    r = read(yaml_text)
    assert r.notes[0].startswith("topology.yaml: read topology 't' (tree, the first; none has cluster_default")
    assert r.cluster == parse_slurm_tree(conf, "topology.conf", ImportOptions(name="t")).cluster
    assert read(export_slurm_yaml(r.cluster)).cluster == r.cluster


def test_two_cluster_defaults_are_refused_naming_both_lines_and_flat_needs_hosts():
    """slurmctld takes the first cluster_default silently (topology.yaml(5)); which was meant is a
    guess, so the import refuses unless --topology picks one."""
    text = ("- topology: a\n  flat: true\n- topology: b\n  cluster_default: true\n  flat: true\n"
            "- topology: c\n  cluster_default: true\n  block:\n    blocks:\n      - block: x\n        nodes: n[1-2]\n")
    assert error(text) == ("topology.yaml:7: [2].cluster_default: topologies 'b' (line 4) and 'c' (line 7) both have "
                           "cluster_default: true; slurmctld would use the first one silently: set it on one "
                           "topology, or pick one with --topology NAME")
    assert "topology.yaml:5: [1].flat: topology 'b' is flat: it lists no nodes" in error(text, topology="b")
    c = read(text, hosts=("n1", "n2", "n3"), topology="b").cluster
    assert c.name == "b" and [g.hosts for g in c.tor_groups] == [("n1", "n2", "n3")]
    assert read(text, topology="c").cluster.block_sizes == (2,)
    one = text.replace("  cluster_default: true\n  block", "  block")
    assert read(one, hosts=("n1", "n2", "n3")).cluster.name == "b"  # the one cluster_default


def test_block_relaxations_of_25_05_in_yaml():
    text = ("- topology: nv\n  block:\n    block_sizes: [4, 8]\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n"
            "      - block: b2\n        nodes: m[1-3]\n      - block: b3\n")
    c = read(text).cluster
    assert [(g.name, len(g.hosts)) for g in c.tor_groups] == [("b1", 4), ("b2", 3), ("b3", 0)]
    out = export_slurm_yaml(c)
    assert out.splitlines()[-7:] == ["    block_sizes: [4, 8]", "    blocks:", "      - block: b1",
                                     "        nodes: n[1-4]", "      - block: b2", "        nodes: m[1-3]",
                                     "      - block: b3"]
    assert read(out).cluster == c


@pytest.mark.parametrize("text,message", [
    ("topology: a\n", "topology.yaml:1: expected a list of topologies"),
    ("- cluster_default: true\n  topology: a\n  flat: true\n", "topology.yaml:1: [0].cluster_default: 'topology' must be the first key"),
    ("- topology: a\n", "topology.yaml:1: [0].topology: topology 'a' must define exactly one of tree, block or flat"),
    ("- topology: a\n  flat: true\n  tree: {switches: []}\n", "topology.yaml:1: [0].topology: topology 'a' must define exactly one of tree, block or flat (got tree, flat)"),
    ("- topology: a\n  flat: true\n- topology: a\n  flat: true\n", "topology.yaml:3: [1].topology: topology 'a' is defined twice (first on line 1)"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s\n        nodes: n1\n        speed: 4\n", "topology.yaml:6: [0].tree.switches[0].speed: unknown key 'speed'"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s\n        children: l1\n", "topology.yaml:4: children: l1: Switch configuration s has invalid child (l1)"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s\n        nodes: n1\n      - switch: s\n        nodes: n2\n", "topology.yaml:6: switch: s: Switch (s) has already been defined (line 4)"),
    ("- topology: a\n  block:\n    block_sizes: [2, 3]\n    blocks:\n      - block: b\n        nodes: n[1-2]\n", "topology.yaml:3: block_sizes: [2,3]: Invalid BlockSizes value: 3"),
    ("- topology: a\n  cluster_default: maybe\n  flat: true\n", "topology.yaml:2: [0].cluster_default: expected true or false"),
])
def test_errors_name_line_and_key(text, message):
    assert error(text).startswith(message)


def test_older_slurm_targets_refuse_topology_yaml():
    text = (CASE / "topology.yaml").read_text()
    assert "topology.yaml is read by Slurm 25.05 and later, the target is 24.11" in error(text, slurm_version="24.11")
    with pytest.raises(SpecError, match="Slurm 24.11 does not read topology.yaml"):
        export_slurm_yaml(read(text).cluster, slurm_version="24.11")




def test_export_of_a_plain_cluster_quotes_only_what_yaml_would_misread():
    c = parse_cluster("name: '2025'\ntor_groups: [{name: 'true', hosts: 'n[1-2]'}, {name: l2, hosts: n3}]", "c.yaml")
    out = export_slurm_yaml(c)
    assert '- topology: "2025"' in out and '      - switch: "true"' in out
    back = read(out)
    assert back.cluster.name == "2025" and [g.name for g in back.cluster.tor_groups] == ["l2", "true"]
    assert import_text("slurm-yaml", out, "t.yaml").cluster.host("n3").tor_group == "l2"


def test_cli_import_and_export_round_trip(tmp_path):
    cli = [sys.executable, "-m", "rankmap"]
    out = tmp_path / "c.yaml"
    run = subprocess.run(cli + ["topo", "import", "--from", "slurm", str(CASE / "topology.yaml"), "--topology",
                                "nvl", "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    back = tmp_path / "topology.yaml"
    run = subprocess.run(cli + ["topo", "export", "--to", "slurm-yaml", str(out), "--out", str(back)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert read(back.read_text(), topology="nvl").cluster.block_sizes == (2, 4)
    assert [e["topology"] for e in parse_yaml(back.read_text())] == ["fabric", "nvl"]   # nothing dropped
    run = subprocess.run(cli + ["topo", "export", "--to", "slurm-block", str(out), "--out", str(tmp_path / "b.conf")],
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stderr == (
        "rankmap: warning: --to slurm-block writes one topology: fabric (tree) of the imported topology.yaml is left "
        "out (--to slurm-yaml keeps it)\n")                                       # never dropped silently
    bad = subprocess.run(cli + ["topo", "show", str(CASE / "topology.yaml"), "--topology", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 3 and "no topology named 'x'" in bad.stderr and "Traceback" not in bad.stderr


def test_text_after_a_bracket_is_read_in_topology_yaml_and_written_back_portably():
    # Slurm >= 23.02.5 reads ip-10-[1-2]-5; topology.yaml needs 25.05, so no warning. The export writes
    # brackets around trailing digits only (what every release reads), and expands to the same hosts.
    text = "- topology: t\n  tree:\n    switches:\n      - switch: l1\n        nodes: ip-10-[1-2]-5\n"
    r = read(text)
    assert [h.name for h in r.cluster.hosts] == ["ip-10-1-5", "ip-10-2-5"] and r.warnings == ()
    out = export_slurm_yaml(r.cluster)
    assert "        nodes: ip-10-1-5,ip-10-2-5" in out and read(out).cluster == r.cluster


@pytest.mark.parametrize("item,message", [
    ("  - topology: x\n    position: 1\n    flat: true\n    color: red\n",
     "c.yaml:7: slurm_topologies[0].color: unknown key 'color'"),
    ("  - topology: x\n    flat: true\n", "c.yaml:4: slurm_topologies[0].position: required key is missing"),
    ("  - topology: x\n    position: 1\n    block: {blocks: [{block: b, nodez: n1}]}\n",
     "c.yaml:6: slurm_topologies[0].block.blocks[0].nodez: unknown key 'nodez'"),
])
def test_kept_topologies_in_a_cluster_spec_are_checked(item, message):
    with pytest.raises(SpecError) as err:
        parse_cluster("name: c\ntor_groups: [{name: l1, hosts: n1}]\nslurm_topologies:\n" + item, "c.yaml")
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("fmt", ["slurm-yaml", "slurm", "slurm-block"])
def test_an_export_of_a_cluster_keeping_several_topologies_imports_back_as_the_same_cluster(tmp_path, fmt):
    """The embedded spec comment stores the kept topologies with sorted keys; reading it back must not
    demand the file's key order ('topology' first), which only a topology.yaml itself must follow."""
    cli = [sys.executable, "-m", "rankmap"]
    first = tmp_path / "a.yaml"
    run = subprocess.run(cli + ["topo", "import", "--from", "slurm-yaml", str(CASE / "topology.yaml"), "--out",
                                str(first)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    exported, again = tmp_path / "exported", tmp_path / "b.yaml"
    run = subprocess.run(cli + ["topo", "export", "--to", fmt, str(first), "--out", str(exported)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run = subprocess.run(cli + ["topo", "import", "--from", fmt, str(exported), "--out", str(again)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    body = lambda p: [ln for ln in p.read_text().splitlines() if not ln.startswith("#")]   # noqa: E731
    assert body(again) == body(first)
