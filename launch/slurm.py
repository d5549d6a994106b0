"""Slurm: a batch script starting one torchrun agent per host in node-rank order, its
``SLURM_HOSTFILE``, and that hostfile read back and checked against the map.

``slurm.sbatch`` runs ``srun --distribution=arbitrary`` with ``SLURM_HOSTFILE`` listing one
line per task in node-rank order: task i runs on line i [1]_. Each task runs ``torchrun.sh``
(:mod:`rankmap.launch.torchrun`), which picks the torchrun line of its task id
(``SLURM_PROCID`` = node rank). The node list is given compressed (``#SBATCH --nodelist``,
[2]_) the way the topology exporters write hostlists (:func:`rankmap.topology.slurmconf.compress_names`:
brackets only around trailing digits, which every Slurm release reads; text after a bracket
needs 23.02.5), and every hostlist is expanded by python-hostlist; the hostfile, not the node
list, sets the order. No torch here.

The srun line gives ``--ntasks`` but never ``--nodes``, and the script unsets an inherited
``SLURM_NNODES`` (srun reads it as ``--nodes`` [1]_). What changed between Slurm 22.05 and 25.05
for this line, from SchedMD's change logs and release notes:

- 23.02.0: newlines delimit hostlists (``SLURM_JOB_NODELIST``) [4]_; no change for this script.
- 23.02.5: hostlists may carry a shared suffix after the bracket (``node[0001-0010]-int``;
  SchedMD commit 0994b5f "Extend hostlist to support suffix", first tagged slurm-23-02-5-1,
  announced in the 23.11 release notes [5]_); the ``--nodelist`` this module writes brackets
  only trailing digits (above), which every release reads.
- 23.11.0rc1: arbitrary distribution fixed for sbatch/salloc [4]_; 23.11.1: slurmctld rejects an
  arbitrary-distribution job whose minimum node count differs from the number of distinct nodes
  in its host list [4]_ -- the reason there is no ``--nodes`` (``-N``) on the srun line.
- 24.05: with ``SLURM_HOSTFILE`` set the distribution is arbitrary; PMI2 process mapping counts
  repeated hosts [6]_ (this script lists each host once; torchrun, not PMI, starts the ranks).
- 24.11.0: slurmctld rejects arbitrary-distribution jobs without a task count [4]_ -- hence
  ``--ntasks`` is always given.
- 25.05: topology.yaml and gaps in topology/block [7]_; the launch line is unchanged.

The same script therefore runs on 22.05 through 25.05; tests submit it to the Slurm installed on
the test machine (tests/launch/test_slurm_real.py).
The script changes to the work directory (``--workdir``; default ``SLURM_SUBMIT_DIR``, where
``sbatch`` was run [2]_) and names its files relative to it.

References
----------
.. [1] Slurm documentation, srun(1): ``--distribution=arbitrary``, ``SLURM_HOSTFILE``, "INPUT
   ENVIRONMENT VARIABLES" (``SLURM_NNODES``: same as ``-N, --nodes``). https://slurm.schedmd.com/srun.html
.. [2] Slurm documentation, sbatch(1): ``--nodelist``, ``--ntasks-per-node``, ``SLURM_SUBMIT_DIR``,
   ``SLURM_JOB_NODELIST``. https://slurm.schedmd.com/sbatch.html
.. [3] Slurm 23.11 release notes (NEWS): srun no longer allows ``--nodes`` with an arbitrary
   distribution (SchedMD bug 17039). https://github.com/SchedMD/slurm/blob/slurm-23-11-0-1/NEWS
.. [4] SchedMD/slurm CHANGELOG/slurm-23.02.md ("Changes in Slurm 23.02.0"), CHANGELOG/slurm-23.11.md
   ("Changes in Slurm 23.11.0rc1", "23.11.1"), CHANGELOG/slurm-24.11.md ("Changes in Slurm 24.11.0").
   https://github.com/SchedMD/slurm/tree/master/CHANGELOG
.. [5] Slurm 23.11 RELEASE_NOTES, "Configuration file changes": shared suffix in the hostlist format.
   https://github.com/SchedMD/slurm/blob/slurm-23-11-0-1/RELEASE_NOTES
.. [6] Slurm 24.05 RELEASE_NOTES, "Other changes" (SLURM_HOSTFILE implies arbitrary; PMI2 mapping).
   https://github.com/SchedMD/slurm/blob/slurm-24-05-0-1/RELEASE_NOTES
.. [7] Slurm 25.05 RELEASE_NOTES.md: multiple topologies (topology.yaml); topology/block gaps.
   https://github.com/SchedMD/slurm/blob/slurm-25-05-0-1/RELEASE_NOTES.md
"""

