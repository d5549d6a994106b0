"""``rankmap launch --local``: the whole job on this machine, one torchrun agent per host.

Each host of the rank map is emulated by its own torchrun agent on 127.0.0.1, started with
the same static-rendezvous options the generated torchrun lines carry (its ``--node-rank``
from the map) and ``RANKMAP_HOST`` naming the host it stands for, so the engine's start-up
checks see the map's hosts. No torch is imported here: agents run
``python -m torch.distributed.run`` in child processes.

Agents are started in the order given (default: node-rank order), each in its own session;
if one fails or the time runs out, the others' process groups are terminated (SIGTERM, then
SIGKILL after a grace period) -- only processes this module started. On a timeout they first
get SIGABRT, so each prints its Python stack (faulthandler) and a hang shows where it is.

References
----------
.. [1] PyTorch documentation, "torchrun (Elastic Launch)": the static rendezvous and ``--node-rank``.
   https://pytorch.org/docs/stable/elastic/run.html
.. [2] Python documentation, ``faulthandler`` (``PYTHONFAULTHANDLER``).
   https://docs.python.org/3/library/faulthandler.html
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rankmap.errors import LaunchError
from rankmap.job.rank_map import RankMap
from rankmap.launch.torchrun import torchrun_args

__all__ = ["Agent", "local_agents", "free_port", "run_agents"]

LOCAL_ADDR = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class Agent:
    """One emulated host: its node rank, the argv of its torchrun agent and extra environment."""

    host: str
    node_rank: int
    argv: tuple
    env: dict


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCAL_ADDR, 0))
        return sock.getsockname()[1]


def local_agents(rm: RankMap, engine_args: list[str], port: int, rdzv_backend: str = "static") -> list[Agent]:
    """The agents of :func:`run_agents`, in node-rank order.

    ``rdzv_backend="c10d"`` reproduces the launch that loses host order (for tests).
    """
    agents = []
    for node, host in enumerate(rm.hosts):
        opts = torchrun_args(rm, node, LOCAL_ADDR, port, rdzv_backend)
        if rdzv_backend != "static":
            opts += [f"--rdzv-endpoint={LOCAL_ADDR}:{port}", "--rdzv-id=rankmap-local"]
        argv = (sys.executable, "-m", "torch.distributed.run", *opts, "-m", "rankmap.engine.train", *engine_args)
        env = {"RANKMAP_HOST": host, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"), "PYTHONFAULTHANDLER": "1"}
        agents.append(Agent(host=host, node_rank=node, argv=argv, env=env))
    return agents


def _signal_all(procs: dict, sig: int) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)  # the agent's own session: it and its workers
            except ProcessLookupError:
                pass


def _stop(procs: dict, grace_s: float = 10.0) -> None:
    _signal_all(procs, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def run_agents(agents: list[Agent], cwd: str | Path, timeout_s: float | None = None,
               start_order: list[int] | None = None, start_gap_s: float = 0.0) -> None:
    """Start the agents (in ``start_order`` of node ranks) and wait for all of them.

    Raises
    ------
    LaunchError
        PyTorch is missing, an agent failed (naming its host and exit code), or ``timeout_s`` passed.
    """
    if importlib.util.find_spec("torch") is None:
        raise LaunchError("rankmap launch --local needs PyTorch: pip install 'rankmap[engine]' "
                          "(CPU build: pip install torch==2.13.0)")
    order = start_order if start_order is not None else list(range(len(agents)))
    procs: dict = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        for i, node in enumerate(order):
            agent = agents[node]
            env = {**os.environ, **agent.env}   # the agents find rankmap where this process found it
            procs[node] = subprocess.Popen(list(agent.argv), cwd=cwd, env=env, start_new_session=True)
            if start_gap_s and i < len(order) - 1:
                time.sleep(start_gap_s)
        _wait(agents, procs, deadline, timeout_s)
    finally:
        _stop(procs)


def _wait(agents: list[Agent], procs: dict, deadline: float | None, timeout_s: float | None) -> None:
    while True:
        codes = {node: proc.poll() for node, proc in procs.items()}
        failed = [node for node, code in codes.items() if code not in (None, 0)]
        if failed:
            node = failed[0]
            raise LaunchError(f"the agent for host {agents[node].host} (node rank {node}) exited with code "
                              f"{codes[node]}")
        if all(code == 0 for code in codes.values()):
            return
        if deadline is not None and time.monotonic() > deadline:
            # A collective hang rarely turns into an error: SIGABRT makes every process print
            # where it is stuck (faulthandler, PYTHONFAULTHANDLER=1) before it is stopped.
            _signal_all(procs, signal.SIGABRT)
            time.sleep(2.0)
            raise LaunchError(f"the local run did not finish within {timeout_s:g} s; stopped its agents")
        time.sleep(0.2)
