"""Readers for the launch files :mod:`rankmap.launch.writers` writes, so they round-trip and can be
checked against a rank map: the Open MPI rankfile, the DeepSpeed hostfile, Slurm's
``SLURM_HOSTFILE`` and the torchrun command listing. No torch here.

Each reader refuses what it cannot read with ``FILE:LINE: what is wrong`` (a
:class:`rankmap.errors.SpecError`) rather than skipping the line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.launch.writers import check_host

__all__ = ["RankfileEntry", "read_rankfile", "read_deepspeed_hostfile", "read_slurm_hostfile",
           "read_torchrun_commands", "TorchrunLine", "check_against_map"]

_RANK_LINE = re.compile(r"^rank\s+(\d+)\s*=\s*(\S+)\s+slot\s*=\s*(\d+)$")


@dataclass(frozen=True)
class RankfileEntry:
    rank: int
    host: str
    slot: int


def _lines(text: str):
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            yield number, line


def _host(name: str, source: str, line: int) -> str:
    try:
        check_host(name)
    except LaunchError as exc:
        raise SpecError(str(exc), source=source, line=line) from None
    return name


def read_rankfile(text: str, source: str = "rankfile") -> list[RankfileEntry]:
    """Read ``rank R=HOST slot=S`` lines; ranks must be 0..W-1, each once. Returns them by rank.

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
    for number, line in _lines(text):
        m = _RANK_LINE.match(line)
        if not m:
            raise SpecError(f"expected 'rank R=HOST slot=S', got {line!r}", source=source, line=number)
        rank, host, slot = int(m.group(1)), _host(m.group(2), source, number), int(m.group(3))
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


def read_deepspeed_hostfile(text: str, source: str = "hostfile") -> list[tuple[str, int]]:
    """Read ``HOST slots=N`` lines, in file order (DeepSpeed's node-rank order).

    Examples
    --------
    >>> read_deepspeed_hostfile("n8 slots=4\\nn10 slots=2\\n")
    [('n8', 4), ('n10', 2)]
    """
    out, seen = [], set()
    for number, line in _lines(text):
        words = line.split()
        if len(words) != 2 or not re.fullmatch(r"slots=[1-9]\d*", words[1]):
            raise SpecError(f"expected 'HOST slots=N', got {line!r}", source=source, line=number)
        host = _host(words[0], source, number)
        if host in seen:
            raise SpecError(f"host {host} is listed twice", source=source, line=number)
        seen.add(host)
        out.append((host, int(words[1].split("=")[1])))
    if not out:
        raise SpecError("no hosts", source=source)
    return out


def read_slurm_hostfile(text: str, source: str = "slurm-hostfile") -> list[str]:
    """Read SLURM_HOSTFILE: one host per line = one task, in task order."""
    hosts = [_host(line, source, number) for number, line in _lines(text)]
    if not hosts:
        raise SpecError("no hosts", source=source)
    return hosts


@dataclass(frozen=True)
class TorchrunLine:
    """One torchrun command: its node rank, torchrun options and the whole argv."""

    node_rank: int
    options: dict
    argv: tuple


def read_torchrun_commands(text: str, source: str = "torchrun-commands.txt") -> list[TorchrunLine]:
    """Read the torchrun listing (comments skipped), one command a line, by node rank."""
    out = []
    for number, line in _lines(text):
        try:
            argv = tuple(shlex.split(line))
        except ValueError as exc:
            raise SpecError(f"not a shell command line: {exc}", source=source, line=number) from None
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        if "node-rank" not in opts or not opts["node-rank"].isdigit():
            raise SpecError("a torchrun line needs --node-rank=N", source=source, line=number)
        out.append(TorchrunLine(int(opts["node-rank"]), opts, argv))
    return out


def check_against_map(rm: RankMap, *, rankfile: list | None = None, hostfile: list | None = None,
                      slurm_hosts: list | None = None) -> None:
    """Raise LaunchError naming the first rank or host whose placement differs from the map."""
    if rankfile is not None:
        if len(rankfile) != rm.world_size:
            raise LaunchError(f"the rankfile has {len(rankfile)} ranks, the map {rm.world_size}")
        for e in rankfile:
            want = rm.entry(e.rank)
            if (e.host, e.slot) != (want["host"], want["local_rank"]):
                raise LaunchError(f"rankfile puts rank {e.rank} on {e.host} slot {e.slot}; the map on "
                                  f"{want['host']} local rank {want['local_rank']}")
    if hostfile is not None and list(hostfile) != list(zip(rm.hosts, rm.nprocs)):
        raise LaunchError(f"the hostfile lists {hostfile[:3]}...; the map's node order is "
                          f"{list(zip(rm.hosts, rm.nprocs))[:3]}...")
    if slurm_hosts is not None and list(slurm_hosts) != list(rm.hosts):
        raise LaunchError(f"SLURM_HOSTFILE lists {slurm_hosts[:3]}...; the map's node order is {list(rm.hosts[:3])}...")