from __future__ import annotations

import re
import shlex

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import LaunchOptions, read_host, script_header, text_lines, workdir_lines
from rankmap.launch.torchrun import torchrun_lines, torchrun_listing, torchrun_script
from rankmap.topology.slurmconf import compress_names

__all__ = ["slurm_hostfile", "slurm_script", "srun_line", "sbatch_head", "slurm_files", "read_slurm_hostfile",
           "check_slurm_hosts"]

_JOB_NAME = re.compile(r"[^A-Za-z0-9._-]")
SUBMIT_DIR = "${SLURM_SUBMIT_DIR:-$PWD}"
_SBATCH_LINE = re.compile(r"#SBATCH --[a-z-]+(?:=[A-Za-z0-9._,:\[\]-]+)?")


def slurm_hostfile(rm: RankMap) -> str:
    """SLURM_HOSTFILE for one torchrun agent per host: line n = host of node rank n (task n)."""
    return "".join(h + "\n" for h in rm.hosts)


def sbatch_head(rm: RankMap, nodelist: bool = True) -> str:
    """``#!/bin/bash`` and the ``#SBATCH`` lines: one task per node, the map's nodes (with ``nodelist``)."""
    n = len(rm.hosts)
    name = _JOB_NAME.sub("-", rm.job.name)[:64] or "rankmap"
    hosts = f"#SBATCH --nodelist={compress_names(rm.hosts)}\n" if nodelist else ""
    head = (f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --nodes={n}\n#SBATCH --ntasks={n}\n"
            f"#SBATCH --ntasks-per-node=1\n{hosts}#SBATCH --exclusive\n")
    # sbatch reads these lines itself, unquoted (sbatch(1), "#SBATCH"): one value a line, one word each.
    for line in head.splitlines()[1:]:
        if not _SBATCH_LINE.fullmatch(line):
            raise LaunchError(f"cannot write {line[:80]!r} as an #SBATCH line")
    return head


def srun_line(ntasks: int, script: str) -> str:
    """The srun lines: arbitrary distribution over ``SLURM_HOSTFILE``, never ``--nodes``.

    Examples
    --------
    >>> print(srun_line(4, '"$launch_dir/torchrun.sh"'), end="")
    unset SLURM_NNODES  # srun reads it as --nodes, refused with --distribution=arbitrary since Slurm 23.11
    srun --ntasks=4 --distribution=arbitrary --kill-on-bad-exit=1 bash "$launch_dir/torchrun.sh"
    """
    return ("unset SLURM_NNODES  # srun reads it as --nodes, refused with --distribution=arbitrary since Slurm 23.11\n"
            f"srun --ntasks={ntasks} --distribution=arbitrary --kill-on-bad-exit=1 bash {script}\n")


def slurm_script(rm: RankMap, launch_dir: str, opts: LaunchOptions | None = None) -> str:
    """``slurm.sbatch``: one task per host, placed by ``slurm-hostfile``, each running ``torchrun.sh``.

    ``launch_dir`` is the launch files' folder as the hosts see it (relative to the work directory).
    """
    opts = opts or LaunchOptions(rankmap_path="rankmap.json")
    return (
        sbatch_head(rm)
        + script_header(rm, "Slurm batch script: task n (a torchrun agent) runs on line n of slurm-hostfile = "
                            "node rank n.")
        + "set -euo pipefail\n"
        + workdir_lines(opts, SUBMIT_DIR)
        + f"launch_dir=\"$(realpath {shlex.quote(launch_dir)})\"\n"
        'export SLURM_HOSTFILE="$launch_dir/slurm-hostfile"\n'
        + srun_line(len(rm.hosts), '"$launch_dir/torchrun.sh"'))


def slurm_files(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> dict[str, str]:
    """``{file name: text}`` of the Slurm format: the batch script, its hostfile and the torchrun files."""
    return {"slurm.sbatch": slurm_script(rm, launch_dir, opts), "slurm-hostfile": slurm_hostfile(rm),
            "torchrun.sh": torchrun_script(rm, opts, master),
            "torchrun-commands.txt": torchrun_listing(rm, torchrun_lines(rm, opts, master), opts)}


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
