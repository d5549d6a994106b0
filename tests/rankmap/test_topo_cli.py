"""``rankmap topo import | show | export`` end to end (through ``rankmap.cli.main``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankmap.cli import main as rankmap_main
from rankmap.cli import topo as topo_cli
from rankmap.topology import load_cluster
from rankmap.topology.importers import EXPORT_FORMATS, IMPORT_FORMATS, detect_format
from rankmap.topology.tree import roots

CASES = Path(__file__).resolve().parents[1] / "data" / "field-cases"


def main(argv: list[str]) -> int:
    return rankmap_main(["topo", *argv])


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_formats_match_the_library():
    assert topo_cli.IMPORT_FORMATS == IMPORT_FORMATS and topo_cli.EXPORT_FORMATS == EXPORT_FORMATS


def test_import_writes_a_cluster_spec_with_rails_and_speeds(tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    code, stdout, stderr = run(capsys, "import", "--from", "slurm", str(CASES / "slurm-tree-forward-refs.conf"),
                               "--rails", "4", "--gpus", "8", "--nic-gbps", "400", "--name", "fr", "--out", str(out))
    assert code == 0 and stderr == ""
    assert "ToR groups: 4: leaf1 2 hosts" in stdout and "tiers: 3" in stdout
    c = load_cluster(out)
    assert c.name == "fr" and c.rails == 4 and c.links.nic_gbps == 400 and roots(c) == ("core1",)
    assert out.read_text().startswith("# Imported by rankmap topo import --from slurm")


def test_export_then_import_gives_the_same_cluster(tmp_path, capsys):
    spec = tmp_path / "islands.yaml"
    assert main(["import", "--from", "slurm", str(CASES / "slurm-islands.conf"), "--name", "isl",
                 "--out", str(spec)]) == 0
    conf = tmp_path / "topology.conf"
    code, stdout, _ = run(capsys, "export", "--to", "slurm", str(spec), "--out", str(conf))
    assert code == 0 and "3 ToR groups, 2 islands" in stdout
    again = tmp_path / "again.yaml"
    assert main(["import", "--from", "slurm", str(conf), "--name", "isl", "--out", str(again)]) == 0
    assert load_cluster(again) == load_cluster(spec)


def test_k8s_export_to_stdout(capsys):
    code, stdout, _ = run(capsys, "export", "--to", "k8s-labels", "examples/racks/cluster.yaml", "--out", "-",
                          "--levels", "example.com/fabric,example.com/rack")
    assert code == 0
    items = json.loads(stdout)["items"]
    assert len(items) == 64 and items[0]["metadata"]["labels"]["example.com/rack"] == "rack1"


def test_show_guesses_the_format(capsys):
    code, stdout, _ = run(capsys, "show", str(CASES / "slurm-block.conf"))
    assert code == 0 and "Slurm topology/block" in stdout and "block level of 8 hosts: 2 aggregated blocks" in stdout
    code, stdout, _ = run(capsys, "show", "examples/racks/cluster.yaml")
    assert code == 0 and "rankmap cluster spec" in stdout and "ToR groups: 4: rack1 16 hosts" in stdout


def test_warnings_go_to_stderr_and_strict_refuses_them(tmp_path, capsys):
    conf = tmp_path / "t.conf"
    conf.write_text("SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2\n")
    out = tmp_path / "c.yaml"
    code, stdout, stderr = run(capsys, "import", "--from", "slurm", str(conf), "--out", str(out))
    assert code == 0 and out.exists() and "warnings: 1" in stdout
    assert stderr == f"rankmap: warning: {conf}:2: SwitchName=l2: switch l2 has neither Nodes= nor Switches= " \
                     "(an empty leaf switch)\n"
    assert "switch l2 has neither" not in stdout  # once, on stderr: a terminal showed it twice
    out.unlink()
    code, stdout, stderr = run(capsys, "import", "--from", "slurm", str(conf), "--strict", "--out", str(out))
    assert code == 3 and not out.exists() and stdout == ""
    assert stderr.endswith("(an error with --strict)\n") and stderr.count("\n") == 1


def test_hosts_from_a_file_and_kueue_levels(tmp_path, capsys):
    hosts = tmp_path / "hosts"
    hosts.write_text("gpu-a[01-04] # rack a\ngpu-b[01-04],gpu-c01\n")
    code, stdout, stderr = run(capsys, "show", str(CASES / "slurm-tree-forward-refs.conf"), "--hosts", f"@{hosts}")
    assert code == 0 and "switches lack access to 1 nodes: gpu-c01" in stderr
    topo = tmp_path / "topology.yaml"
    topo.write_text("kind: Topology\nspec:\n  levels:\n  - nodeLabel: topology.k8s.aws/network-node-layer-1\n"
                    "  - nodeLabel: topology.k8s.aws/network-node-layer-2\n")
    code, stdout, _ = run(capsys, "show", str(CASES / "k8s-nodes-aws-layers.json"), "--kueue-topology", str(topo))
    assert code == 0 and "ToR groups: 2: nn-top0001/nn-mid0001 3 hosts, nn-top0001/nn-mid0002 1 host" in stdout


@pytest.mark.parametrize("argv,message", [
    (["show", "missing.conf"], "rankmap: error: missing.conf: cannot read file: No such file or directory"),
    (["show", "tests/data/field-cases/README.md"],
     "rankmap: error: tests/data/field-cases/README.md:1: cannot tell the format of this file: pass --from"),
    (["export", "--to", "slurm-block", "examples/racks/cluster.yaml", "--out", "-", "--levels", "a"],
     "rankmap: error: --levels applies to --to k8s-labels only"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    code, _, stderr = run(capsys, *argv)
    assert code == 3 and stderr == message + "\n"


def test_strict_export_refuses_a_block_topology_that_joins_parts_of_pods(tmp_path, capsys):
    # 4 pods of 6 ToR groups: block levels of 4, 8 and 16 groups cut pods (3 warnings)
    spec, conf = "examples/oversubscribed-core/cluster.yaml", tmp_path / "topology.conf"
    code, stdout, stderr = run(capsys, "export", "--to", "slurm-block", spec, "--out", str(conf), "--strict")
    assert code == 3 and stdout == "" and stderr.count("\n") == 1 and not conf.exists()
    assert stderr.startswith(f"rankmap: error: {spec}: BlockSizes level 256 hosts: 2 of 6 blocks join "
                             "parts of different pod1, pod2, pod3, pod4 domains across tier 'core'")
    assert stderr.endswith("Slurm would pack a job there as if it were local (an error with --strict; 2 more "
                           "warnings)\n")
    code, stdout, stderr = run(capsys, "export", "--to", "slurm-block", spec, "--out", "-", "--strict")
    assert code == 3 and stdout == ""                       # nothing on stdout either
    code, _, stderr = run(capsys, "export", "--to", "slurm-block", spec, "--out", str(conf))
    assert code == 0 and conf.exists() and stderr.count("rankmap: warning: BlockSizes level ") == 3
    # pods of 4 ToR groups are whole blocks: nothing to refuse
    code, _, stderr = run(capsys, "export", "--to", "slurm-block", "examples/megascale-3tier/cluster.yaml", "--out",
                          str(tmp_path / "ok.conf"), "--strict")
    assert code == 0 and stderr == "" and (tmp_path / "ok.conf").exists()


def test_strict_export_refuses_to_drop_kept_slurm_topologies(tmp_path, capsys):
    spec = tmp_path / "c.yaml"
    assert main(["import", "--from", "slurm", str(CASES / "turn2" / "slurm-topology-yaml" / "topology.yaml"),
                 "--topology", "nvl", "--out", str(spec)]) == 0
    capsys.readouterr()
    code, _, stderr = run(capsys, "export", "--to", "slurm-block", str(spec), "--out", str(tmp_path / "b.conf"),
                          "--strict")
    assert code == 3 and not (tmp_path / "b.conf").exists()
    assert stderr == (f"rankmap: error: {spec}: --to slurm-block writes one topology: fabric (tree) "
                      "of the imported topology.yaml is left out (--to slurm-yaml keeps it) (an error with --strict)\n")
    code, _, stderr = run(capsys, "export", "--to", "slurm-yaml", str(spec), "--out", str(tmp_path / "t.yaml"),
                          "--strict")
    assert code == 0 and stderr == ""                       # slurm-yaml keeps every topology


def test_import_refuses_to_overwrite_its_input(tmp_path, capsys):
    conf = tmp_path / "t.conf"
    conf.write_text("SwitchName=l1 Nodes=n1\n")
    code, _, stderr = run(capsys, "import", "--from", "slurm", str(conf), "--out", str(conf))
    assert code == 2 and "refusing to overwrite it" in stderr and conf.read_text() == "SwitchName=l1 Nodes=n1\n"


def test_bad_option_values_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["import", "--from", "slurm", "x.conf", "--rails", "0", "--out", "c.yaml"])
    assert exit_.value.code == 2 and "expected a positive integer, got '0'" in capsys.readouterr().err


def test_detect_format():
    assert detect_format("# x\n  SwitchName=s1 Nodes=n1\n") == "slurm"
    assert detect_format("BlockSizes=4\n") == "slurm-block"
    assert detect_format('{"items": []}') == "k8s-labels"
    assert detect_format("apiVersion: v1\nkind: List\nitems: []\n") == "k8s-labels"
    assert detect_format("kind: HyperNode\nmetadata: {name: a}\n") == "volcano"
    assert detect_format("name: c\ntor_groups: []\n") == "cluster"
    assert detect_format("n1 slots=8\nn2:4\nn3\n") == "hostfile"
    assert detect_format("# only comments\n") is None and detect_format("some words here\n") is None
    assert detect_format("Some prose\n```\ntor_groups: []\n```\n") is None
