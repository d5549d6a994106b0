"""``rankmap launch --local``: the whole job on this machine, one torchrun agent per host.

Each host of the rank map is emulated by its own torchrun agent on 127.0.0.1, started with
the same static-rendezvous options the generated torchrun lines carry (its ``--node-rank``
from the map) and ``RANKMAP_HOST`` naming the host it stands for, so the engine's start-up
checks see the map's hosts. No torch is imported here: agents run
``python -m torch.distributed.run`` in child processes.

A run is refused when the map has more worker processes than this machine can hold
(:func:`check_local_size`: at most ``max_procs``, by default :func:`default_max_procs` = 2 per
CPU and at least 8); the message names a small plan to use instead.

Agents are started in the order given (default: node-rank order), each in its own session.
When the run ends for any reason -- an agent failed, the time ran out, Ctrl-C (SIGINT) or
SIGTERM -- every process it started is stopped, workers included: torchrun starts its workers
in new sessions of their own [3]_, so killing an agent's process group misses them. Every
agent therefore carries a marker, ``RANKMAP_LOCAL_RUN=<token>``, in its environment, which its
workers inherit; at the end the agents' groups get SIGKILL (an agent sent SIGTERM prints a
traceback and its workers' failures, burying why the run stopped), then every process whose
``/proc/PID/environ`` holds this run's marker (SIGTERM, then SIGKILL after a grace period).
Only this run's processes carry the token. On a timeout the workers first get SIGABRT, so each
prints its Python stack (faulthandler) and a hang shows where it is.

With a log folder (``rankmap launch --local`` gives ``RUN/logs``), every worker's stderr is kept
in a file of its own (torchrun's ``--log-dir``, ``--redirects 2 --tee 2`` [1]_) and still printed,
each line prefixed ``[rankN]:``; each agent is :mod:`rankmap.launch.local_agent`, which writes
its failed workers to ``RUN/logs/HOST/failures.json``. When a worker fails, the run's error
names the worker that failed first -- rank, host, local rank, pid, exit code or signal -- and
its stderr file (:func:`describe_failure`), not the agent that reported it: on a multi-host run
the peers of a dead worker fail too ("Connection closed by peer"), and their agent may exit first.

References
----------
.. [1] PyTorch documentation, "torchrun (Elastic Launch)": the static rendezvous and ``--node-rank``.
   https://pytorch.org/docs/stable/elastic/run.html
.. [2] Python documentation, ``faulthandler`` (``PYTHONFAULTHANDLER``).
   https://docs.python.org/3/library/faulthandler.html
.. [3] PyTorch source, ``torch/distributed/elastic/multiprocessing/subprocess_handler/
   subprocess_handler.py``: workers are started with ``start_new_session=True``.
   https://github.com/pytorch/pytorch/tree/main/torch/distributed/elastic/multiprocessing
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rankmap.errors import LaunchError, RunTerminated, RunTimedOut
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import ENGINE_ENTRY, RANKMAP_FILE_VAR
from rankmap.launch.local_agent import failure_order
from rankmap.launch.torchrun import torchrun_args

__all__ = ["Agent", "local_agents", "free_port", "run_agents", "default_max_procs", "check_local_size",
           "marked_pids", "describe_failure", "worker_logs", "MARKER_VAR"]

LOCAL_ADDR = "127.0.0.1"
MARKER_VAR = "RANKMAP_LOCAL_RUN"
PREFIX_VAR = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"  # torchrun's prefix of tee'd lines ([1], run.py)
REPORT_WAIT_S = 3.0  # after one agent fails, how long the others get to report theirs
SMALL_EXAMPLE = "rankmap plan --example racks --tp 2 --pp 2 --dp 2 --out small  (8 ranks on one host)"


def default_max_procs(cpus: int | None = None) -> int:
    """Most worker processes ``--local`` starts without ``--max-procs``: 2 per CPU, at least 8.

    Examples
    --------
    >>> default_max_procs(2), default_max_procs(16)
    (8, 32)
    """
    return max(8, 2 * (cpus or os.cpu_count() or 1))


def check_local_size(rm: RankMap, max_procs: int | None = None) -> None:
    """Refuse a map with more workers than ``max_procs`` (default :func:`default_max_procs`).

    Raises
    ------
    LaunchError
        Naming the map's size, the limit, ``--max-procs`` and a small plan to use instead.
    """
    limit = max_procs or default_max_procs()
    if rm.world_size > limit:
        raise LaunchError(f"--local would start {len(rm.hosts)} torchrun agents and {rm.world_size} worker processes "
                          f"on this machine ({os.cpu_count()} CPUs); the limit is {limit} "
                          f"({'--max-procs' if max_procs else '2 per CPU, at least 8'}). Plan a small job instead, "
                          f"e.g. {SMALL_EXAMPLE}, or raise the limit with --max-procs")


@dataclass(frozen=True, kw_only=True)
class Agent:
    """One emulated host: its node rank, the argv of its torchrun agent and extra environment.

    ``report`` (with a log folder) is where the agent writes its failed workers
    (:mod:`rankmap.launch.local_agent`); ``log_dir`` is torchrun's ``--log-dir``.
    """

    host: str
    node_rank: int
    argv: tuple
    env: dict
    first_rank: int = 0
    log_dir: Path | None = None
    report: Path | None = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCAL_ADDR, 0))
        return sock.getsockname()[1]


def local_agents(rm: RankMap, engine_args: list[str], port: int, rdzv_backend: str = "static",
                 entry: tuple = ENGINE_ENTRY, rankmap_file: str | None = None,
                 log_dir: str | Path | None = None) -> list[Agent]:
    """The agents of :func:`run_agents`, in node-rank order.

    ``entry`` is what torchrun runs (the engine's module, or a user's command given
    ``engine_args=[]``); ``rankmap_file`` is exported as ``RANKMAP_FILE``.
    ``rdzv_backend="c10d"`` reproduces the launch that loses host order (for tests).

    With ``log_dir``, each agent is :mod:`rankmap.launch.local_agent` (torchrun plus a failure
    report in ``log_dir/HOST/failures.json``) and keeps each worker's stderr in
    ``log_dir/HOST/RUN_ID_XXXX/attempt_0/LOCAL_RANK/stderr.log`` while also printing it, each
    line prefixed ``[rankN]:`` (torchrun's ``--redirects 2 --tee 2``); without, plain torchrun.
    """
    agents = []
    for node, host in enumerate(rm.hosts):
        opts = torchrun_args(rm, node, LOCAL_ADDR, port, rdzv_backend)
        if rdzv_backend != "static":
            opts += [f"--rdzv-endpoint={LOCAL_ADDR}:{port}", "--rdzv-id=rankmap-local"]
        env = {"RANKMAP_HOST": host, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"), "PYTHONFAULTHANDLER": "1"}
        if rankmap_file:
            env[RANKMAP_FILE_VAR] = rankmap_file
        if log_dir is None:
            argv = (sys.executable, "-m", "torch.distributed.run", *opts, *entry, *engine_args)
            agents.append(Agent(host=host, node_rank=node, argv=argv, env=env))
            continue
        host_dir = Path(log_dir) / host
        report = host_dir / "failures.json"
        opts += [f"--log-dir={host_dir}", "--redirects=2", "--tee=2"]
        env[PREFIX_VAR] = "[rank${rank}]:"
        argv = (sys.executable, "-m", "rankmap.launch.local_agent", str(report), *opts, *entry, *engine_args)
        agents.append(Agent(host=host, node_rank=node, argv=argv, env=env, first_rank=sum(rm.nprocs[:node]),
                            log_dir=host_dir, report=report))
    return agents


def _signal_all(procs: dict, sig: int) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)  # the agent's own session: it (its workers have their own)
            except ProcessLookupError:
                pass


def _kill_agents(procs: dict) -> None:
    """SIGKILL the agents still running (their own groups) and reap them all."""
    _signal_all(procs, signal.SIGKILL)
    for proc in procs.values():
        proc.wait()


def marked_pids(token: str) -> list[int]:
    """Pids of the live processes whose environment holds ``RANKMAP_LOCAL_RUN=token`` (Linux /proc).

    Processes of other users, or gone meanwhile, are skipped.
    """
    want = f"{MARKER_VAR}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if want in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return sorted(found)


def _signal_marked(token: str, sig: int) -> list[int]:
    """Send ``sig`` to every live process carrying the marker; returns their pids."""
    pids = marked_pids(token)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def _kill_marked(token: str, grace_s: float) -> None:
    """SIGTERM every process carrying the marker, then SIGKILL those left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        pids = _signal_marked(token, sig)
        deadline = time.monotonic() + wait_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = marked_pids(token)
        if not pids:
            return


def _stop(procs: dict, token: str, grace_s: float = 10.0) -> None:
    """Stop the agents still running, then their workers (SIGTERM, SIGKILL after ``grace_s``).

    The agents get SIGKILL: a torchrun agent sent SIGTERM or SIGINT raises ``SignalException``
    and prints its traceback and its workers' failures, which would bury the reason the run
    stopped (the failing agent's own report, the timeout, Ctrl-C). An agent holds nothing to
    save; its workers, which may (a user's script checkpointing on SIGTERM), get SIGTERM here.
    """
    _kill_agents(procs)
    _kill_marked(token, grace_s=grace_s)


class _Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so the run's processes are stopped."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def run_agents(agents: list[Agent], cwd: str | Path, timeout_s: float | None = None,
               start_order: list[int] | None = None, start_gap_s: float = 0.0) -> None:
    """Start the agents (in ``start_order`` of node ranks) and wait for all of them.

    Raises
    ------
    LaunchError
        PyTorch is missing, or an agent failed (naming its host and exit code).
    RunTimedOut
        ``timeout_s`` passed (exit 124); every process of the run was stopped.
    RunTerminated
        SIGTERM arrived (exit 143); every process of the run was stopped.
    """
    if importlib.util.find_spec("torch") is None:
        raise LaunchError("rankmap launch --local needs PyTorch: pip install 'rankmap[engine]' "
                          "(CPU build: pip install torch==2.13.0)")
    order = start_order if start_order is not None else list(range(len(agents)))
    procs: dict = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    token = secrets.token_hex(8)
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _main_thread() else None
    for agent in agents:
        if agent.report is not None:
            agent.log_dir.mkdir(parents=True, exist_ok=True)
            agent.report.unlink(missing_ok=True)  # a report left by an earlier run in this folder
    try:
        for i, node in enumerate(order):
            agent = agents[node]
            # the agents find rankmap where this process found it; the marker finds their workers
            env = {**os.environ, **agent.env, MARKER_VAR: token}
            procs[node] = subprocess.Popen(list(agent.argv), cwd=cwd, env=env, start_new_session=True)
            if start_gap_s and i < len(order) - 1:
                time.sleep(start_gap_s)
        _wait(agents, procs, deadline, timeout_s, token)
    except _Terminated:
        raise RunTerminated("terminated (SIGTERM); stopped every process of the run") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        _stop(procs, token)


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _wait(agents: list[Agent], procs: dict, deadline: float | None, timeout_s: float | None, token: str) -> None:
    while True:
        codes = {node: proc.poll() for node, proc in procs.items()}
        failed = [node for node, code in codes.items() if code not in (None, 0)]
        if failed:
            raise LaunchError(_failure_message(agents, procs, failed[0]))
        if all(code == 0 for code in codes.values()):
            return
        if deadline is not None and time.monotonic() > deadline:
            # A collective hang rarely turns into an error: SIGABRT makes every process print
            # where it is stuck (faulthandler, PYTHONFAULTHANDLER=1) before it is stopped.
            sys.stderr.write(f"rankmap: the local run passed --timeout {timeout_s:g} s: every worker prints its "
                             f"Python stack (SIGABRT, faulthandler) to show where it waits, then all are stopped\n")
            sys.stderr.flush()
            _kill_agents(procs)  # the agents first, or they report their workers' deaths
            sizes = {path: path.stat().st_size for _, _, path in worker_logs(agents)}
            _signal_marked(token, signal.SIGABRT)
            time.sleep(2.0)
            _echo_new_output(agents, sizes)  # the workers' stderr goes to files: their agents tee'd it
            raise RunTimedOut(f"the local run did not finish within {timeout_s:g} s; stopped its agents and workers")
        time.sleep(0.2)


