"""torchrun: one command line per host, its listing and ``torchrun.sh``, and the listing read back.

torchrun's c10d rendezvous ignores ``--node-rank`` (ranks follow the agents' arrival), so the
lines use the static rendezvous (``--rdzv-backend=static``) with ``--node-rank`` from the map
and ``--master-addr`` of the map's node 0 [1]_; line n runs on ``rm.hosts[n]``. Files:

- ``torchrun-commands.txt``: ``# node rank n: HOST`` then the line, per node rank;
- ``torchrun.sh``: run on every host; it picks its line by argument, ``SLURM_PROCID`` (under
  ``srun``, [2]_) or the host's name, and refuses a task on the wrong host.

No torch here.

References
----------
.. [1] PyTorch documentation, "torchrun (Elastic Launch)": ``--node-rank`` is honoured by the
   static rendezvous backend only. https://pytorch.org/docs/stable/elastic/run.html
.. [2] Slurm documentation, srun, "OUTPUT ENVIRONMENT VARIABLES": ``SLURM_PROCID``,
   ``SLURMD_NODENAME``. https://slurm.schedmd.com/srun.html
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from rankmap.errors import SpecError
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import (
    RANKMAP_FILE_VAR,
    LaunchOptions,
    check_hosts,
    engine_args,
    script_header,
    text_lines,
    workdir_lines,
)

__all__ = ["torchrun_args", "torchrun_lines", "torchrun_listing", "torchrun_script", "torchrun_files",
           "TorchrunLine", "read_torchrun_commands"]


def torchrun_args(rm: RankMap, node: int, master: str, port: int, rdzv_backend: str = "static") -> list[str]:
    """torchrun's options for node rank ``node`` (the static rendezvous pins the node rank)."""
    return [f"--nnodes={len(rm.hosts)}", f"--nproc-per-node={rm.nprocs[node]}", f"--node-rank={node}",
            f"--rdzv-backend={rdzv_backend}", f"--master-addr={master}", f"--master-port={port}",
            "--max-restarts=0"]


def torchrun_lines(rm: RankMap, opts: LaunchOptions, master: str | None = None) -> list[str]:
    """One shell line per node rank, in node-rank order (run line n on ``rm.hosts[n]``).

    Raises
    ------
    LaunchError
        With ``master`` None: a bad or unresolvable host (see :func:`rankmap.launch.common.check_hosts`).
    """
    master = master or check_hosts(rm, opts)
    prog = shlex.split(opts.torchrun)
    plain = ["--no-python"] if opts.no_python else []  # run the command itself, not python on it
    return [shlex.join([*prog, *torchrun_args(rm, n, master, opts.master_port), *plain, *engine_args(opts)])
            for n in range(len(rm.hosts))]


def torchrun_listing(rm: RankMap, lines: list[str], opts: LaunchOptions | None = None) -> str:
    """``torchrun-commands.txt``: each line under a ``# node rank n: HOST`` comment.

    With ``opts``, a first comment says where to run the lines and what to export.
    """
    head = ""
    if opts is not None:
        where = shlex.quote(opts.workdir) if opts.workdir else "the job's directory"
        head = (f"# Run each line in {where} on its host, with {RANKMAP_FILE_VAR}={shlex.quote(opts.rankmap_path)} "
                f"exported (torchrun.sh does both).\n")
    return head + "".join(f"# node rank {n}: {h}\n{line}\n" for n, (h, line) in enumerate(zip(rm.hosts, lines)))


def torchrun_script(rm: RankMap, opts: LaunchOptions, master: str | None = None) -> str:
    """``torchrun.sh``: run on every host; picks its line by argument, ``SLURM_PROCID`` or host name.

    Raises
    ------
    LaunchError
        With ``master`` None: a bad or unresolvable host.
    """
    lines = torchrun_lines(rm, opts, master)
    q = shlex.quote
    arms_host = "".join(f"  {n}) host={q(h)} ;;\n" for n, h in enumerate(rm.hosts))
    arms_run = "".join(f"  {n})\n    exec {line}\n    ;;\n" for n, line in enumerate(lines))
    names = " ".join(q(h) for h in rm.hosts)
    return (
        "#!/usr/bin/env bash\n"
        + script_header(rm, "One torchrun agent per host, static rendezvous: node rank n runs on host n of the plan.")
        + "# Usage: bash torchrun.sh [NODE_RANK]   (default: SLURM_PROCID under srun, else this host's name)\n"
        "set -euo pipefail\n"
        f"hosts=({names})\n"
        'if [ "$#" -ge 1 ]; then\n  node_rank=$1\nelif [ -n "${SLURM_PROCID:-}" ]; then\n  node_rank=$SLURM_PROCID\n'
        "else\n  node_rank=\n"
        '  for name in "$(hostname)" "$(hostname -s 2>/dev/null || true)" "$(hostname -f 2>/dev/null || true)"; do\n'
        '    for i in "${!hosts[@]}"; do\n'
        '      if [ -z "$node_rank" ] && [ "${hosts[$i]}" = "$name" ]; then node_rank=$i; fi\n'
        "    done\n  done\nfi\n"
        'case "$node_rank" in\n' + arms_host
        + '  *) echo "torchrun.sh: no node rank for this host ($(hostname)); the plan\'s hosts are: ${hosts[*]}" >&2\n'
        "     exit 2 ;;\nesac\n"
        'if [ -n "${SLURMD_NODENAME:-}" ] && [ "$SLURMD_NODENAME" != "$host" ]; then\n'
        '  echo "torchrun.sh: node rank $node_rank belongs on $host, but this task runs on $SLURMD_NODENAME" >&2\n'
        "  exit 2\nfi\n"
        + workdir_lines(opts)
        + 'case "$node_rank" in\n' + arms_run + "esac\n")


def torchrun_files(rm: RankMap, opts: LaunchOptions, master: str) -> dict[str, str]:
    """``{file name: text}`` of the torchrun format (``master`` checked by the caller)."""
    listing = torchrun_listing(rm, torchrun_lines(rm, opts, master), opts)
    return {"torchrun-commands.txt": listing, "torchrun.sh": torchrun_script(rm, opts, master)}


@dataclass(frozen=True)
class TorchrunLine:
    """One torchrun command: its node rank, torchrun options and the whole argv."""

    node_rank: int
    options: dict
    argv: tuple


def read_torchrun_commands(text: str, source: str = "torchrun-commands.txt") -> list[TorchrunLine]:
    """Read the torchrun listing (comments skipped), one command a line, in file order.

    Raises
    ------
    SpecError
        ``SOURCE:LINE``: not a shell line, or no ``--node-rank=N``.

    Examples
    --------
    >>> line, = read_torchrun_commands("# node rank 1: b\\ntorchrun --node-rank=1 --nnodes=2 -m m\\n")
    >>> line.node_rank, line.options["nnodes"], line.argv[-1]
    (1, '2', 'm')
    """
    out = []
    for number, line in text_lines(text):
        try:
            argv = tuple(shlex.split(line))
        except ValueError as exc:
            raise SpecError(f"not a shell command line: {exc}", source=source, line=number) from None
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        if "node-rank" not in opts or not opts["node-rank"].isdigit():
            raise SpecError("a torchrun line needs --node-rank=N", source=source, line=number)
        out.append(TorchrunLine(int(opts["node-rank"]), opts, argv))
    return out
