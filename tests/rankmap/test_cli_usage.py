"""Flags that would do nothing, or something else than asked, are usage errors (exit 2) naming
the flag and its value; outputs of a new plan never sit beside files of an older one.

The cases of the fresh-user report: empty hostlists, ``--example`` beside the files it would
replace, objectives that score every placement the same, ``--out`` values that are no folder,
``--help`` into a full standard output, launch flags of another mode, the gap without a bound.
"""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from helpers import usage_error

from rankmap.cli import main
from rankmap.examples import DEFAULT_EXAMPLE, example_inputs

RACKS_CLUSTER, RACKS_JOB = example_inputs("racks", None, None)


def rankmap(*args, cwd=None, stdout=subprocess.PIPE):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=cwd, timeout=300)




@pytest.fixture
def racks_map(racks_plan):
    """The racks example planned with dp=2 (8 hosts)."""
    return racks_plan(2)


@pytest.mark.parametrize("argv, message", [
    (("plan", "--example", "racks", "--hosts", ""), "argument --hosts: no hosts given (got '')"),
    (("plan", "--example", "racks", "--hosts", " , "), "argument --hosts: no hosts given"),
    (("plan", "--example", "racks", "--exclude", ""), "argument --exclude: no hosts given"),
    (("topo", "import", "--from", "slurm", "t.conf", "--hosts", "", "--out", "c.yaml"), "argument --hosts: no hosts"),
    (("node-rank", "--rankmap", "m.json", "--host", ""), "argument --host: no host given (got '')"),
    (("node-rank", "--rankmap", "m.json", "--host", "n1", "--master-addr", " "), "argument --master-addr: no host"),
    (("launch", "--rankmap", "m.json", "--format", "slurm", "--master-addr", ""), "argument --master-addr: no host"),
    (("plan", "--example", "racks", "--cluster", RACKS_CLUSTER, "--job", RACKS_JOB),
     "--example racks conflicts with --cluster and --job"),
    (("simulate", "--example", "racks", "--cluster", RACKS_CLUSTER, "--job", RACKS_JOB),
     "--example racks conflicts with --cluster and --job"),
    (("simulate", "--example", "racks", "--cluster", RACKS_CLUSTER, "--rankmap", "m.json"),
     "--example racks conflicts with --cluster and --rankmap"),
    # half an example mixed with another file: refused too (the job of one, the cluster of another)
    (("plan", "--cluster", RACKS_CLUSTER, "--example", "racks"), "rankmap: error: --example racks conflicts with "
     "--cluster: an example is a cluster and its job together; give --example alone, or the files"),
    (("simulate", "--example", "racks", "--job", RACKS_JOB), "--example racks conflicts with --job: an example is"),
    (("plan", "--example", "racks", "--objective", "moved"), "--objective moved: 'moved' counts hosts changed against "
                                                             "--previous; give --previous"),
    (("plan", "--example", "racks", "--objective", "tiers=0"), "argument --objective: every weight of 'tiers=0' is 0"),
    (("plan", "--example", "racks", "--objective", "tiers=0,uplink=0.0"), "is 0, so the weighted terms score every"),
    (("plan", "--example", "racks", "--objective", "tiers=-1"), "argument --objective: bad term 'tiers=-1'"),
    (("plan", "--example", "racks", "--objective", ""), "argument --objective: no objectives given (got '')"),
    # every comma-list flag reads its items through one helper: no empty item, no item twice
    (("plan", "--example", "racks", "--objective", "tiers,tiers"),
     "argument --objective: 'tiers' is given twice in 'tiers,tiers' (items 1 and 2)"),
    (("plan", "--example", "racks", "--objective", "uplink,tiers=1,tiers=2"),
     "argument --objective: 'tiers' is given twice in 'uplink,tiers=1,tiers=2' (items 2 and 3)"),
    (("plan", "--example", "racks", "--objective", "tiers,"), "argument --objective: item 2 of 'tiers,' is empty"),
    (("plan", "--example", "racks", "--tier-weights="), "argument --tier-weights: no tier weights given (got '')"),
    (("plan", "--example", "racks", "--tier-weights", "spine=1,,core=2"),
     "argument --tier-weights: item 2 of 'spine=1,,core=2' is empty"),
    (("plan", "--example", "racks", "--tier-weights", "spine=1,spine=2"),
     "argument --tier-weights: 'spine' is given twice in 'spine=1,spine=2' (items 1 and 2)"),
    (("plan", "--example", "racks", "--tier-weights", "spine"), "argument --tier-weights: bad tier weight 'spine'"),
    (("plan", "--example", "racks", "--exclude", "n1,,n2"), "argument --exclude: item 2 of 'n1,,n2' is empty"),
    (("plan", "--example", "racks", "--hosts", "n[1,3],n1,n[1,3]"),
     "argument --hosts: 'n[1,3]' is given twice in 'n[1,3],n1,n[1,3]' (items 1 and 3)"),
    (("replan", "--rankmap", "m.json", "--failed", ",n1"), "argument --failed: item 1 of ',n1' is empty"),
    (("topo", "import", "--from", "k8s-labels", "n.json", "--levels", "A,,B", "--out", "c.yaml"),
     "argument --levels: item 2 of 'A,,B' is empty"),
    (("topo", "export", "--to", "k8s-labels", "c.yaml", "--levels", "A,B,A", "--out", "c.yaml"),
     "argument --levels: 'A' is given twice in 'A,B,A' (items 1 and 3)"),
    # --tier-weights weighs the tiers objective only
    (("plan", "--example", "racks", "--objective", "uplink,bytes", "--tier-weights", "spine=2"),
     "--tier-weights spine=2 weighs the tiers objective, which --objective uplink,bytes leaves out"),
    (("plan", "--example", "racks", "--objective", "top-first", "--tier-weights", "spine=2"),
     "which --objective top-first leaves out: add tiers to --objective or drop --tier-weights"),
    (("plan", "--example", "racks", "--tier-weights", "spine=0"),
     "--tier-weights spine=0: every tier of cluster 'racks-512' then weighs 0"),
    (("plan", "--example", "racks", "--tier-weights", "ToR=1"),
     "rankmap: error: --tier-weights: unknown tier 'ToR' in tier weights (tiers of 'racks-512': spine)"),
    (("plan", "--example", "racks", "--out", ""), "argument --out: no path given (got '')"),
    (("plan", "--example", "racks", "--out", "-"), "'-' is not standard output here: --out names a folder"),
    (("simulate", "--out", "-"), "--out names a folder"),
    (("diagnose", "run", "--rankmap", "m.json", "--out", "-"), "--out names a folder"),
    (("launch", "--rankmap", "m.json", "--format", "slurm", "--out", ""), "argument --out: no path given"),
    (("topo", "export", "--to", "slurm", "c.yaml", "--out", ""), "argument --out: no path given"),
    (("show", "m.json", "--out", "plan.jpg"), "the picture is PNG: give a file name ending in .png (got 'plan.jpg')"),
    (("show", "m.json", "--out", "-"), "--out names the PNG file to write"),
    (("show", "m.json", "--out", "x.png/"), "argument --out: 'x.png/' ends in '/', which names a folder"),
    (("topo", "export", "--to", "slurm", "c.yaml", "--out", "topology.conf/"), "'topology.conf/' ends in '/'"),
    # a flag's value or a combination of flags is a usage error (2), whatever part of rankmap finds it
    (("launch", "--rankmap", "m.json", "--format", "slurm", "--plan-in-allocation"),
     "rankmap: error: --plan-in-allocation needs --cluster CLUSTER.yaml"),
    (("launch", "--rankmap", "m.json", "--format", "torchrun", "--plan-in-allocation", "--cluster", "c.yaml"),
     "--plan-in-allocation and --cluster go with --format slurm, not --format torchrun"),
    (("launch", "--rankmap", "m.json", "--format", "slurm", "--cluster", "c.yaml"),
     "--cluster goes with --plan-in-allocation: it would do nothing here"),
    (("topo", "import", "--from", "k8s-labels", "n.json", "--kueue-topology", "kt.yaml", "--levels", "a", "--out",
      "o.yaml"), "rankmap: error: give --levels or --kueue-topology, not both"),
    (("topo", "import", "--from", "slurm", "t.conf", "--out", "./t.conf"), "--out t.conf is the input file"),
    (("launch", "--rankmap", "m.json", "--format", "slurm", "--master-addr", "a;b"),
     "argument --master-addr: 'a;b' is not a valid hostname or IP address: character ';' is not allowed"),
    (("node-rank", "--rankmap", "m.json", "--host", "n1", "--master-addr", "a;b"), "argument --master-addr: 'a;b' is"),
    (("replan", "--rankmap", "m.json", "--failed", "gpu-r3-n[01-02],gpu-r3-n02"),
     "argument --failed: host 'gpu-r3-n02' appears twice in hostlist 'gpu-r3-n[01-02],gpu-r3-n02'"),
    (("plan", "--example", "racks", "--exclude", "n[1-"), "argument --exclude: bad hostlist 'n[1-': unbalanced"),
])
def test_flags_that_would_do_nothing_are_usage_errors(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert message in usage_error(capsys, *argv)
    assert list(tmp_path.iterdir()) == []  # no partial output


@pytest.mark.parametrize("argv, message", [
    (("--format", "torchrun", "--timeout", "5"), "--timeout goes with --local, not --format"),
    (("--format", "slurm", "--max-procs", "4"), "--max-procs goes with --local, not --format"),
    (("--local", "--no-resolve"), "--no-resolve goes with --format, not --local"),
    (("--local", "--run-dir", "r"), "--run-dir goes with --format, not --local"),
    (("--flags", "megatron", "--out", "x"), "--out goes with --format or --local, not --flags"),
    (("--flags", "megatron", "--", "train.py"), "-- SCRIPT goes with --format or --local, not --flags"),
])
def test_launch_refuses_flags_of_another_mode(capsys, racks_map, argv, message):
    assert message in usage_error(capsys, "launch", "--rankmap", racks_map, *argv)


@pytest.mark.parametrize("workdir, what", [("missing", "does not exist"), ("file", "is not a folder")])
def test_launch_local_with_a_bad_workdir_names_it(capsys, tmp_path, racks_map, workdir, what):
    (tmp_path / "file").write_text("x")
    path = tmp_path / workdir
    assert main(["launch", "--rankmap", str(racks_map), "--local", "--workdir", str(path), "--steps", "0"]) == 3
    err = capsys.readouterr().err
    assert err == f"rankmap: error: --workdir: {path} {what}: the workers start in it\n"


@pytest.mark.parametrize("argv", [
    ("plan", "--example", "racks", "--reserve="), ("plan", "--example", "racks", "--constraints", ""),
    ("plan", "--example", "racks", "--previous", " "), ("verify", ""), ("topo", "show", ""),
    ("launch", "--rankmap=", "--format", "slurm"), ("diagnose", "run", "--rankmap", ""),
])
def test_an_empty_file_flag_is_a_usage_error_not_the_current_folder(capsys, argv):
    """``--reserve=`` (or a path from an unset shell variable) read the current folder and said
    "not a regular file (a folder)" with exit 3."""
    assert "no file given (got " in usage_error(capsys, *argv)


def test_launch_flags_engine_prints_the_flag_the_engine_takes(capsys, racks_map):
    assert main(["launch", "--rankmap", str(racks_map), "--flags", "engine"]) == 0
    out, err = capsys.readouterr()
    assert out == f"--rankmap {racks_map}\n"
    assert "reads tp/pp/dp/cp/ep and the order from the rank map itself" in err


@pytest.mark.parametrize("argv", [("--help",), ("plan", "--help"), ("--version",), (), ("topo", "import", "--help")])
def test_help_and_version_into_a_full_stdout_exit_74(argv):
    with open("/dev/full", "w") as full:
        run = rankmap(*argv, stdout=full)
    assert run.returncode == 74, run.stderr
    assert run.stderr == "rankmap: error: standard output: cannot write: No space left on device\n"


def test_replanning_into_a_folder_removes_the_older_maps_launch_files(tmp_path):
    plan = tmp_path / "plan"
    assert rankmap("plan", "--example", "racks", "--out", plan, "--no-picture").returncode == 0  # 60 hosts
    for fmt in ("slurm", "torchrun"):
        run = rankmap("launch", "--rankmap", plan / "rankmap.json", "--format", fmt, "--no-resolve", "--", "train.py")
        assert run.returncode == 0, run.stderr
    assert "--nodes=60" in (plan / "launch-slurm" / "slurm.sbatch").read_text()
    (plan / "run").mkdir()  # a training run's logs are data: they stay
    run = rankmap("plan", "--example", "racks", "--dp", "2", "--out", plan, "--no-picture")
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in plan.iterdir()) == ["hostfile", "rankmap.json", "run"]
    assert f"rankmap: removed {plan}/launch-torchrun/, {plan}/launch-slurm/: launch files of the map" in run.stderr
    # a failed plan removes nothing
    rankmap("launch", "--rankmap", plan / "rankmap.json", "--format", "slurm", "--no-resolve")
    run = rankmap("plan", "--example", "racks", "--dp", "200", "--out", plan, "--no-picture")
    assert run.returncode != 0 and "--nodes=8" in (plan / "launch-slurm" / "slurm.sbatch").read_text()



