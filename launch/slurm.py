"""Slurm: a batch script starting one torchrun agent per host in node-rank order, its
``SLURM_HOSTFILE``, and that hostfile read back and checked against the map.

``slurm.sbatch`` runs ``srun --distribution=arbitrary`` with ``SLURM_HOSTFILE`` listing one
line per task in node-rank order: task i runs on line i [1]_. Each task runs ``torchrun.sh``
(:mod:`rankmap.launch.torchrun`), which picks the torchrun line of its task id
(``SLURM_PROCID`` = node rank). The node list is given compressed (``#SBATCH --nodelist``,
[2]_); the hostfile, not the node list, sets the order. No torch here.

References
----------
.. [1] Slurm documentation, srun, ``--distribution=arbitrary`` and ``SLURM_HOSTFILE``.
   https://slurm.schedmd.com/srun.html
.. [2] Slurm documentation, sbatch, ``--nodelist``, ``--ntasks-per-node``.
   https://slurm.schedmd.com/sbatch.html
"""

from __future__ import annotations

import re
import shlex

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import LaunchOptions, read_host, script_header, text_lines
from rankmap.launch.torchrun import torchrun_lines, torchrun_listing, torchrun_script
from rankmap.topology.hostnames import compress_hostlist

__all__ = ["slurm_hostfile", "slurm_script", "slurm_files", "read_slurm_hostfile", "check_slurm_hosts"]

_JOB_NAME = re.compile(r"[^A-Za-z0-9._-]")


def slurm_hostfile(rm: RankMap) -> str:
    """SLURM_HOSTFILE for one torchrun agent per host: line n = host of node rank n (task n)."""
    return "".join(h + "\n" for h in rm.hosts)


def slurm_script(rm: RankMap, launch_dir: str) -> str:
    """``slurm.sbatch``: one task per host, placed by ``slurm-hostfile``, each running ``torchrun.sh``."""
    q = shlex.quote
    n = len(rm.hosts)
    name = _JOB_NAME.sub("-", rm.job.name)[:64] or "rankmap"
    return (
        "#!/bin/bash\n"
        f"#SBATCH --job-name={name}\n#SBATCH --nodes={n}\n#SBATCH --ntasks={n}\n#SBATCH --ntasks-per-node=1\n"
        f"#SBATCH --nodelist={compress_hostlist(list(rm.hosts))}\n#SBATCH --exclusive\n"
        + script_header(rm, "Slurm batch script: task n (a torchrun agent) runs on line n of slurm-hostfile = "
                            "node rank n.")
        + "set -euo pipefail\n"
        f"launch_dir={q(launch_dir)}\n"
        'export SLURM_HOSTFILE="$launch_dir/slurm-hostfile"\n'
        f"srun --nodes={n} --ntasks={n} --ntasks-per-node=1 --distribution=arbitrary --kill-on-bad-exit=1 "
        'bash "$launch_dir/torchrun.sh"\n')


def slurm_files(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> dict[str, str]:
    """``{file name: text}`` of the Slurm format: the batch script, its hostfile and the torchrun files."""
    return {"slurm.sbatch": slurm_script(rm, launch_dir), "slurm-hostfile": slurm_hostfile(rm),
            "torchrun.sh": torchrun_script(rm, opts, master),
            "torchrun-commands.txt": torchrun_listing(rm, torchrun_lines(rm, opts, master))}


def read_slurm_hostfile(text: str, source: str = "slurm-hostfile") -> list[str]:
    """Read SLURM_HOSTFILE: one host per line = one task, in task order.

    Raises
    ------
    SpecError
        ``SOURCE:LINE``: a bad hostname; or no hosts at all.

    Examples
    --------
    >>> read_slurm_hostfile("node8\\nnode66\\n")
    ['node8', 'node66']
    """
    hosts = [read_host(line, source, number) for number, line in text_lines(text)]
    if not hosts:
        raise SpecError("no hosts", source=source)
    return hosts


def check_slurm_hosts(rm: RankMap, slurm_hosts: list[str]) -> None:
    """Check that the tasks of a SLURM_HOSTFILE follow the map's node order.

    Raises
    ------
    LaunchError
        The hostfile's order differs from the map's (a string sort, say).
    """
    if list(slurm_hosts) != list(rm.hosts):
        raise LaunchError(f"SLURM_HOSTFILE lists {slurm_hosts[:3]}...; the map's node order is {list(rm.hosts[:3])}...")
