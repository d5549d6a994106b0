"""What users run to start a planned job: torchrun lines, a Slurm batch script, an Open MPI
rankfile and a DeepSpeed hostfile, all keeping the plan's host order. No torch here.

Launchers lose host order in known ways: torchrun's c10d rendezvous ignores ``--node-rank``
(ranks follow the agents' arrival), several tools sort hostnames as strings (node66 < node7),
and a host that does not resolve can fall back to localhost and hang. So:

- torchrun lines use the static rendezvous (``--rdzv-backend=static``) with ``--node-rank``
  from the map and ``--master-addr`` of the map's node 0 (PyTorch docs, "torchrun (Elastic
  Launch)": ``--node-rank`` is honoured by the static backend only);
- the Slurm script starts one torchrun agent per host with ``srun --distribution=arbitrary``
  and ``SLURM_HOSTFILE`` listing one line per task in node-rank order (Slurm docs, srun
  ``--distribution=arbitrary``), each task running the same torchrun line as the torchrun
  format, chosen by its task id (``SLURM_PROCID`` = node rank);
- the Open MPI rankfile pins ``rank r=host slot=local_rank`` line by line (Open MPI docs,
  ``mpirun --rankfile``); the DeepSpeed hostfile lists ``host slots=N`` in node-rank order;
- every value in a script is quoted with ``shlex.quote``; hostnames must be RFC 1123 names or
  IP addresses, and (unless ``resolve=False``) must resolve here; a failure names the host and
  nothing falls back to localhost. A loopback master address is refused for a multi-host map.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rankmap.errors import LaunchError
from rankmap.job.rank_map import RankMap
from rankmap.topology.hostnames import check_hostname, compress_hostlist

__all__ = ["LaunchOptions", "FORMATS", "check_host", "check_hosts", "torchrun_args", "torchrun_lines",
           "torchrun_script", "slurm_hostfile", "slurm_script", "rankfile_text", "mpirun_script",
           "deepspeed_hostfile", "deepspeed_script", "launch_files"]

FORMATS = ("torchrun", "slurm", "mpi", "deepspeed")


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """How the generated lines start the engine.

    Attributes
    ----------
    rankmap_path : str
        Path of rankmap.json as the hosts see it (absolute, on a shared file system).
    config_path, out_dir : str or None
        The engine's ``--config`` and ``--out`` (None: left out).
    master_addr : str or None
        Rendezvous address; None: the map's node 0 host.
    master_port : int
    torchrun : str
        The torchrun command (split with shlex), e.g. ``torchrun`` or ``python -m torch.distributed.run``.
    entry : tuple of str
        What torchrun runs: ``("-m", "rankmap.engine.train")`` by default.
    resolve : bool
        Check that every host resolves on this machine.
    steps : int or None
        The engine's ``--steps`` (None: the config's).
    """

    rankmap_path: str
    config_path: str | None = None
    out_dir: str | None = None
    master_addr: str | None = None
    master_port: int = 29500
    torchrun: str = "torchrun"
    entry: tuple = ("-m", "rankmap.engine.train")
    resolve: bool = True
    steps: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.master_port <= 65535:
            raise LaunchError(f"--master-port must be 1..65535, got {self.master_port}")
        if not shlex.split(self.torchrun):
            raise LaunchError("--torchrun must name a command")


def check_host(name: str, what: str = "host") -> None:
    """Refuse anything that is neither an RFC 1123 hostname nor an IP address.

    Examples
    --------
    >>> check_host("fe80::1"), check_host("gpu-r1-n01")
    (None, None)
    >>> check_host("h1;reboot")
    Traceback (most recent call last):
    ...
    rankmap.errors.LaunchError: host 'h1;reboot' is not a valid hostname or IP address: character ';' is not allowed in a hostname (RFC 1123)
    """
    try:
        ipaddress.ip_address(name)
        return
    except ValueError:
        pass
    why = check_hostname(name)
    if why:
        raise LaunchError(f"{what} {name!r} is not a valid hostname or IP address: {why}")


def _resolve(name: str) -> tuple[str, list[str] | str]:
    try:
        return name, sorted({info[4][0] for info in socket.getaddrinfo(name, None)})
    except (socket.gaierror, UnicodeError, OSError) as exc:
        return name, str(getattr(exc, "strerror", None) or exc)


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


def check_hosts(rm: RankMap, opts: LaunchOptions) -> str:
    """Validate (and resolve) every host and the master address; return the master address.

    Raises
    ------
    LaunchError
        Naming the first bad or unresolvable host and its node rank.
    """
    master = opts.master_addr or rm.hosts[0]
    for node, host in enumerate(rm.hosts):
        check_host(host, f"host (node rank {node})")
    check_host(master, "master address")
    if len(rm.hosts) > 1 and (master == "localhost" or _is_loopback(master)):
        raise LaunchError(f"master address {master!r} is a loopback address: the other {len(rm.hosts) - 1} hosts "
                          f"would rendezvous with themselves")
    if opts.resolve:
        names = list(dict.fromkeys([*rm.hosts, master]))
        with ThreadPoolExecutor(max_workers=min(32, len(names))) as pool:
            results = dict(pool.map(_resolve, names))
        for node, host in enumerate([*rm.hosts, master]):
            found = results[host]
            who = f"host {host!r} (node rank {node})" if node < len(rm.hosts) else f"master address {host!r}"
            if isinstance(found, str):
                raise LaunchError(f"{who} does not resolve on this machine ({found}); rankmap never falls back "
                                  f"to localhost: fix the name or DNS, or pass --no-resolve to skip this check")
        if len(rm.hosts) > 1 and all(_is_loopback(a) for a in results[master]):
            raise LaunchError(f"master address {master!r} resolves to loopback ({', '.join(results[master])}) on "
                              f"this machine: other hosts could not reach it; give --master-addr")
    return master


def _engine_args(opts: LaunchOptions) -> list[str]:
    args = [*opts.entry, "--rankmap", opts.rankmap_path]
    if opts.config_path:
        args += ["--config", opts.config_path]
    if opts.out_dir:
        args += ["--out", opts.out_dir]
    if opts.steps is not None:
        args += ["--steps", str(opts.steps)]
    return args


def torchrun_args(rm: RankMap, node: int, master: str, port: int, rdzv_backend: str = "static") -> list[str]:
    """torchrun's options for node rank ``node`` (static rendezvous pins the node rank)."""
    return [f"--nnodes={len(rm.hosts)}", f"--nproc-per-node={rm.nprocs[node]}", f"--node-rank={node}",
            f"--rdzv-backend={rdzv_backend}", f"--master-addr={master}", f"--master-port={port}",
            "--max-restarts=0"]


