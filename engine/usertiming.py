"""The engine's timing and progress watchdog for a user's own torch.distributed script.

::

    import torch.distributed as dist
    from rankmap.engine.usertiming import timed_run

    dist.init_process_group("gloo")
    with timed_run("run-out", hang_timeout_s=120) as run:     # every rank, after init
        for step in range(1, steps + 1):
            with run.step(step):
                with run.phase("forward"):
                    ...                                           # any collectives, P2P ops
                with run.phase("optimizer"):
                    ...

Every collective and P2P operation the script issues through ``torch.distributed`` or
DTensor's functional collectives is timed (:class:`rankmap.engine.comms.CommHooks`); its
process group's kind (tp, cp, ep, dp, pp) comes from the rank map (``rankmap=``, default
``$RANKMAP_FILE``, which the scripts of ``rankmap launch`` export), from a DeviceMesh
(``mesh=``), or is ``world``/``other``. ``model=`` times each forward call by module hooks.
Records go to ``OUT/events/RUN_ID/`` as the engine's do, so ``rankmap diagnose OUT
--rankmap rankmap.json`` reads them; the host name recorded is ``$RANKMAP_HOST`` (set by
``rankmap launch --local``), else ``$SLURMD_NODENAME``, else the machine's name.
"""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from pathlib import Path

import torch.distributed as dist

from rankmap.engine.comms import CommHooks, kinds_from_mesh
from rankmap.engine.config import DiagnosticsConfig
from rankmap.engine.timing import PhaseTimer, new_run_id
from rankmap.errors import EngineError

__all__ = ["TimedRun", "timed_run", "kinds_from_rankmap"]


def kinds_from_rankmap(rankmap, rank: int) -> dict:
    """``{members: kind}`` of ``rank``'s TP, CP, EP, DP and PP groups in a :class:`RankMap`."""
    out: dict = {}
    for kind in ("tp", "cp", "ep", "dp", "pp"):
        members = tuple(sorted(int(r) for r in rankmap.layout.group_of(kind, rank).tolist()))
        if len(members) > 1:
            out.setdefault(members, kind)
    return out


class TimedRun:
    """What :func:`timed_run` yields: step and phase contexts over one rank's :class:`PhaseTimer`."""

    def __init__(self, timer: PhaseTimer):
        self.timer = timer

    @property
    def folder(self) -> Path:
        """This run's records folder, ``OUT/events/RUN_ID``."""
        return self.timer.folder

    @contextmanager
    def step(self, step: int):
        """One iteration: the watchdog counts from its first event to its end."""
        self.timer.step = step
        try:
            yield
        finally:
            self.timer.end_step(step)

    def phase(self, name: str):
        """Time a compute phase: ``forward``, ``backward`` or ``optimizer``."""
        if name not in ("forward", "backward", "optimizer"):
            raise EngineError(f"timed_run phase must be forward, backward or optimizer, got {name!r}")
        return self.timer.phase(name)


@contextmanager
def timed_run(out, *, hang_timeout_s: float = 240.0, rankmap=None, mesh=None, model=None, host: str | None = None):
    """Time a user's script on this rank and watch its progress (see the module docstring).

    Parameters
    ----------
    out : path
        Output folder; records go to ``out/events/RUN_ID/``.
    hang_timeout_s : float
        Seconds without progress inside a step before the rank records where it is stuck,
        dumps its stacks and exits (0: no watchdog). Keep it below the process group's timeout.
    rankmap : RankMap or path, optional
        Names the process groups' kinds (default ``$RANKMAP_FILE`` when set).
    mesh : DeviceMesh, optional
        Names the kinds from the mesh's dimension names instead.
    model : torch.nn.Module, optional
        Its forward calls are timed as "forward".
    host : str, optional
        The host name to record (default ``$RANKMAP_HOST``, ``$SLURMD_NODENAME`` or the machine's).

    Raises
    ------
    EngineError
        The process group is not initialised.
    """
    if not dist.is_initialized():
        raise EngineError("timed_run needs torch.distributed initialised (dist.init_process_group) first")
    rank = dist.get_rank()
    host = host or os.environ.get("RANKMAP_HOST") or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    kinds: dict = {}
    rankmap = rankmap if rankmap is not None else os.environ.get("RANKMAP_FILE")
    if rankmap is not None:
        if isinstance(rankmap, (str, Path)):
            from rankmap.job.rank_map import read_rankmap
            rankmap = read_rankmap(rankmap)
        kinds = kinds_from_rankmap(rankmap, rank)
    if mesh is not None:
        kinds = kinds_from_mesh(mesh)
    cfg = DiagnosticsConfig(hang_timeout_s=hang_timeout_s)
    timer = PhaseTimer(Path(out), rank, host, int(os.environ.get("LOCAL_RANK", "0")), False, cfg, new_run_id())
    hooks = CommHooks(timer, kinds).install()
    handles = []
    if model is not None:
        handles = [model.register_forward_pre_hook(lambda *_: timer.begin("forward")),
                   model.register_forward_hook(lambda *_: timer.end("forward"))]
    try:
        yield TimedRun(timer)
    finally:
        for h in handles:
            h.remove()
        hooks.uninstall()
        timer.close()
