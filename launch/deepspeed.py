"""DeepSpeed: a hostfile in node-rank order (``deepspeed-hostfile``: ``hostfile`` is the plan's own,
one host a line), ``deepspeed.sh`` using it, and the hostfile read
back and checked against the map.

A DeepSpeed hostfile lists ``host slots=N`` per line [1]_; the launcher numbers nodes in file
order, so line n is the map's node rank n and the master address is node 0. The launcher
runs a script, a module (``--module``) or a program (``--no_python``), without ``--local_rank``
(``--no_local_rank``, [2]_);
DeepSpeed forwards ``RANKMAP_FILE`` when it is listed in ``.deepspeed_env``. No torch here.

References
----------
.. [1] DeepSpeed documentation, "Getting Started", "Resource Configuration (multi-node)".
   https://www.deepspeed.ai/getting-started/#resource-configuration-multi-node
.. [2] DeepSpeed source, ``deepspeed/launcher/runner.py``: ``--hostfile``, ``--master_addr``,
   ``--master_port``, ``--no_local_rank``, ``--module``.
   https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/launcher/runner.py
"""

from __future__ import annotations

import re
import shlex

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import (
    LaunchOptions,
    ShellExpr,
    engine_args,
    read_host,
    script_header,
    shell_join,
    text_lines,
    workdir_lines,
)

__all__ = ["deepspeed_hostfile", "deepspeed_script", "deepspeed_files",
           "read_deepspeed_hostfile", "check_deepspeed_hostfile", "HOSTFILE"]

#: DeepSpeed's hostfile (``host slots=N``), never ``hostfile``: that name is the plan's own
#: (one host a line, beside rankmap.json), which ``launch --out PLAN_FOLDER`` must not replace.
HOSTFILE = "deepspeed-hostfile"


def _user_args(opts: LaunchOptions) -> list[str]:
    """The DeepSpeed launcher's spelling of the entry: ``--module MOD ARGS`` or ``SCRIPT ARGS``."""
    args = engine_args(opts)
    if opts.no_python:
        return ["--no_python", *args]
    return ["--module", *args[1:]] if args[0] == "-m" else args


def deepspeed_hostfile(rm: RankMap) -> str:
    """DeepSpeed hostfile: ``host slots=N`` per host, in node-rank order (DeepSpeed keeps file order)."""
    return "".join(f"{h} slots={n}\n" for h, n in zip(rm.hosts, rm.nprocs))


def deepspeed_script(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> str:
    """``deepspeed.sh``: the DeepSpeed launcher over the hostfile, master = node 0."""
    q = shlex.quote
    cmd = shell_join(["deepspeed", "--hostfile", ShellExpr('"$launch_dir/deepspeed-hostfile"'), "--master_addr", master,
                      "--master_port", str(opts.master_port), "--no_local_rank", *_user_args(opts)])
    return ("#!/usr/bin/env bash\n" + script_header(rm, "DeepSpeed launch; node rank n = line n of the hostfile.")
            + "set -euo pipefail\n" + workdir_lines(opts) + f"launch_dir=\"$(realpath {q(launch_dir)})\"\n"
            + "exec " + cmd + "\n")


def deepspeed_files(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> dict[str, str]:
    """``{file name: text}`` of the DeepSpeed format: ``deepspeed-hostfile`` and ``deepspeed.sh``."""
    return {HOSTFILE: deepspeed_hostfile(rm), "deepspeed.sh": deepspeed_script(rm, opts, launch_dir, master)}


def read_deepspeed_hostfile(text: str, source: str = "deepspeed-hostfile") -> list[tuple[str, int]]:
    """Read ``HOST slots=N`` lines, in file order (DeepSpeed's node-rank order).

    Raises
    ------
    SpecError
        ``SOURCE:LINE``: a malformed line, a bad hostname or a host listed twice; or no hosts.

    Examples
    --------
    >>> read_deepspeed_hostfile("n8 slots=4\\nn10 slots=2\\n")
    [('n8', 4), ('n10', 2)]
    """
    out, seen = [], set()
    for number, line in text_lines(text):
        words = line.split()
        if len(words) != 2 or not re.fullmatch(r"slots=[1-9]\d*", words[1]):
            raise SpecError(f"expected 'HOST slots=N', got {line!r}", source=source, line=number)
        host = read_host(words[0], source, number)
        if host in seen:
            raise SpecError(f"host {host} is listed twice", source=source, line=number)
        seen.add(host)
        out.append((host, int(words[1].split("=")[1])))
    if not out:
        raise SpecError("no hosts", source=source)
    return out


def check_deepspeed_hostfile(rm: RankMap, hostfile: list[tuple[str, int]]) -> None:
    """Check that a read hostfile lists the map's hosts and process counts in node-rank order.

    Raises
    ------
    LaunchError
        The hosts, their order or their slot counts differ from the map's.
    """
    if list(hostfile) != list(zip(rm.hosts, rm.nprocs)):
        raise LaunchError(f"the hostfile lists {hostfile[:3]}...; the map's node order is "
                          f"{list(zip(rm.hosts, rm.nprocs))[:3]}...")
