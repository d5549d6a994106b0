"""What every launch format shares: the options, host checks, the engine's arguments, script
headers and the line reader of the launch files. No torch here.

Launchers lose host order in known ways, and a host that does not resolve can fall back to
localhost and hang. So every hostname must be an RFC 1123 name or an IP address, and (unless
``resolve=False``) must resolve here; a failure names the host and nothing falls back to
localhost. A loopback master address is refused for a multi-host map. Every value written
into a script is quoted with :func:`shlex.quote`.

References
----------
.. [1] R. Braden (ed.), "Requirements for Internet Hosts -- Application and Support",
   RFC 1123, section 2.1 (host names). https://www.rfc-editor.org/rfc/rfc1123
.. [2] Python documentation, ``shlex.quote``. https://docs.python.org/3/library/shlex.html#shlex.quote
.. [3] PyTorch documentation, "torchrun (Elastic Launch)": ``--master-addr``, ``--master-port``,
   ``--no-python``, ``-m``. https://pytorch.org/docs/stable/elastic/run.html
.. [4] DeepSpeed source, ``deepspeed/launcher/runner.py``: ``--module``, ``--no_python``.
   https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/launcher/runner.py
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.names import host_identity, host_problem

__all__ = ["ENGINE_ENTRY", "RANKMAP_FILE_VAR", "LaunchOptions", "entry_problem", "check_host", "check_hosts", "engine_args",
           "ShellExpr", "shell_join", "script_header", "workdir_lines", "text_lines", "read_host"]

ENGINE_ENTRY = ("-m", "rankmap.engine.train")
# Generated scripts export the rank map's path under this name, so a user's script finds it
# (rankmap.launch.check_placement reads it).
RANKMAP_FILE_VAR = "RANKMAP_FILE"


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """How the generated lines start the engine or the user's own script.

    Paths are written as given: a relative path is read on the hosts relative to the work
    directory (``workdir``; by default the directory the job is started from, Slurm's
    ``SLURM_SUBMIT_DIR``), never turned into an absolute path of the planning machine.

    Attributes
    ----------
    rankmap_path : str
        Path of rankmap.json as the hosts see it (relative to the work directory, or absolute).
    config_path, out_dir : str or None
        The engine's ``--config`` and ``--out`` (None: left out; the bundled engine only).
    master_addr : str or None
        Rendezvous address; None: the map's node 0 host.
    master_port : int
    torchrun : str
        The torchrun command (split with shlex), e.g. ``torchrun`` or ``python -m torch.distributed.run``.
    entry : tuple of str
        What torchrun runs: ``("-m", "rankmap.engine.train")`` (the bundled engine, given the
        rank map and its options) by default; else the user's own command, argv-exact
        (``("train.py", "--lr", "3e-4")`` or ``("-m", "pkg.mod")``), given nothing more.
        See :func:`entry_problem` for the forms each launcher can run.
    no_python : bool
        Run ``entry`` as a program (``./train.sh``, ``python3 x.py``): torchrun ``--no-python``,
        DeepSpeed ``--no_python``, mpirun without ``${PYTHON:-python3}`` in front.
    workdir : str or None
        Directory the scripts change to before starting anything (None: where they are started).
    resolve : bool
        Check that every host resolves on this machine.
    steps : int or None
        The engine's ``--steps`` (None: the config's).

    Raises
    ------
    LaunchError
        A port outside 1..65535, an empty torchrun command or entry, or engine options
        (``--config``, ``--out``, ``--steps``) with a user's command.

    Examples
    --------
    >>> LaunchOptions(rankmap_path="/shared/rankmap.json").master_port
    29500
    >>> LaunchOptions(rankmap_path="r.json", master_port=0)
    Traceback (most recent call last):
    ...
    rankmap.errors.LaunchError: --master-port must be 1..65535, got 0
    """

    rankmap_path: str
    config_path: str | None = None
    out_dir: str | None = None
    master_addr: str | None = None
    master_port: int = 29500
    torchrun: str = "torchrun"
    entry: tuple = ENGINE_ENTRY
    workdir: str | None = None
    resolve: bool = True
    steps: int | None = None
    no_python: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.master_port <= 65535:
            raise LaunchError(f"--master-port must be 1..65535, got {self.master_port}")
        if not shlex.split(self.torchrun):
            raise LaunchError("--torchrun must name a command")
        if not self.entry:
            raise LaunchError("the command after -- is empty: give a script (train.py ...) or -m MODULE")
        why = entry_problem(tuple(self.entry), self.no_python)
        if why:
            raise LaunchError(why)
        given = [name for name, v in (("--config", self.config_path), ("--run-dir", self.out_dir),
                                      ("--steps", self.steps)) if v is not None]
        if self.user_command and given:
            raise LaunchError(f"{', '.join(given)} are options of the bundled engine; with your own command "
                              f"after --, pass your script's own options there")

    @property
    def user_command(self) -> bool:
        """Whether the entry is the user's own command rather than the bundled engine."""
        return tuple(self.entry) != ENGINE_ENTRY