def test_a_launch_deepspeed_folder_of_an_earlier_release_goes_with_a_new_map(tmp_path):
    """DeepSpeed's hostfile was ``launch-deepspeed/hostfile`` before it became ``deepspeed-hostfile``:
    that folder is still launch's own, removed with the map, not refused as holding the user's file."""
    plan = tmp_path / "plan"
    assert rankmap("plan", "--example", "racks", "--dp", "2", "--out", plan, "--no-picture").returncode == 0
    run = rankmap("launch", "--rankmap", plan / "rankmap.json", "--format", "deepspeed", "--no-resolve", "--",
                  "train.py")
    assert run.returncode == 0, run.stderr
    folder = plan / "launch-deepspeed"
    (folder / "deepspeed-hostfile").rename(folder / "hostfile")   # the old layout
    run = rankmap("plan", "--example", "racks", "--dp", "2", "--out", plan, "--no-picture")
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in plan.iterdir()) == ["hostfile", "rankmap.json"]

@pytest.mark.parametrize("command", ["plan", "replan"])
def test_launch_files_written_into_the_maps_own_folder_go_with_a_new_map(tmp_path, racks_map, command):
    """`launch --out <map dir>` (no launch-FORMAT folder): a new map there removes exactly the files
    launch wrote (its record names them), not the user's, and says which."""
    out = tmp_path / "st"
    out.mkdir()
    (out / "rankmap.json").write_bytes(racks_map.read_bytes())
    (out / "notes.txt").write_text("mine\n")
    for fmt in ("slurm", "mpi"):
        run = rankmap("launch", "--rankmap", out / "rankmap.json", "--format", fmt, "--no-resolve", "--out", out)
        assert run.returncode == 0, run.stderr
    assert "gpu-r1-n01" in (out / "slurm-hostfile").read_text()
    if command == "plan":
        run = rankmap("plan", "--example", "racks", "--dp", "2", "--exclude", "gpu-r1-n[01-08]", "--out", out,
                      "--no-picture")
    else:
        run = rankmap("replan", "--rankmap", out / "rankmap.json", "--failed", "gpu-r1-n01", "--out", out)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["hostfile", "notes.txt", "rankmap.json"]
    names = ["mpirun.sh", "rankfile", "slurm-hostfile", "slurm.sbatch", "torchrun-commands.txt", "torchrun.sh"]
    assert (f"rankmap: removed {', '.join(str(out / n) for n in names)}: launch files of the map this one replaces"
            in run.stderr)


