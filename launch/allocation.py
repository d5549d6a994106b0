"""Plan inside a Slurm allocation: an sbatch script that takes whatever nodes Slurm allocated
(``SLURM_JOB_NODELIST``, [1]_), plans the job on exactly these nodes (``rankmap plan --allocation``:
nodes a cluster spec refreshed from Slurm marks busy are this job's own; failed ones are refused),
writes the Slurm launch files for that plan and starts the ranks in its order. No torch here.

The scheduler chooses the nodes; only the rank order is left to rankmap. The job comes from
a rank map planned earlier (its layout and node count), written beside the script as
``job.yaml``; the cluster spec must name the nodes Slurm can allocate. Inside the job the
script runs ``$PYTHON -m rankmap`` (``PYTHON`` defaults to ``python3``; sbatch passes the
submission environment on, [1]_), so rankmap must be importable on the batch node.

References
----------
.. [1] Slurm documentation, sbatch(1): "OUTPUT ENVIRONMENT VARIABLES" (``SLURM_JOB_NODELIST``,
   ``SLURM_SUBMIT_DIR``, ``SLURM_JOB_ID``) and ``--export`` (default ``ALL``).
   https://slurm.schedmd.com/sbatch.html
"""

from __future__ import annotations

import shlex

import yaml

from rankmap.job.rank_map import RankMap
from rankmap.job.spec_file import job_to_dict
from rankmap.launch.common import ENGINE_ENTRY, LaunchOptions, script_header, workdir_lines
from rankmap.launch.slurm import SUBMIT_DIR, sbatch_head

__all__ = ["allocation_files", "allocation_script", "job_yaml", "inner_launch_args"]


def job_yaml(rm: RankMap) -> str:
    """The map's job as a job spec YAML (dp fixed to the map's, so it fills the allocation)."""
    return ("# The job of the rank map the sbatch script was made from (written by rankmap launch).\n"
            + yaml.safe_dump(job_to_dict(rm.job), sort_keys=False))


def inner_launch_args(opts: LaunchOptions) -> list[str]:
    """``rankmap launch`` options the script passes on: port, torchrun, engine options, the command.

    Examples
    --------
    >>> inner_launch_args(LaunchOptions(rankmap_path="r.json", entry=("train.py", "--lr", "3e-4")))
    ['--master-port', '29500', '--torchrun', 'torchrun', '--', 'train.py', '--lr', '3e-4']
    """
    args = ["--master-port", str(opts.master_port), "--torchrun", opts.torchrun]
    for flag, value in (("--master-addr", opts.master_addr), ("--config", opts.config_path),
                        ("--run-dir", opts.out_dir), ("--steps", opts.steps)):
        if value is not None:
            args += [flag, str(value)]
    if opts.no_python:
        args.append("--no-python")
    if tuple(opts.entry) != ENGINE_ENTRY:
        args += ["--", *opts.entry]
    return args


def allocation_script(rm: RankMap, opts: LaunchOptions, cluster_path: str, launch_dir: str) -> str:
    """``slurm-plan.sbatch``: plan on ``$SLURM_JOB_NODELIST``, write launch files, run them.

    ``cluster_path`` and ``launch_dir`` are paths as the batch node sees them (relative to the
    work directory unless absolute).
    """
    q = shlex.quote
    launch = shlex.join(inner_launch_args(opts))
    return (
        sbatch_head(rm, nodelist=False)
        + script_header(rm, "Slurm batch script that plans inside its allocation: the ranks follow the plan "
                            "on $SLURM_JOB_NODELIST.")
        + "set -euo pipefail\n"
        + workdir_lines(opts, SUBMIT_DIR)
        + f'launch_dir="$(realpath {q(launch_dir)})"\n'
        'plan_dir="$launch_dir/plan-${SLURM_JOB_ID:-0}"\n'
        'rankmap=(${PYTHON:-python3} -m rankmap)\n'
        'echo "rankmap: planning on the allocated nodes $SLURM_JOB_NODELIST"\n'
        f'"${{rankmap[@]}}" plan --cluster {q(cluster_path)} --job "$launch_dir/job.yaml" '
        '--allocation "$SLURM_JOB_NODELIST" --out "$plan_dir" --no-picture\n'
        f'"${{rankmap[@]}}" launch --rankmap "$plan_dir/rankmap.json" --format slurm --out "$plan_dir/launch" {launch}\n'
        'export RANKMAP_FILE="$plan_dir/rankmap.json"\n'
        'bash "$plan_dir/launch/slurm.sbatch"\n')


def allocation_files(rm: RankMap, opts: LaunchOptions, cluster_path: str, launch_dir: str) -> dict[str, str]:
    """``{file name: text}``: ``slurm-plan.sbatch`` and the ``job.yaml`` it plans.

    Parameters
    ----------
    rm : RankMap
        A plan of the job (its layout and node count; its hosts are not used).
    opts : LaunchOptions
        Options passed on to ``rankmap launch`` inside the allocation.
    cluster_path : str
        Cluster spec naming the nodes Slurm may allocate, as the batch node sees it.
    launch_dir : str
        Where these files are written, as the batch node sees it.
    """
    return {"slurm-plan.sbatch": allocation_script(rm, opts, cluster_path, launch_dir), "job.yaml": job_yaml(rm)}
