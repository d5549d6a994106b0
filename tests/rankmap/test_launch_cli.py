"""``rankmap launch`` as a user runs it (subprocesses; the --format paths need no torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rankmap.job.rank_map import RankMap, write_plan_files
from rankmap.job.spec import JobSpec, ModelShape

LAUNCH = ["-m", "rankmap", "launch"]
REPO = Path(__file__).resolve().parents[2]


def launch(*args, cwd=None):
    return subprocess.run([sys.executable, *LAUNCH, *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or REPO, timeout=120)


def plan(folder: Path, hosts=("gpu-r1-n01", "gpu-r1-n10", "gpu-r1-n02"), layers=6) -> Path:
    job = JobSpec(name="gpt tiny", tp=2, pp=3, dp=1, num_micro_batches=3,
                  model=ModelShape(layers=layers, hidden=64, heads=4, seq_len=64, vocab=256))
    rm = RankMap(job=job, cluster_name="racks", cluster_hash="0" * 64, hosts=tuple(hosts), tor_groups=("t",) * len(hosts),
                 rails=((0, 1),) * len(hosts), nproc_per_node=2)
    write_plan_files(rm, folder)
    return folder / "rankmap.json"


@pytest.mark.parametrize("fmt, names", [
    ("torchrun", ["torchrun-commands.txt", "torchrun.sh"]),
    ("slurm", ["slurm.sbatch", "slurm-hostfile", "torchrun.sh", "torchrun-commands.txt"]),
    ("mpi", ["rankfile", "mpirun.sh"]),
    ("deepspeed", ["deepspeed-hostfile", "deepspeed.sh"]),
])
def test_each_format_writes_its_files(tmp_path, fmt, names):
    rankmap = plan(tmp_path / "plan")
    out = tmp_path / "out"
    run = launch("--rankmap", rankmap, "--format", fmt, "--out", out, "--no-resolve")
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(names + [".rankmap-launch.json"])  # + what it wrote
    assert f"{fmt} files for 6 ranks on 3 hosts (node 0: gpu-r1-n01)" in run.stdout
    for name in names:
        if name.endswith((".sh", ".sbatch")):
            assert (out / name).stat().st_mode & 0o111
            assert subprocess.run(["bash", "-n", str(out / name)]).returncode == 0
    if fmt == "slurm":  # plan order, not string order (n10 before n02)
        assert (out / "slurm-hostfile").read_text() == "gpu-r1-n01\ngpu-r1-n10\ngpu-r1-n02\n"
        assert "#SBATCH --job-name=gpt-tiny\n" in (out / "slurm.sbatch").read_text()


def test_default_out_folder_sits_beside_the_rank_map(tmp_path):
    rankmap = plan(tmp_path / "plan")
    assert launch("--rankmap", rankmap, "--format", "mpi", "--no-resolve", "--steps", 5).returncode == 0
    text = (tmp_path / "plan" / "launch-mpi" / "mpirun.sh").read_text()
    assert "--steps 5" in text and f"--rankmap {rankmap.resolve()}" in text


@pytest.mark.parametrize("extra, code, message", [
    ([], 3, "host 'gpu-r1-n01' (node rank 0) does not resolve on this machine"),
    (["--no-resolve", "--master-addr", "h1;reboot"], 2, "--master-addr: 'h1;reboot' is not a valid hostname"),
    (["--no-resolve", "--master-addr", "127.0.0.1"], 3, "master address '127.0.0.1' is a loopback address"),
    (["--no-resolve", "--master-port", "70000"], 2, "expected a port number 1..65535"),
    (["--no-resolve", "--config", "CONFIG"], 3, "engine.yaml:2: train.lr: must be positive, got 0"),
    (["--no-resolve", "--config", "MISSING"], 3, "missing.yaml: cannot read file"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, extra, code, message):
    rankmap = plan(tmp_path / "plan")
    (tmp_path / "engine.yaml").write_text("train:\n  lr: 0\n")
    extra = [str(tmp_path / "engine.yaml") if a == "CONFIG" else str(tmp_path / "missing.yaml") if a == "MISSING"
             else a for a in extra]
    out = tmp_path / "out"
    run = launch("--rankmap", rankmap, "--format", "torchrun", "--out", out, *extra)
    assert run.returncode == code
    assert message in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 if code == 3 else True
    assert not out.exists()


def test_model_that_does_not_fit_the_plan_is_refused_before_anything_starts(tmp_path):
    rankmap = plan(tmp_path / "plan")
    (tmp_path / "engine.yaml").write_text("model: {layers: 4}\n")
    run = launch("--rankmap", rankmap, "--local", "--config", tmp_path / "engine.yaml", "--out", tmp_path / "run")
    assert run.returncode == 3 and "model.layers (4) must be divisible by pp*vpp = 3" in run.stderr
    assert not (tmp_path / "run").exists()


def test_missing_text_folder_is_refused_before_the_agents_start(tmp_path):
    rankmap = plan(tmp_path / "plan")
    (tmp_path / "engine.yaml").write_text(f"data: {{root: {tmp_path / 'nowhere'}}}\n")
    run = launch("--rankmap", rankmap, "--local", "--config", tmp_path / "engine.yaml", "--out", tmp_path / "run")
    assert run.returncode == 3 and "data.root:" in run.stderr and "nowhere is not a folder" in run.stderr
    assert not (tmp_path / "run").exists()


def test_broken_rank_map_and_usage_errors(tmp_path):
    bad = tmp_path / "rankmap.json"
    bad.write_text(json.dumps({"schema": "rankmap/v0"}))
    run = launch("--rankmap", bad, "--format", "torchrun")
    assert run.returncode == 3 and "expected schema 'rankmap/v1'" in run.stderr
    both = launch("--rankmap", bad, "--format", "torchrun", "--local")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    neither = launch("--rankmap", bad)
    assert neither.returncode == 2 and "one of the arguments --format --local --flags is required" in neither.stderr


def test_importing_rankmap_and_the_launcher_does_not_import_torch_or_the_solver():
    code = ("import sys, rankmap, rankmap.cli.launch, rankmap.engine, rankmap.launch.formats, rankmap.launch.common, "
            "rankmap.launch.torchrun, rankmap.launch.slurm, rankmap.launch.mpi, rankmap.launch.deepspeed, rankmap.launch.local, "
            "rankmap.launch.ranks, rankmap.engine.runspec, rankmap.engine.data\n"
            "print(sorted(m for m in ('torch', 'ortools', 'networkx') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr


def test_the_engine_never_imports_ortools_or_networkx():
    pytest.importorskip("torch", reason="the engine's torch modules need PyTorch (pip install torch==2.13.0)")
    code = ("import sys, rankmap.engine.train, rankmap.engine.mesh, rankmap.engine.parallel, rankmap.engine.checkpoint, rankmap.engine.step, rankmap.engine.reference\n"
            "print(sorted(m for m in ('ortools', 'networkx') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr


def test_user_command_after_double_dash_is_argv_exact_and_relative(tmp_path):
    plan(tmp_path / "plan")
    run = launch("--rankmap", "plan/rankmap.json", "--format", "torchrun", "--out", "l", "--no-resolve",
                 "--workdir", "/jobs/my run", "--", "train.py", "--name", "a b", "--lr", "3e-4", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    listing = (tmp_path / "l" / "torchrun-commands.txt").read_text()
    assert "--max-restarts=0 train.py --name 'a b' --lr 3e-4\n" in listing and str(tmp_path) not in listing
    script = (tmp_path / "l" / "torchrun.sh").read_text()
    assert "cd '/jobs/my run'\nexport RANKMAP_FILE=plan/rankmap.json\n" in script
    module = launch("--rankmap", "plan/rankmap.json", "--format", "deepspeed", "--out", "d", "--no-resolve",
                    "--", "-m", "pkg.train", "--x", "1", cwd=tmp_path)
    assert module.returncode == 0, module.stderr
    assert "--no_local_rank --module pkg.train --x 1" in (tmp_path / "d" / "deepspeed.sh").read_text()
    mixed = launch("--rankmap", "plan/rankmap.json", "--format", "mpi", "--steps", 2, "--no-resolve", "--",
                   "train.py", cwd=tmp_path)
    assert mixed.returncode == 3 and "--steps are options of the bundled engine" in mixed.stderr


def test_flags_prints_megatron_options(tmp_path):
    rankmap = plan(tmp_path / "plan")
    run = launch("--rankmap", rankmap, "--flags", "megatron")
    assert run.returncode == 0, run.stderr
    assert run.stdout == ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 3 --context-parallel-size 1 "
                          "--expert-model-parallel-size 1\n")


def test_deepspeed_files_in_the_plans_folder_keep_the_plans_hostfile(tmp_path):
    rankmap = plan(tmp_path / "plan")
    before = (tmp_path / "plan" / "hostfile").read_text()
    run = launch("--rankmap", rankmap, "--format", "deepspeed", "--out", tmp_path / "plan", "--no-resolve", "--",
                 "train.py")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "plan" / "hostfile").read_text() == before == "gpu-r1-n01\ngpu-r1-n10\ngpu-r1-n02\n"
    assert (tmp_path / "plan" / "deepspeed-hostfile").read_text() == (
        "gpu-r1-n01 slots=2\ngpu-r1-n10 slots=2\ngpu-r1-n02 slots=2\n")
    record = json.loads((tmp_path / "plan" / ".rankmap-launch.json").read_text())
    assert sorted(record["files"]) == ["deepspeed-hostfile", "deepspeed.sh"]
    assert '--hostfile "$launch_dir/deepspeed-hostfile"' in (tmp_path / "plan" / "deepspeed.sh").read_text()


@pytest.mark.parametrize("fmt", ["torchrun", "slurm", "mpi", "deepspeed"])
@pytest.mark.parametrize("command, says", [
    (["python", "who.py"], "'python' after --: the launcher starts python itself"),
    (["/usr/bin/python3", "-m", "pkg.who"], "give -- -m pkg.who ..., or add --no-python"),
    (["./train.sh"], "'./train.sh' after -- is not a Python script (SCRIPT.py) or -m MODULE"),
    (["-m"], "-m after -- names no module: give -- -m MODULE ARGS"),
])
def test_a_command_the_launcher_would_run_wrongly_is_refused_with_the_form_to_use(tmp_path, fmt, command, says):
    rankmap = plan(tmp_path / "plan")
    run = launch("--rankmap", rankmap, "--format", fmt, "--out", tmp_path / "o", "--no-resolve", "--", *command)
    assert run.returncode == 2 and says in run.stderr and len(run.stderr.splitlines()) == 1, run.stderr
    assert not (tmp_path / "o").exists()


def test_no_python_needs_a_program_after_double_dash(tmp_path):
    rankmap = plan(tmp_path / "plan")
    alone = launch("--rankmap", rankmap, "--format", "mpi", "--no-resolve", "--no-python")
    assert alone.returncode == 2 and "--no-python goes with your own command after --" in alone.stderr
    module = launch("--rankmap", rankmap, "--format", "mpi", "--no-resolve", "--no-python", "--", "-m", "pkg")
    assert module.returncode == 2 and "-m MODULE needs python: drop --no-python" in module.stderr


WHO = '#!/usr/bin/env bash\necho "$RANK $LOCAL_RANK $WORLD_SIZE" >> "$1/ranks.txt"\n'


def test_generated_torchrun_and_mpirun_scripts_run_a_program_and_a_script(tmp_path):
    """torchrun.sh runs a shell script under real torchrun (--no-python); mpirun.sh runs a .py with
    ${PYTHON:-python3} (a stand-in mpirun starts the command after its options once)."""
    pytest.importorskip("torch", reason="torchrun is PyTorch's")
    from helpers import free_port, make_rankmap

    make_rankmap(tmp_path / "plan", tp=2, hosts=("127.0.0.1",))
    (tmp_path / "who.sh").write_text(WHO)
    (tmp_path / "who.sh").chmod(0o755)
    torchrun = f"{sys.executable} -m torch.distributed.run"
    port = str(free_port())
    run = launch("--rankmap", "plan/rankmap.json", "--format", "torchrun", "--out", "t", "--no-resolve",
                 "--torchrun", torchrun, "--master-port", port, "--no-python", "--", "./who.sh", tmp_path, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "--max-restarts=0 --no-python ./who.sh" in (tmp_path / "t" / "torchrun.sh").read_text()
    done = subprocess.run(["bash", "t/torchrun.sh", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted((tmp_path / "ranks.txt").read_text().splitlines()) == ["0 0 2", "1 1 2"]

    (tmp_path / "who.py").write_text("import sys\nopen(sys.argv[1] + '/py.txt', 'w').write(sys.executable)\n")
    run = launch("--rankmap", "plan/rankmap.json", "--format", "mpi", "--out", "m", "--no-resolve", "--", "who.py",
                 tmp_path, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text('#!/usr/bin/env bash\nwhile [ "$1" != RANKMAP_FILE ]; do shift; done\nshift\n'
                                    'exec "$@"\n')
    (bin_dir / "mpirun").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": sys.executable}
    done = subprocess.run(["bash", "m/mpirun.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "py.txt").read_text() == sys.executable
    assert '-x RANKMAP_FILE "${PYTHON:-python3}" who.py' in (tmp_path / "m" / "mpirun.sh").read_text()