def _failure_message(agents: list[Agent], procs: dict, node: int) -> str:
    """The run's error line: the worker that failed first (from the agents' reports), else the agent.

    Waits up to :data:`REPORT_WAIT_S` for the other agents to end (their workers fail soon after
    a peer dies) so every report is in before the earliest failure is picked.
    """
    deadline = time.monotonic() + REPORT_WAIT_S
    while time.monotonic() < deadline and any(proc.poll() is None for proc in procs.values()):
        time.sleep(0.1)
    rows = []
    for agent in agents:
        if agent.report is not None and agent.report.is_file():
            try:
                rows += [{**row, "host": agent.host} for row in json.loads(agent.report.read_text())["failures"]]
            except (OSError, ValueError, KeyError, TypeError):
                continue
    if not rows:
        agent = agents[node]
        hint = f"; no worker failure report in {agent.report}" if agent.report is not None else ""
        return f"the agent for host {agent.host} (node rank {node}) exited with code {procs[node].poll()}{hint}"
    rows.sort(key=failure_order)
    return describe_failure(rows[0], [r["rank"] for r in rows[1:]])


def describe_failure(row: dict, later: list[int] = ()) -> str:
    """One line naming a failed worker: rank, host, local rank, how it ended and where its output is.

    ``row`` is a report row (:func:`rankmap.launch.local_agent.failure_report`) with ``host``;
    ``later`` lists the ranks that failed after it.

    Examples
    --------
    >>> describe_failure({"rank": 3, "host": "h1", "local_rank": 3, "pid": 7, "exitcode": -6, "signal": "SIGABRT",
    ...                   "error_file": None, "stderr": "run/logs/h1/x/attempt_0/3/stderr.log", "message": ""}, [0])
    'rank 3 (host h1, local rank 3, pid 7) failed first: killed by SIGABRT (exit code -6); its output: run/logs/h1/x/attempt_0/3/stderr.log; then rank 0 failed'
    """
    how = (f"killed by {row['signal']} (exit code {row['exitcode']})" if row.get("signal")
           else f"exited with code {row['exitcode']}")
    if row.get("error_file") and row.get("message"):
        how += f": {row['message']}"
    where = row.get("stderr") or row.get("error_file")
    text = (f"rank {row['rank']} (host {row['host']}, local rank {row['local_rank']}, pid {row['pid']}) failed"
            f"{' first' if later else ''}: {how}; its output: {where or 'not kept (no stderr file)'}")
    if later:
        text += f"; then rank{'s' if len(later) > 1 else ''} {', '.join(map(str, later))} failed"
    return text


