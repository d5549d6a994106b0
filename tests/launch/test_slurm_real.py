"""The generated Slurm scripts, submitted with ``sbatch`` to a real Slurm (four slurmd daemons
n1..n4 on this machine; tests/launch/slurm_cluster.py): every rank runs on its planned host.

Each test prints its duration. All run real processes, kept small: one worker per node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ENV, REPO, free_port, make_rankmap

from rankmap.job.rank_map import read_rankmap

pytestmark = pytest.mark.slow
PY_ENV = {**ENV, "PATH": f"{Path(sys.executable).parent}:{ENV.get('PATH', '')}", "PYTHON": sys.executable}
TORCHRUN = f"{sys.executable} -m torch.distributed.run"
REPORT = '''import json, os, sys
from rankmap.launch import check_placement
where = check_placement()
with open(os.path.join(sys.argv[1], f"rank-{where.rank}.json"), "w") as f:
    json.dump({"rank": where.rank, "env_rank": int(os.environ["RANK"]), "host": where.host,
               "slurmd_nodename": os.environ["SLURMD_NODENAME"]}, f)
'''


def _rankmap_cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], cwd=cwd, env=PY_ENV,
                          capture_output=True, text=True, timeout=120)


def _check_ranks(rm, run_dir: Path) -> None:
    """Every rank of the map reported from its planned Slurm node, with torchrun's RANK = map rank."""
    records = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in run_dir.glob("rank-*.json")}
    assert sorted(records) == list(range(rm.world_size))
    for rank, rec in records.items():
        want = rm.hosts[int(rm.rank_node[rank])]
        assert (rec["env_rank"], rec["slurmd_nodename"], rec["host"]) == (rank, want, want), rec


def _torch():
    pytest.importorskip("torch", reason="torchrun needs PyTorch (pip install torch==2.13.0)")


def test_sbatch_precomputed_map_runs_user_script_two_gloo_steps(slurm, tmp_path):
    """Map n3, n1, n4, n2 (not the string order); `-- train.py --steps 2` under sbatch + srun + torchrun."""
    _torch()
    t0 = time.perf_counter()
    make_rankmap(tmp_path / "plan", pp=2, dp=2, hosts=("n3", "n1", "n4", "n2"), nprocs=[1, 1, 1, 1])
    shutil.copy(REPO / "tests" / "launch" / "train_user.py", tmp_path / "train.py")
    made = _rankmap_cli("launch", "--rankmap", "plan/rankmap.json", "--format", "slurm", "--out", "launch",
                        "--torchrun", TORCHRUN, "--master-port", free_port(), "--", "train.py", "--steps", "2",
                        "--out", "run", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    sbatch = (tmp_path / "launch" / "slurm.sbatch").read_text()
    assert str(tmp_path) not in sbatch + (tmp_path / "launch" / "torchrun.sh").read_text()  # no planning paths
    srun = next(line for line in sbatch.splitlines() if line.startswith("srun "))
    assert "--distribution=arbitrary" in srun and "--nodes" not in srun and "-N" not in srun.split()  # Slurm 23.11+
    code, out = slurm.sbatch_wait(tmp_path / "launch" / "slurm.sbatch", tmp_path, env=PY_ENV)
    assert code == 0, out[-4000:]
    rm = read_rankmap(tmp_path / "plan" / "rankmap.json")
    _check_ranks(rm, tmp_path / "run")
    losses = [json.loads((tmp_path / "run" / f"rank-{r}.json").read_text())["losses"] for r in range(4)]
    assert all(len(x) == 2 for x in losses) and losses[0] == losses[2]  # PP group [0, 2] sums the same loss
    print(f"sbatch precomputed map + torchrun + 2 gloo steps: {time.perf_counter() - t0:.1f} s")


CLUSTER = """name: slurm-local
hosts: {gpus: 1, nics: 1}
tor_groups:
- {name: t1, hosts: 'n1,n3'}
- {name: t2, hosts: 'n2,n4'}
"""
JOB = """name: tiny
parallel: {tp: 1, pp: 2, dp: auto}
model: {layers: 4, hidden: 64, heads: 4, seq_len: 64, vocab: 256}
batch: {micro_batch_size: 1, num_micro_batches: 2}
"""


def test_sbatch_plans_inside_the_allocation(slurm, tmp_path):
    """--plan-in-allocation: the script plans on $SLURM_JOB_NODELIST and starts ranks in that plan's order.
    The cluster spec it plans with marks two of the nodes busy, as a spec refreshed from Slurm while
    the job runs marks every allocated node: they are this job's own, so the plan takes them."""
    _torch()
    t0 = time.perf_counter()
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "refreshed.yaml").write_text(CLUSTER + "availability: {busy: 'n[1-2]'}\n")
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "report.py").write_text(REPORT)
    (tmp_path / "run").mkdir()
    planned = _rankmap_cli("plan", "--cluster", "cluster.yaml", "--job", "job.yaml", "--out", "template",
                           "--time-limit", "2", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    made = _rankmap_cli("launch", "--rankmap", "template/rankmap.json", "--format", "slurm", "--plan-in-allocation",
                        "--cluster", "refreshed.yaml", "--out", "alloc", "--torchrun", TORCHRUN,
                        "--master-port", free_port(), "--", "report.py", "run", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    code, out = slurm.sbatch_wait(tmp_path / "alloc" / "slurm-plan.sbatch", tmp_path, env=PY_ENV)
    assert code == 0, out[-4000:]
    assert "planning on the allocated nodes n[1-4]" in out
    plan_dir, = (tmp_path / "alloc").glob("plan-*")
    rm = read_rankmap(plan_dir / "rankmap.json")
    assert sorted(rm.hosts) == ["n1", "n2", "n3", "n4"]
    assert {frozenset(rm.hosts[:2]), frozenset(rm.hosts[2:])} == {frozenset({"n1", "n3"}), frozenset({"n2", "n4"})}
    _check_ranks(rm, tmp_path / "run")
    print(f"sbatch planning in the allocation ({', '.join(rm.hosts)}): {time.perf_counter() - t0:.1f} s")


def test_hosts_swapped_fail_clearly(tmp_path):
    """The user script's start-up check names the rank and where the map puts it (a real process)."""
    rankmap = make_rankmap(tmp_path, pp=2, dp=2, hosts=("hb", "ha"), nprocs=[2, 2])
    env = {**ENV, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "RANKMAP_HOST": "ha",
           "RANKMAP_FILE": str(rankmap)}
    env.pop("SLURMD_NODENAME", None)
    run = subprocess.run([sys.executable, str(REPO / "tests" / "launch" / "train_user.py")], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert run.returncode != 0
    assert ("PlacementMismatch: rank 0 (machine ha, local rank 0) sits where the map puts rank 2; the map puts "
            "rank 0 on host hb local rank 0") in run.stderr
    assert "torch" not in os.environ.get("_", "")  # the check runs before torch is imported