def test_launch_files_the_user_edited_beside_a_map_refuse_a_new_map(tmp_path, racks_map):
    out = tmp_path / "st"
    out.mkdir()
    (out / "rankmap.json").write_bytes(racks_map.read_bytes())
    assert rankmap("launch", "--rankmap", out / "rankmap.json", "--format", "mpi", "--no-resolve", "--out",
                   out).returncode == 0
    with open(out / "mpirun.sh", "a") as f:
        f.write("# my change\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    run = rankmap("plan", "--example", "racks", "--dp", "2", "--out", out, "--no-picture")
    assert run.returncode == 3 and run.stderr == (
        f"rankmap: error: {out}: launch files of an earlier map (mpirun.sh) changed since rankmap launch wrote them; "
        f"a new map there makes them stale, and rankmap does not delete your edits: move them away or give another "
        f"--out\n")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_launch_folder_holding_runs_plans_is_refused_not_removed(tmp_path, racks_map):
    out = tmp_path / "p"
    (out / "launch-slurm" / "plan-1234").mkdir(parents=True)  # what an in-allocation run leaves there
    (out / "launch-slurm" / "slurm-plan.sbatch").write_text("#!/bin/bash\n")
    run = rankmap("plan", "--example", "racks", "--dp", "2", "--out", out, "--no-picture")
    assert run.returncode == 3
    assert run.stderr == (f"rankmap: error: {out}/launch-slurm: launch files of the map in {out} (a new map there "
                          f"makes them stale) beside plan-1234, which launch does not write: move {out}/launch-slurm "
                          f"away or give another --out\n")
    assert sorted(p.name for p in out.iterdir()) == ["launch-slurm"]


def test_a_launch_folder_holding_the_users_own_files_is_refused_not_removed(tmp_path, racks_map):
    out = tmp_path / "p"
    assert rankmap("launch", "--rankmap", racks_map, "--format", "slurm", "--no-resolve", "--out",
                   out / "launch-slurm", "--", "train.py").returncode == 0
    (out / "launch-slurm" / "NOTES.md").write_text("why we changed the sbatch\n")
    run = rankmap("plan", "--example", "racks", "--dp", "2", "--out", out, "--no-picture")
    assert run.returncode == 3 and "beside NOTES.md, which launch does not write" in run.stderr
    assert (out / "launch-slurm" / "NOTES.md").read_text() == "why we changed the sbatch\n"


@pytest.mark.parametrize("command", ["plan", "replan"])
def test_a_symlinked_launch_folder_is_refused_not_left_stale(tmp_path, racks_map, command):
    """launch writes through a link named launch-slurm; a new map beside it would leave those
    files stale, and rankmap deletes nothing through a link: refused, nothing written."""
    out, shared = tmp_path / "p", tmp_path / "shared"
    out.mkdir()
    (out / "rankmap.json").write_bytes(racks_map.read_bytes())
    shared.mkdir()
    (out / "launch-slurm").symlink_to(shared)
    assert rankmap("launch", "--rankmap", out / "rankmap.json", "--format", "slurm", "--no-resolve").returncode == 0
    before = {p.name: p.read_bytes() for p in (*out.iterdir(), *shared.iterdir()) if p.is_file()}
    if command == "plan":
        run = rankmap("plan", "--example", "racks", "--dp", "3", "--out", out, "--no-picture")
    else:
        failed = json.loads(racks_map.read_text())["ranks"][0]["host"]
        run = rankmap("replan", "--rankmap", out / "rankmap.json", "--failed", failed, "--out", out)
    assert run.returncode == 3 and run.stderr == (
        f"rankmap: error: {out}/launch-slurm: a symbolic link (to {shared}): the launch files behind it, made for "
        f"the map in {out}, would be stale beside a new map, and rankmap does not delete files through a link: "
        f"remove {out}/launch-slurm or give another --out\n")
    assert {p.name: p.read_bytes() for p in (*out.iterdir(), *shared.iterdir()) if p.is_file()} == before


def test_a_file_where_launch_writes_its_folder_is_a_clear_error(tmp_path, racks_map):
    out = tmp_path / "p"
    out.mkdir()
    (out / "rankmap.json").write_bytes(racks_map.read_bytes())
    (out / "launch-mpi").write_text("notes\n")
    run = rankmap("launch", "--rankmap", out / "rankmap.json", "--format", "mpi", "--no-resolve")
    assert run.returncode == 3 and run.stderr == (f"rankmap: error: {out}/launch-mpi: is a file, not a folder: cannot "
                                                  f"write the outputs into it (move it away or give another --out)\n")
    assert sorted(p.name for p in out.iterdir()) == ["launch-mpi", "rankmap.json"]
    assert (out / "launch-mpi").read_text() == "notes\n"
    run = rankmap("launch", "--rankmap", out / "rankmap.json", "--format", "mpi", "--no-resolve", "--out",
                  out / "launch-mpi" / "x")  # a file above the folder: named the same way
    assert run.returncode == 3 and f"rankmap: error: {out}/launch-mpi: is a file, not a folder: cannot write the " \
                                   f"outputs into {out}/launch-mpi/x" in run.stderr


def test_every_file_launch_writes_is_known_as_its_own(racks_map):
    from rankmap.job.rank_map import read_rankmap
    from rankmap.launch.common import LaunchOptions
    from rankmap.launch.formats import FILES, FORMATS, launch_files

    rm = read_rankmap(racks_map)
    for fmt in FORMATS:
        names = set(launch_files(rm, fmt, LaunchOptions(rankmap_path=str(racks_map), resolve=False), "l"))
        assert names <= set(FILES[fmt]), fmt


def test_replan_removes_the_older_maps_launch_files(tmp_path, racks_map):
    out = tmp_path / "r"
    out.mkdir()
    assert rankmap("launch", "--rankmap", racks_map, "--format", "mpi", "--no-resolve", "--out",
                   out / "launch-mpi").returncode == 0
    failed = json.loads(racks_map.read_text())["ranks"][0]["host"]
    run = rankmap("replan", "--rankmap", racks_map, "--failed", failed, "--out", out)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["hostfile", "rankmap.json"]


MIXED = """name: mixed
hosts: {gpus: 8, nics: 8}
tor_groups:
  - {name: tgA, capacity: 8, hosts: [{hosts: "gpu-a[1-3]", gpus: 4, nics: 4}]}
  - {name: tgB, capacity: 8, hosts: gpu-b1}
"""
MIXED_JOB = """name: tp4
parallel: {tp: 4, pp: 1, dp: 5}
model: {preset: gpt3-1.3b}
batch: {micro_batch_size: 1, num_micro_batches: 2}
"""


def test_gap_without_a_bound_is_a_dash_and_null(tmp_path):
    from pathlib import Path
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "rankmap.schema.json").read_text())
    (tmp_path / "c.yaml").write_text(MIXED)
    (tmp_path / "j.yaml").write_text(MIXED_JOB)
    args = ("plan", "--cluster", tmp_path / "c.yaml", "--job", tmp_path / "j.yaml", "--no-picture")
    run = rankmap(*args, "--out", tmp_path / "p")
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.splitlines() if line.strip().startswith(("rankmap plan", "spread"))]
    assert len(rows) == 2 and all(row[-1] == "-" for row in rows)
    assert "no bound" in run.stdout and "100.0%" not in run.stdout
    # not "lower bound 0 B (valid for every placement ...; none (...))", which contradicted itself
    assert "no lower bound (hosts of different sizes), so no gap; solved in" in run.stdout
    assert "lower bound 0 B" not in run.stdout
    doc = json.loads((tmp_path / "p" / "rankmap.json").read_text())
    assert doc["summary"]["bound_method"].startswith("none") and doc["summary"]["lower_bound_bytes"] == 0
    assert doc["summary"]["plan"]["gap_to_bound"] is None
    assert all(b["gap_to_bound"] is None for b in doc["summary"]["baselines"].values())
    jsonschema.validate(doc, schema)
    run = rankmap(*args, "--out", tmp_path / "q", "--json")
    assert json.loads(run.stdout)["summary"]["plan"]["gap_to_bound"] is None


