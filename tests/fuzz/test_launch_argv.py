"""Generated launch files run under stand-in launchers that record their argv: for every name the
grammar-aware fuzzer produces, nothing in a name or argument executes and no name splits.

The stand-ins (``srun``, ``torchrun``, ``mpirun``, ``deepspeed`` first on PATH) are a few lines
of bash writing their arguments NUL-separated, so the test sees exactly the argv a real
launcher would get from the real bash running the real generated scripts.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import hostlist
import pytest

from rankmap.errors import LaunchError
from rankmap.fuzzing import hostile_name
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec
from rankmap.launch.common import LaunchOptions, engine_args
from rankmap.launch.deepspeed import read_deepspeed_hostfile
from rankmap.launch.formats import FORMATS, launch_files
from rankmap.launch.mpi import read_rankfile
from rankmap.launch.slurm import read_slurm_hostfile
from rankmap.launch.torchrun import torchrun_args
from rankmap.names import host_identity, host_problem

NAMES = [hostile_name(random.Random(f"launch:{i}")) for i in range(600)]
VALID = list({host_identity(n): n for n in NAMES if host_problem(n) is None}.values())
INVALID = sorted({n for n in NAMES if host_problem(n) is not None})
ENTRY = ("train.py", "--x", "$(touch PWNED1)", "a b", "RANKFILE", "HOSTFILE", "'", ";touch PWNED2;", "`touch PWNED3`",
         "\n", "*", "--lr=3e-4")
FAKE = '#!/bin/bash\nprintf "%s\\0" "$(basename "$0")" "$@" > "$ARGV_DIR/$(basename "$0").$$.$RANDOM"\n'


def rank_map(hosts) -> RankMap:
    return RankMap(job=JobSpec(tp=2, dp=len(hosts), num_micro_batches=1), cluster_name="c", cluster_hash="x",
                   hosts=tuple(hosts), tor_groups=("t",) * len(hosts), rails=((0, 1),) * len(hosts),
                   nproc_per_node=2)


@pytest.fixture
def stand_ins(tmp_path):
    bin_dir, argv_dir = tmp_path / "bin", tmp_path / "argv"
    bin_dir.mkdir()
    argv_dir.mkdir()
    for name in ("srun", "torchrun", "mpirun", "deepspeed"):
        (bin_dir / name).write_text(FAKE)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_DIR": str(argv_dir), "HOME": str(tmp_path)}
    return env, argv_dir


def calls(argv_dir: Path) -> list[list[str]]:
    """Every recorded argv (program name first), oldest first; the records are removed."""
    files = sorted(argv_dir.iterdir(), key=lambda p: p.stat().st_mtime_ns)
    out = [p.read_text().split("\0")[:-1] for p in files]
    for p in files:
        p.unlink()
    return out


def test_the_fuzzer_makes_both_kinds_of_name():
    assert len(VALID) >= 20 and len(INVALID) >= 300
    assert any("%" in n for n in INVALID) and any("\n" in n for n in INVALID) and any(":" in n for n in VALID)


def test_generated_files_pass_every_fuzzed_name_whole_and_run_nothing(tmp_path, stand_ins):
    env, argv_dir = stand_ins
    rm = rank_map(VALID)
    work = tmp_path / "work dir $(touch PWNED4)"
    work.mkdir()
    opts = LaunchOptions(rankmap_path="plan $(touch PWNED5)/rankmap.json", entry=ENTRY, workdir=str(work),
                         resolve=False)
    master, port, user = VALID[0], opts.master_port, engine_args(opts)
    for fmt in FORMATS:
        out = tmp_path / f"launch {fmt} ;x"
        out.mkdir()
        for name, text in launch_files(rm, fmt, opts, out).items():
            (out / name).write_text(text)
        run = lambda *argv: subprocess.run(["bash", *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                                           timeout=60)
        if fmt == "torchrun":
            for node in range(len(VALID)):
                assert run(str(out / "torchrun.sh"), str(node)).returncode == 0
            got = calls(argv_dir)
            assert got == [["torchrun", *torchrun_args(rm, n, master, port), *user] for n in range(len(VALID))]
        elif fmt == "slurm":
            assert run(str(out / "slurm.sbatch")).returncode == 0
            assert calls(argv_dir) == [["srun", f"--ntasks={len(VALID)}", "--distribution=arbitrary",
                                        "--kill-on-bad-exit=1", "bash", f"{out}/torchrun.sh"]]
            assert read_slurm_hostfile((out / "slurm-hostfile").read_text()) == VALID
            head = [line for line in (out / "slurm.sbatch").read_text().splitlines() if line.startswith("#SBATCH")]
            nodelist = next(line.split("=", 1)[1] for line in head if line.startswith("#SBATCH --nodelist="))
            assert sorted(hostlist.expand_hostlist(nodelist)) == sorted(VALID)
            assert all(len(line.split()) == 2 for line in head)  # one word per #SBATCH option
        elif fmt == "mpi":
            assert run(str(out / "mpirun.sh")).returncode == 0
            assert calls(argv_dir) == [["mpirun", "-np", str(2 * len(VALID)), "--rankfile", f"{out}/rankfile",
                                        "--bind-to", "none", "-x", f"MASTER_ADDR={master}", "-x",
                                        f"MASTER_PORT={port}", "-x", "RANKMAP_FILE", "python3", *user]]
            assert [e.host for e in read_rankfile((out / "rankfile").read_text())] == [h for h in VALID for _ in "ab"]
        else:
            assert run(str(out / "deepspeed.sh")).returncode == 0
            assert calls(argv_dir) == [["deepspeed", "--hostfile", f"{out}/deepspeed-hostfile", "--master_addr", master,
                                        "--master_port", str(port), "--no_local_rank", *user]]
            assert read_deepspeed_hostfile((out / "deepspeed-hostfile").read_text()) == [(h, 2) for h in VALID]
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_launch_file_is_written_for_a_name_outside_the_grammar(fmt):
    opts = LaunchOptions(rankmap_path="rankmap.json", resolve=False)
    for bad in INVALID:
        with pytest.raises(LaunchError, match="is not a valid hostname or IP address"):
            launch_files(rank_map([VALID[0], bad]), fmt, opts, "/tmp/l")
        with pytest.raises(LaunchError, match="master address"):
            launch_files(rank_map(VALID[:2]), fmt, LaunchOptions(rankmap_path="r.json", resolve=False,
                                                                 master_addr=bad), "/tmp/l")
