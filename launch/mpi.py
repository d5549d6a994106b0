"""Open MPI: a rankfile pinning every rank to its host and slot, ``mpirun.sh`` using it, and the
rankfile read back and checked against the map.

A rankfile line ``rank r=host slot=s`` starts global rank r on ``host`` in slot s [1]_; the
slot is the map's local rank. ``mpirun.sh`` passes it with ``--rankfile`` (Open MPI 4; Open
MPI 5 spells it ``--map-by rankfile:file=FILE`` [2]_) and exports ``MASTER_ADDR`` and
``MASTER_PORT`` for the engine's process group. It runs ``${PYTHON:-python3}`` on the script
(or ``-m MODULE``), or the command as given with ``no_python``. No torch here.

References
----------
.. [1] Open MPI 4.1 documentation, mpirun(1), "Rankfiles".
   https://www.open-mpi.org/doc/v4.1/man1/mpirun.1.php
.. [2] Open MPI 5 documentation, "Scheduling processes across hosts" (rankfile mapping).
   https://docs.open-mpi.org/en/v5.0.x/launching-apps/scheduling.html
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import (
    RANKMAP_FILE_VAR,
    LaunchOptions,
    ShellExpr,
    engine_args,
    read_host,
    script_header,
    shell_join,
    text_lines,
    workdir_lines,
)

__all__ = ["rankfile_text", "mpirun_script", "mpi_files", "RankfileEntry", "read_rankfile", "check_rankfile"]

_RANK_LINE = re.compile(r"^rank\s+(\d+)\s*=\s*(\S+)\s+slot\s*=\s*(\d+)$")


def rankfile_text(rm: RankMap) -> str:
    """Open MPI rankfile: ``rank r=host slot=local_rank`` for every rank, in rank order."""
    return "".join(f"rank {r}={e['host']} slot={e['local_rank']}\n"
                   for r, e in ((r, rm.entry(r)) for r in range(rm.world_size)))


def _program(opts: LaunchOptions) -> list:
    """What mpirun starts on every slot: ``${PYTHON:-python3} SCRIPT.py ARGS`` (or ``-m MODULE``; Debian
    and Ubuntu have no ``python`` without python-is-python3), or the program as given (``no_python``)."""
    if opts.no_python:
        return engine_args(opts)
    return [ShellExpr('"${PYTHON:-python3}"'), *engine_args(opts)]


def mpirun_script(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> str:
    """``mpirun.sh``: Open MPI with the rankfile; rank r starts where the map says."""
    q = shlex.quote
    cmd = shell_join(["mpirun", "-np", str(rm.world_size), "--rankfile", ShellExpr('"$launch_dir/rankfile"'),
                      "--bind-to", "none", "-x", f"MASTER_ADDR={master}", "-x", f"MASTER_PORT={opts.master_port}",
                      "-x", RANKMAP_FILE_VAR, *_program(opts)])
    return ("#!/usr/bin/env bash\n" + script_header(rm, "Open MPI launch with a rankfile (Open MPI 5: --map-by "
                                                    "rankfile:file=FILE instead of --rankfile FILE).")
            + "set -euo pipefail\n" + workdir_lines(opts) + f"launch_dir=\"$(realpath {q(launch_dir)})\"\n"
            + "exec " + cmd + "\n")


def mpi_files(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> dict[str, str]:
    """``{file name: text}`` of the Open MPI format: the rankfile and ``mpirun.sh``."""
    return {"rankfile": rankfile_text(rm), "mpirun.sh": mpirun_script(rm, opts, launch_dir, master)}


@dataclass(frozen=True)
class RankfileEntry:
    """One rankfile line: global ``rank`` on ``host`` in ``slot``."""

    rank: int
    host: str
    slot: int


def read_rankfile(text: str, source: str = "rankfile") -> list[RankfileEntry]:
    """Read ``rank R=HOST slot=S`` lines; ranks must be 0..W-1, each once. Returns them by rank.

    Raises
    ------
    SpecError
        ``SOURCE:LINE``: a malformed line, a bad hostname, a rank listed twice, a slot given
        two ranks; or ranks missing from 0..W-1.

    Examples
    --------
    >>> read_rankfile("rank 1=b slot=0\\nrank 0=a slot=0\\n")
    [RankfileEntry(rank=0, host='a', slot=0), RankfileEntry(rank=1, host='b', slot=0)]
    >>> read_rankfile("rank 0=a slots=0\\n", "rf")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: rf:1: expected 'rank R=HOST slot=S', got 'rank 0=a slots=0'
    """
    out: dict[int, RankfileEntry] = {}
    seen: set = set()
    for number, line in text_lines(text):
        m = _RANK_LINE.match(line)
        if not m:
            raise SpecError(f"expected 'rank R=HOST slot=S', got {line!r}", source=source, line=number)
        rank, host, slot = int(m.group(1)), read_host(m.group(2), source, number), int(m.group(3))
        if rank in out:
            raise SpecError(f"rank {rank} is listed twice", source=source, line=number)
        if (host, slot) in seen:
            raise SpecError(f"slot {slot} of host {host} is given two ranks", source=source, line=number)
        out[rank] = RankfileEntry(rank, host, slot)
        seen.add((host, slot))
    if sorted(out) != list(range(len(out))) or not out:
        missing = sorted(set(range(max(out, default=-1) + 1)) - set(out))
        raise SpecError(f"ranks must be 0..W-1 each once; missing {missing[:5] or 'all'}", source=source)
    return [out[r] for r in range(len(out))]


def check_rankfile(rm: RankMap, rankfile: list[RankfileEntry]) -> None:
    """Check that every rank of a read rankfile starts on the map's host and local rank.

    Raises
    ------
    LaunchError
        Naming the first rank placed elsewhere, or a different number of ranks.
    """
    if len(rankfile) != rm.world_size:
        raise LaunchError(f"the rankfile has {len(rankfile)} ranks, the map {rm.world_size}")
    for e in rankfile:
        want = rm.entry(e.rank)
        if (e.host, e.slot) != (want["host"], want["local_rank"]):
            raise LaunchError(f"rankfile puts rank {e.rank} on {e.host} slot {e.slot}; the map on "
                              f"{want['host']} local rank {want['local_rank']}")