def test_a_plan_with_a_bound_keeps_its_gap(racks_map):
    summary = json.loads(racks_map.read_text())["summary"]
    assert summary["plan"]["gap_to_bound"] == 0.0  # racks, dp=2: 8 hosts in one rack, bound 0 met
    assert summary["baselines"]["arrival order"]["gap_to_bound"] == 1.0  # a real bound of 0: 100%, not "-"


def test_simulate_names_the_example_it_used(tmp_path, monkeypatch, capsys):
    """No --example: the label names the default example, whatever it is (it read "megascale-12k",
    hard-coded, while the default was megascale-3tier). The default is pointed at the small racks
    example so the run stays short."""
    import rankmap.examples

    assert DEFAULT_EXAMPLE == "megascale-3tier"
    monkeypatch.setattr(rankmap.examples, "DEFAULT_EXAMPLE", "racks")
    assert main(["simulate", "--seeds", "1", "--json", "--out", str(tmp_path / "s")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["traffic"]["source"] == "example racks" and doc["cluster"]["name"] == "racks-512"
    assert json.loads((tmp_path / "s" / "simulation.json").read_text())["traffic"]["source"] == "example racks"


def test_tier_weights_with_the_tiers_objective_reach_the_plan(capsys, tmp_path):
    """The refusals above leave the flags' use: weighted objective terms and the tier weights."""
    argv = ["plan", "--example", "racks", "--dp", "2", "--no-picture", "--out", str(tmp_path / "o"), "--json",
            "--objective", " tiers=1, uplink=4", "--tier-weights", "spine=2"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["tier_weights"] == [2.0]


def test_replan_into_the_maps_own_folder_removes_its_old_picture(tmp_path):
    """plan.png of the map replan replaces still draws the failed host in use: it goes with the
    old map (as `plan --no-picture` removes it), and stderr says how to draw the new one."""
    out = tmp_path / "p"
    assert rankmap("plan", "--example", "racks", "--dp", "2", "--out", out).returncode == 0
    assert (out / "plan.png").is_file()
    failed = json.loads((out / "rankmap.json").read_text())["ranks"][0]["host"]
    run = rankmap("replan", "--rankmap", out / "rankmap.json", "--failed", failed, "--out", out)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["hostfile", "rankmap.json"]
    assert (f"rankmap: removed {out}/plan.png: it drew the map this one replaces (`rankmap show "
            f"{out}/rankmap.json` draws the new one)") in run.stderr


def test_a_reservation_in_a_constraints_file_is_blamed_on_its_line_not_on_the_flag(tmp_path, racks_plan):
    """replan refuses a reserved map that holds hosts it keeps; a `reserve:` of a constraints file
    is named by file, line and item (there is no --reserve flag to blame)."""
    other, mine = racks_plan(4), tmp_path / "mine" / "rankmap.json"
    mine.parent.mkdir()
    mine.write_bytes(racks_plan(2).read_bytes())  # the dp=2 hosts lie among the dp=4 ones
    (tmp_path / "c.yaml").write_text(f"exclude: gpu-r4-n12\nreserve:\n  - {other}\n")
    failed = json.loads(mine.read_text())["ranks"][0]["host"]
    run = rankmap("replan", "--rankmap", mine, "--failed", failed, "--constraints", tmp_path / "c.yaml",
                  "--out", tmp_path / "r")
    assert run.returncode == 3
    assert run.stderr.startswith(f"rankmap: error: {tmp_path}/c.yaml:3: reserve[0]: 7 host(s) of the map that replan "
                                 f"keeps are reserved for the job of rank map {other}: "), run.stderr
    assert not (tmp_path / "r").exists()


def test_every_subcommand_help_has_a_description():
    """`rankmap replan --help` printed usage and flags only: every command says what it does."""
    import argparse

    from rankmap.cli import build_parser

    def commands(parser, prefix=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield (*prefix, name), sub
                    yield from commands(sub, (*prefix, name))

    missing = [" ".join(name) for name, sub in commands(build_parser()) if not sub.description]
    assert missing == []


def test_plan_help_says_which_flags_override_the_job_and_what_max_wall_caps():
    run = rankmap("plan", "--help")
    text = " ".join(run.stdout.split())
    options = text[text.index("options:"):]
    for dim in ("tp", "pp", "dp", "cp", "ep"):
        flag = options.index(f"--{dim} {dim.upper()} ")
        assert "(overrides the job file)" in options[flag:options.index(" --", flag + 4)], dim
    assert ("--max-wall MAX_WALL wall-clock cap, in seconds from the start of planning, on the exact CP-SAT solves "
            "only") in text
    assert "so the command can take longer than the cap" in text