_INTERPRETER = re.compile(r"(python|pypy)[0-9.]*")


def entry_problem(entry: tuple, no_python: bool = False) -> str | None:
    """Why a launcher cannot run ``entry`` (the words after ``--``) as given, or None.

    torchrun (and the DeepSpeed launcher) start ``python -u SCRIPT ARGS`` or ``python -u -m
    MODULE ARGS`` on every host, and run the command itself only with ``--no-python`` [3]_,
    [4]_; ``mpirun.sh`` runs ``${PYTHON:-python3}`` in front of it the same way. So without
    ``no_python`` the entry is ``SCRIPT.py ARGS`` or ``-m MODULE ARGS``: an interpreter first
    (``python train.py`` would run ``python python train.py``) or another program (``./train.sh``,
    which python cannot read) is refused; with ``no_python`` it is any program, not ``-m``.

    Examples
    --------
    >>> entry_problem(("train.py", "--lr", "3e-4")), entry_problem(("./train.sh",), no_python=True)
    (None, None)
    >>> print(entry_problem(("python3", "-m", "pkg.train")))
    'python3' after --: the launcher starts python itself (torchrun, deepspeed; mpirun.sh runs ${PYTHON:-python3}): give -- -m pkg.train ..., or add --no-python to run the command as given
    """
    first = entry[0] if entry else ""
    if no_python:
        return ("--no-python runs a program, and -m MODULE needs python: drop --no-python, or give the program "
                "after --") if first == "-m" else None
    if _INTERPRETER.fullmatch(first.rsplit("/", 1)[-1]):
        form = "-- " + " ".join([*entry[1:3], "..."][:3]) if len(entry) > 1 else "-- SCRIPT.py ARGS"
        return (f"{first!r} after --: the launcher starts python itself (torchrun, deepspeed; mpirun.sh runs "
                f"${{PYTHON:-python3}}): give {form}, or add --no-python to run the command as given")
    if first == "-m" and len(entry) < 2:
        return "-m after -- names no module: give -- -m MODULE ARGS (or a script: -- train.py ARGS)"
    if first.startswith("-") and first != "-m":
        return f"{first!r} after --: give SCRIPT.py ARGS or -m MODULE ARGS (options of the launcher are not passed)"
    if first != "-m" and not first.endswith(".py"):
        return (f"{first!r} after -- is not a Python script (SCRIPT.py) or -m MODULE: the launcher would run it "
                f"with python; add --no-python to run a program (a shell script, a binary) as is")
    return None


def check_host(name: str, what: str = "host") -> None:
    """Refuse anything that is neither an RFC 1123 hostname nor an IP address.

    Parameters
    ----------
    name : str
        Hostname or IP address.
    what : str
        How the error names it ("host", "master address", ...).

    Raises
    ------
    LaunchError
        ``name`` is not a valid hostname or IP address (the reason is named).

    Examples
    --------
    >>> check_host("fe80::1"), check_host("gpu-r1-n01")
    (None, None)
    >>> check_host("h1;reboot")
    Traceback (most recent call last):
    ...
    rankmap.errors.LaunchError: host 'h1;reboot' is not a valid hostname or IP address: character ';' is not allowed in a hostname (RFC 1123)
    """
    why = host_problem(name)  # the one host grammar (rankmap.names): no IPv6 zone ids, canonical IPs
    if why:
        raise LaunchError(f"{what} {(name[:60] if isinstance(name, str) else name)!r} is not a valid hostname or "
                          f"IP address: {why}")