def torchrun_lines(rm: RankMap, opts: LaunchOptions, master: str | None = None) -> list[str]:
    """One shell line per node rank, in node-rank order (run line n on ``rm.hosts[n]``)."""
    master = master or check_hosts(rm, opts)
    prog = shlex.split(opts.torchrun)
    return [shlex.join([*prog, *torchrun_args(rm, n, master, opts.master_port), *_engine_args(opts)])
            for n in range(len(rm.hosts))]


def _header(rm: RankMap, what: str) -> str:
    job = rm.job
    return (f"# {what}\n# Generated by `rankmap launch` for job {job.name!r}: {rm.world_size} ranks on "
            f"{len(rm.hosts)} hosts (tp={job.tp} pp={job.pp} dp={job.dp}), cluster {rm.cluster_name!r}.\n")


def torchrun_script(rm: RankMap, opts: LaunchOptions, master: str | None = None) -> str:
    """``torchrun.sh``: run on every host; picks its line by argument, ``SLURM_PROCID`` or host name."""
    lines = torchrun_lines(rm, opts, master)
    q = shlex.quote
    arms_host = "".join(f"  {n}) host={q(h)} ;;\n" for n, h in enumerate(rm.hosts))
    arms_run = "".join(f"  {n})\n    exec {line}\n    ;;\n" for n, line in enumerate(lines))
    names = " ".join(q(h) for h in rm.hosts)
    return (
        "#!/usr/bin/env bash\n"
        + _header(rm, "One torchrun agent per host, static rendezvous: node rank n runs on host n of the plan.")
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
        'case "$node_rank" in\n' + arms_run + "esac\n")


def slurm_hostfile(rm: RankMap) -> str:
    """SLURM_HOSTFILE for one torchrun agent per host: line n = host of node rank n (task n)."""
    return "".join(h + "\n" for h in rm.hosts)


_JOB_NAME = re.compile(r"[^A-Za-z0-9._-]")