def worker_logs(agents: list[Agent]) -> list[tuple[int, str, Path]]:
    """``(rank, host, stderr file)`` of every worker of this run's agents (with a log folder).

    A worker's rank is its agent's ``first_rank`` plus its local rank (the static rendezvous
    numbers ranks in node-rank order); each agent's newest torchrun run folder is this run's.
    """
    found = []
    for agent in agents:
        if agent.log_dir is None or not agent.log_dir.is_dir():
            continue
        runs = [p for p in agent.log_dir.iterdir() if p.is_dir()]
        if not runs:
            continue
        newest = max(runs, key=lambda p: p.stat().st_mtime)
        for path in sorted(newest.glob("attempt_*/*/stderr.log")):
            if path.parent.name.isdigit():
                found.append((agent.first_rank + int(path.parent.name), agent.host, path))
    return sorted(found)


def _echo_new_output(agents: list[Agent], sizes: dict) -> None:
    """Print what each worker wrote to its stderr file since ``sizes`` (path -> bytes), lines
    prefixed ``[rankN]:`` as torchrun's tee does."""
    for rank, _host, path in worker_logs(agents):
        try:
            with open(path, "rb") as f:
                f.seek(sizes.get(path, 0))
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            sys.stderr.write(f"[rank{rank}]:{line}\n")
    sys.stderr.flush()