def _resolve(name: str) -> tuple[str, list[str] | str]:
    """``(name, sorted addresses)``, or ``(name, why it failed)``."""
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
    """Validate (and, with ``opts.resolve``, resolve) every host and the master address.

    Parameters
    ----------
    rm : RankMap
    opts : LaunchOptions

    Returns
    -------
    str
        The master address: ``opts.master_addr`` or the map's node 0 host.

    Raises
    ------
    LaunchError
        Naming the first bad or unresolvable host and its node rank, or a loopback master
        address of a multi-host map.
    """
    master = opts.master_addr or rm.hosts[0]
    seen: dict[str, int] = {}
    for node, host in enumerate(rm.hosts):
        check_host(host, f"host (node rank {node})")
        first = seen.setdefault(host_identity(host), node)
        if first != node:  # DNS ignores case (RFC 4343): two node ranks would start on one machine
            raise LaunchError(f"hosts {rm.hosts[first]!r} (node rank {first}) and {host!r} (node rank {node}) "
                              f"are one machine (host names ignore case)")
    check_host(master, "master address")
    if len(rm.hosts) > 1 and (master == "localhost" or _is_loopback(master)):
        raise LaunchError(f"master address {master!r} is a loopback address: the other {len(rm.hosts) - 1} hosts "
                          f"would rendezvous with themselves")
    if opts.resolve:
        _check_resolved(rm, master)
    return master


def _check_resolved(rm: RankMap, master: str) -> None:
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


def engine_args(opts: LaunchOptions) -> list[str]:
    """What the launcher runs: the bundled engine with its options, or the user's command as given.

    Examples
    --------
    >>> engine_args(LaunchOptions(rankmap_path="/s/rankmap.json", steps=2))
    ['-m', 'rankmap.engine.train', '--rankmap', '/s/rankmap.json', '--steps', '2']
    >>> engine_args(LaunchOptions(rankmap_path="plan/rankmap.json", entry=("train.py", "--lr", "3e-4")))
    ['train.py', '--lr', '3e-4']
    """
    if opts.user_command:
        return list(opts.entry)
    args = [*opts.entry, "--rankmap", opts.rankmap_path]
    if opts.config_path:
        args += ["--config", opts.config_path]
    if opts.out_dir:
        args += ["--out", opts.out_dir]
    if opts.steps is not None:
        args += ["--steps", str(opts.steps)]
    return args


class ShellExpr(str):
    """A word that :func:`shell_join` writes as is: a shell expression of the generator's own
    (``"$launch_dir/rankfile"``), never text that came from input."""


def shell_join(words: list) -> str:
    """One shell command line, argv-exact: every word quoted with :func:`shlex.quote`, except
    :class:`ShellExpr` words, written as they are. Placeholders are whole words, so nothing
    in a user's argument is ever substituted.

    Examples
    --------
    >>> print(shell_join(["mpirun", "--rankfile", ShellExpr('"$d/rankfile"'), "x RANKFILE", "$(id)"]))
    mpirun --rankfile "$d/rankfile" 'x RANKFILE' '$(id)'
    """
    return " ".join(w if isinstance(w, ShellExpr) else shlex.quote(w) for w in words)


def script_header(rm: RankMap, what: str) -> str:
    """Comment lines opening every generated script: ``what``, then the job it starts."""
    job = rm.job
    return (f"# {what}\n# Generated by `rankmap launch` for job {job.name!r}: {rm.world_size} ranks on "
            f"{len(rm.hosts)} hosts (tp={job.tp} pp={job.pp} dp={job.dp}), cluster {rm.cluster_name!r}.\n")


def workdir_lines(opts: LaunchOptions, default: str | None = None) -> str:
    """Shell lines: change to the work directory, export the rank map's path (``RANKMAP_FILE``).

    ``default`` is a shell expression for the directory when ``opts.workdir`` is None
    (e.g. ``"${SLURM_SUBMIT_DIR:-$PWD}"``); with neither, the script stays where it starts.

    Examples
    --------
    >>> print(workdir_lines(LaunchOptions(rankmap_path="plan/rankmap.json", workdir="/s/my job")), end="")
    cd '/s/my job'
    export RANKMAP_FILE=plan/rankmap.json
    """
    out = ""
    if opts.workdir:
        out += f"cd {shlex.quote(opts.workdir)}\n"
    elif default:
        out += f'cd "{default}"\n'
    return out + f"export {RANKMAP_FILE_VAR}={shlex.quote(opts.rankmap_path)}\n"


def text_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of the lines that say something (``#`` comments and blanks skipped).

    Examples
    --------
    >>> list(text_lines("# hosts\\nn1  # first\\n\\nn2\\n"))
    [(2, 'n1'), (4, 'n2')]
    """
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            yield number, line


def read_host(name: str, source: str, line: int) -> str:
    """``name`` when it is a valid host (see :func:`check_host`).

    Raises
    ------
    SpecError
        ``SOURCE:LINE: host ... is not a valid hostname or IP address``.
    """
    try:
        check_host(name)
    except LaunchError as exc:
        raise SpecError(str(exc), source=source, line=line) from None
    return name