def slurm_script(rm: RankMap, launch_dir: str) -> str:
    """``slurm.sbatch``: one task per host, placed by ``slurm-hostfile``, each running ``torchrun.sh``."""
    q = shlex.quote
    n = len(rm.hosts)
    name = _JOB_NAME.sub("-", rm.job.name)[:64] or "rankmap"
    return (
        "#!/bin/bash\n"
        f"#SBATCH --job-name={name}\n#SBATCH --nodes={n}\n#SBATCH --ntasks={n}\n#SBATCH --ntasks-per-node=1\n"
        f"#SBATCH --nodelist={compress_hostlist(list(rm.hosts))}\n#SBATCH --exclusive\n"
        + _header(rm, "Slurm batch script: task n (a torchrun agent) runs on line n of slurm-hostfile = node rank n.")
        + "set -euo pipefail\n"
        f"launch_dir={q(launch_dir)}\n"
        'export SLURM_HOSTFILE="$launch_dir/slurm-hostfile"\n'
        f"srun --nodes={n} --ntasks={n} --ntasks-per-node=1 --distribution=arbitrary --kill-on-bad-exit=1 "
        'bash "$launch_dir/torchrun.sh"\n')


def rankfile_text(rm: RankMap) -> str:
    """Open MPI rankfile: ``rank r=host slot=local_rank`` for every rank, in rank order."""
    return "".join(f"rank {r}={e['host']} slot={e['local_rank']}\n"
                   for r, e in ((r, rm.entry(r)) for r in range(rm.world_size)))


def mpirun_script(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> str:
    """``mpirun.sh``: Open MPI with the rankfile; rank r starts where the map says."""
    q = shlex.quote
    cmd = shlex.join(["mpirun", "-np", str(rm.world_size), "--rankfile", "RANKFILE", "--bind-to", "none",
                      "-x", f"MASTER_ADDR={master}", "-x", f"MASTER_PORT={opts.master_port}",
                      "python", *_engine_args(opts)])
    return ("#!/usr/bin/env bash\n" + _header(rm, "Open MPI launch with a rankfile (Open MPI 5: --map-by "
                                              "rankfile:file=FILE instead of --rankfile FILE).")
            + "set -euo pipefail\n" + f"launch_dir={q(launch_dir)}\n"
            + "exec " + cmd.replace("RANKFILE", '"$launch_dir/rankfile"') + "\n")


def deepspeed_hostfile(rm: RankMap) -> str:
    """DeepSpeed hostfile: ``host slots=N`` per host, in node-rank order (DeepSpeed keeps file order)."""
    return "".join(f"{h} slots={n}\n" for h, n in zip(rm.hosts, rm.nprocs))


def deepspeed_script(rm: RankMap, opts: LaunchOptions, launch_dir: str, master: str) -> str:
    """``deepspeed.sh``: the DeepSpeed launcher over the hostfile, master = node 0."""
    q = shlex.quote
    cmd = shlex.join(["deepspeed", "--hostfile", "HOSTFILE", "--master_addr", master, "--master_port",
                      str(opts.master_port), "--no_local_rank", "--module", *_engine_args(opts)[1:]])
    return ("#!/usr/bin/env bash\n" + _header(rm, "DeepSpeed launch; node rank n = line n of the hostfile.")
            + "set -euo pipefail\n" + f"launch_dir={q(launch_dir)}\n"
            + "exec " + cmd.replace("HOSTFILE", '"$launch_dir/hostfile"') + "\n")


def launch_files(rm: RankMap, fmt: str, opts: LaunchOptions, launch_dir: str | Path) -> dict[str, str]:
    """``{file name: text}`` of one format, ready for :func:`rankmap.fileio.atomic_write_files`.

    Raises
    ------
    LaunchError
        Unknown format, bad or unresolvable host.
    """
    if fmt not in FORMATS:
        raise LaunchError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if opts.entry != ("-m", "rankmap.engine.train") and fmt == "deepspeed":
        raise LaunchError("the deepspeed format runs modules only (entry -m MODULE)")
    master = check_hosts(rm, opts)
    launch_dir = str(Path(launch_dir).resolve())
    lines = torchrun_lines(rm, opts, master)
    listing = "".join(f"# node rank {n}: {h}\n{line}\n" for n, (h, line) in enumerate(zip(rm.hosts, lines)))
    if fmt == "torchrun":
        return {"torchrun-commands.txt": listing, "torchrun.sh": torchrun_script(rm, opts, master)}
    if fmt == "slurm":
        return {"slurm.sbatch": slurm_script(rm, launch_dir), "slurm-hostfile": slurm_hostfile(rm),
                "torchrun.sh": torchrun_script(rm, opts, master), "torchrun-commands.txt": listing}
    if fmt == "mpi":
        return {"rankfile": rankfile_text(rm), "mpirun.sh": mpirun_script(rm, opts, launch_dir, master)}
    return {"hostfile": deepspeed_hostfile(rm), "deepspeed.sh": deepspeed_script(rm, opts, launch_dir, master)}
