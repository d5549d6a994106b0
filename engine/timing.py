"""Low-overhead phase timer and progress watchdog of one rank (MegaScale, NSDI'24 §5.1-5.2).

- Forward of every model chunk is timed by module hooks around its forward call (per
  micro-batch, also inside pipeline schedules); backward is the rest of the step's
  forward-backward span (one "backward" record per step: the span minus its forwards, which
  on CPU also subtracts their CPU time; the span itself is a "forward-backward" record, the
  parent of the forwards in the timeline); the optimizer step by a context manager. On CUDA
  compute segments record ``torch.cuda.Event`` pairs resolved at a later step boundary, so
  timing adds no synchronisation; on CPU the clocks are read directly.
- Every collective and P2P operation is timed by :class:`rankmap.engine.comms.CommHooks`,
  which calls :meth:`PhaseTimer.open_comm` / :meth:`comm_wait` / :meth:`close_comm`.
- Records go to ``OUT/events/RUN_ID/rank-NNNNN.jsonl`` (a new file per run, never appended
  to), one line per event, written as it happens (line-buffered), so a rank that dies keeps
  its records; formats, writing and reading belong to :mod:`rankmap.diagnose.records`.
- The progress watchdog: between a step's first timed event and its end, every timed
  boundary (a phase begins or ends, an operation is issued, waited for or completes) is
  progress. A rank that makes none for ``hang_timeout_s`` -- blocked in a collective,
  stuck in compute, or stopped between them -- writes ``hang-rank-NNNNN.json`` (what it is
  blocked in, or the compute phase it is in), dumps all Python stacks
  (``faulthandler.dump_traceback``, to ``stacks-rank-NNNNN.txt``) and the c10d flight
  recorder (``torch._C._distributed_c10d._dump_fr_trace_json``, to ``fr-rank-NNNNN.json``;
  see the PyTorch docs, "Flight Recorder for Debugging Stuck Jobs", ``TORCH_FR_BUFFER_SIZE``),
  waits a grace period so its peers record theirs, and exits with status 124.
- On CPU each record carries the thread's CPU seconds (``cpu_s``): a rank blocked in a
  collective waits without using CPU, so compute stragglers stand out from their victims.
- ``RANKMAP_CLOCK_SHIFT_S`` shifts this rank's wall clock (``SECONDS`` for every host, or
  ``HOST=SECONDS,...``), to test that diagnosis removes clock offsets between hosts.
- Fault injection for drills: ``inject_delay_s`` of busy computation in one phase of one
  rank (a slow GPU), or in each of its P2P sends (``inject_phase: send``, a slow link: the rank
  is blocked in the send meanwhile, as in a send on a slow wire);
  ``stall_rank`` at ``stall_step`` enters its next collective and never completes it
  (``stall_mode: collective``, as an NCCL collective that hangs: the rank is blocked in it,
  waiting in a gloo receive that no peer answers, while the group's other members block in
  the same operation for its part), spins forever in its forward pass (``compute``) or
  freezes with SIGSTOP before its next collective or P2P operation, writing nothing more
  (``freeze``: a rank that never joins).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

from rankmap.diagnose.records import (
    append_event,
    events_dir,
    new_event,
    new_hang,
    open_event_log,
    write_hang,
)
from rankmap.errors import EngineError, RankmapError

__all__ = ["PhaseTimer", "new_run_id", "clock_shift_s", "CLOCK_SHIFT_VAR"]

CLOCK_SHIFT_VAR = "RANKMAP_CLOCK_SHIFT_S"
GRACE_S = 5.0


def new_run_id() -> str:
    """A new run id, the same on every rank: rank 0's UTC time stamp and random suffix, broadcast
    over the default process group (a collective: every rank calls it at the same point)."""
    import secrets

    import torch.distributed as dist

    ids = [time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)]
    if dist.is_initialized():
        dist.broadcast_object_list(ids, src=0)
    return ids[0]


def clock_shift_s(host: str, environ=None) -> float:
    """Seconds added to this host's wall clock by ``RANKMAP_CLOCK_SHIFT_S`` (0 when unset).

    Examples
    --------
    >>> clock_shift_s("b", {"RANKMAP_CLOCK_SHIFT_S": "a=0.1,b=0.3"}), clock_shift_s("c", {"RANKMAP_CLOCK_SHIFT_S": "2"})
    (0.3, 2.0)
    """
    text = (os.environ if environ is None else environ).get(CLOCK_SHIFT_VAR, "").strip()
    if not text:
        return 0.0
    try:
        if "=" not in text:
            return float(text)
        pairs = dict(item.split("=", 1) for item in text.split(","))
        return float(pairs.get(host, 0.0))
    except ValueError:
        raise EngineError(f"{CLOCK_SHIFT_VAR}={text!r}: expected SECONDS or HOST=SECONDS,...") from None


class _Op:
    """One collective or P2P operation in flight."""

    __slots__ = ("phase", "group", "peers", "seq", "step", "wall", "start", "wait_s")

    def __init__(self, phase, group, peers, seq, step, wall, start):
        self.phase, self.group, self.peers, self.seq, self.step = phase, group, peers, seq, step
        self.wall, self.start, self.wait_s = wall, start, 0.0


STALL_TAG = 0x57A11  # the tag of the receive a ``collective`` stall waits in: no rank ever sends with it


def _block_forever(members: tuple, rank: int) -> None:
    """Wait, inside a collective, for a part that never arrives: a gloo receive from another
    member of the operation on the default group, with a tag no rank sends (gloo's ``recv``
    blocks until a matching send; ``torch.distributed.ProcessGroup.recv``). The receive ends
    only at the process group's timeout, which leaves the watchdog its time first (the
    config's ``init_timeout_s`` check); after it, with no other member, or on a backend that
    refuses a CPU tensor (NCCL), the rank sleeps, still blocked in the operation."""
    import torch
    import torch.distributed as dist

    peers = [m for m in members if m != rank]
    if peers and dist.is_initialized():
        try:
            dist.group.WORLD.recv([torch.zeros(1)], peers[0], STALL_TAG).wait()
        except RuntimeError:  # the process group's timeout, or a backend that refuses it: keep blocking
            pass
    while True:
        time.sleep(1.0)


class PhaseTimer:
    """Times one rank's phases and operations; see the module docstring.

    Parameters
    ----------
    out : Path
        Output folder; records go to ``out/events/run_id/``.
    rank, host, local_rank : int, str, int
        Who this rank is (from the rank map).
    cuda : bool
        Time compute with CUDA events (True) or the CPU clocks.
    cfg : DiagnosticsConfig
        Timing switch, hang timeout and fault injection.
    run_id : str
        This run's id (the same on every rank).

    Raises
    ------
    EngineError
        The run's record file exists already (a reused run id) or ``RANKMAP_CLOCK_SHIFT_S`` is bad.
    """

    def __init__(self, out, rank: int, host: str, local_rank: int, cuda: bool, cfg, run_id: str = "run"):
        self.rank, self.host, self.local_rank, self.cuda, self.cfg = rank, host, local_rank, cuda, cfg
        self.folder = events_dir(out, run_id)
        self.shift_s = clock_shift_s(host)
        self.step = 0
        self.seq: dict = defaultdict(int)
        self.pending: list = []            # CUDA segments waiting for their events
        self.open: dict = {}               # hook-timed phases in progress: name -> (wall, start)
        self.blocked = None                # the operation this rank waits in, for the watchdog
        self.label = None                  # names the collectives of a block ("loss", "grad-norm")
        self.fwd_sum = None                # forward seconds (wall, CPU) inside a backward span
        self.armed = False                 # inside a step: the watchdog counts
        self.last_progress = time.monotonic()
        self.hooks = None                  # the CommHooks feeding this timer, when installed
        self.file = open_event_log(self.folder, rank)
        self._stop = threading.Event()
        if cfg.hang_timeout_s > 0:
            threading.Thread(target=self._watch, name="rankmap-watchdog", daemon=True).start()

    # -- clocks and records -------------------------------------------------------------------
    def wall(self) -> float:
        """Seconds since the epoch on this rank's (possibly shifted) clock."""
        return time.time() + self.shift_s

    def _progress(self) -> None:
        self.last_progress = time.monotonic()
        self.armed = True

    def _mark(self):
        self._progress()
        if self.cuda:
            import torch
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter(), time.thread_time()

    def _finish(self, phase: str, wall: float, start) -> None:
        end = self._mark()
        if self.cuda:
            self.pending.append((phase, wall, start, end, self.step))
        else:
            dur, cpu = end[0] - start[0], end[1] - start[1]
            if phase == "forward" and self.fwd_sum is not None:
                self.fwd_sum[0] += dur
                self.fwd_sum[1] += cpu
            self._write(phase, wall, dur, None, (), 0, self.step, cpu)

    def _write(self, phase, wall, dur_s, group, peers, seq, step, cpu_s=None) -> None:
        append_event(self.file, new_event(rank=self.rank, host=self.host, local_rank=self.local_rank, step=step,
                                          phase=phase, start_s=wall, dur_s=dur_s, group=group, peers=peers,
                                          seq=seq, cpu_s=cpu_s))

    # -- compute phases -----------------------------------------------------------------------
    def begin(self, phase: str) -> None:
        """Start a hook-timed phase (the forward of a chunk)."""
        self.open[phase] = (self.wall(), self._mark())
        self._inject(phase)

    def end(self, phase: str) -> None:
        if phase in self.open:
            wall, start = self.open.pop(phase)
            self._finish(phase, wall, start)

    @contextmanager
    def backward_span(self):
        """Time the forward-backward span of a step; record its non-forward part as "backward"."""
        wall, t0, c0 = self.wall(), time.perf_counter(), time.thread_time()
        self._progress()
        self.fwd_sum = [0.0, 0.0]
        self.open["forward-backward"] = None
        try:
            yield
        finally:
            self.open.pop("forward-backward", None)
            self._progress()
            if not self.cuda:
                self._inject("backward")
                total, cpu = time.perf_counter() - t0, time.thread_time() - c0
                self._write("forward-backward", wall, total, None, (), 0, self.step, cpu)
                self._write("backward", wall, max(0.0, total - self.fwd_sum[0]), None, (), 0, self.step,
                            max(0.0, cpu - self.fwd_sum[1]))
            self.fwd_sum = None

    @contextmanager
    def phase(self, phase: str):
        """Time a compute block (the optimizer step)."""
        wall, start = self.wall(), self._mark()
        self.open[phase] = None
        self._inject(phase)
        try:
            yield
        finally:
            self.open.pop(phase, None)
            self._finish(phase, wall, start)

    @contextmanager
    def labelled(self, label: str):
        """Name the collectives issued inside the block ``LABEL-OPERATION`` (``loss-all-reduce``)."""
        saved, self.label = self.label, label
        try:
            yield
        finally:
            self.label = saved

    # -- operations (called by CommHooks) ------------------------------------------------------
    def open_comm(self, op: str, kind: str, peers: tuple, seq: int) -> _Op:
        """An operation is issued: ``op`` (all-reduce, send, ...) on a ``kind`` group."""
        self._freeze()
        phase = f"{self.label}-{op}" if self.label else f"{kind}-{op}"
        self._progress()
        handle = _Op(phase, kind, tuple(peers), seq, self.step, self.wall(), time.perf_counter())
        if op not in ("send", "recv") and self._stalls(("collective",)):
            with self.comm_wait(handle):
                _block_forever(handle.peers, self.rank)
        if op == "send":  # a slow link: the send takes longer, its issue is on time, and the rank is
            with self.comm_wait(handle):  # blocked in it meanwhile (as it waits for a send on a slow wire),
                self._inject("send")      # so that time is not lateness of its own to later collectives
        return handle

    def block(self, op: _Op):
        """The rank is now blocked in ``op`` (issuing it, or waiting for it); returns the token for :meth:`unblock`."""
        outer, self.blocked = self.blocked, op
        self.last_progress = time.monotonic()
        return outer, time.perf_counter()

    def unblock(self, op: _Op, token) -> None:
        """The rank is no longer blocked in ``op``."""
        outer, t0 = token
        op.wait_s += time.perf_counter() - t0
        self.blocked = outer
        self.last_progress = time.monotonic()

    @contextmanager
    def comm_wait(self, op: _Op):
        """The rank is blocked in ``op`` for the block's duration (:meth:`block`, :meth:`unblock`)."""
        token = self.block(op)
        try:
            yield
        finally:
            self.unblock(op, token)

    def close_comm(self, op: _Op) -> None:
        """``op`` completed: write its record."""
        append_event(self.file, new_event(rank=self.rank, host=self.host, local_rank=self.local_rank, step=op.step,
                                          phase=op.phase, start_s=op.wall, dur_s=time.perf_counter() - op.start,
                                          group=op.group, peers=op.peers, seq=op.seq, wait_s=op.wait_s))

    # -- steps ----------------------------------------------------------------------------------
    def end_step(self, step: int) -> None:
        """Resolve completed CUDA segments and disarm the watchdog; called after each iteration."""
        if self.pending:
            done = [p for p in self.pending if p[3].query()]
            self.pending = [p for p in self.pending if not p[3].query()]
            for phase, wall, start, end, s in done:
                self._write(phase, wall, start.elapsed_time(end) / 1e3, None, (), 0, s)
        self.armed = False
        self.step = step + 1

    def close(self) -> None:
        self._stop.set()
        self.armed = False
        if self.pending:
            import torch
            torch.cuda.synchronize()
            self.end_step(self.step)
        self.file.close()

    # -- fault injection -----------------------------------------------------------------------
    def _inject(self, phase: str) -> None:
        c = self.cfg
        if c.inject_delay_s and c.inject_rank == self.rank and c.inject_phase == phase == "send":
            time.sleep(c.inject_delay_s)  # a slow link: the wire is slow, the CPU idle
        elif c.inject_delay_s and c.inject_rank == self.rank and c.inject_phase == phase:
            end = time.perf_counter() + c.inject_delay_s
            while time.perf_counter() < end:  # busy, like a slow device: it uses the CPU
                pass
        if phase == "forward" and self._stalls(("compute",)):
            while True:  # stuck in compute: no progress, the CPU busy
                time.sleep(0)

    def _stalls(self, modes: tuple) -> bool:
        c = self.cfg
        return c.stall_rank == self.rank and c.stall_step == self.step and c.stall_mode in modes

    def _freeze(self) -> None:
        if self._stalls(("freeze",)):
            os.kill(os.getpid(), signal.SIGSTOP)  # the whole process stops: it writes nothing more
            while True:  # (should SIGCONT wake it, it still never joins)
                time.sleep(1.0)

    # -- watchdog ------------------------------------------------------------------------------
    def _state(self):
        """(phase, group, peers, seq, step, since_s, state) of what this rank is in now."""
        op = self.blocked
        if op is not None:
            return op.phase, op.group, op.peers, op.seq, op.step, op.wall, "collective"
        since = self.wall() - (time.monotonic() - self.last_progress)
        inside = [p for p in self.open if p != "forward-backward"] or list(self.open)
        if inside:
            return inside[-1], None, (), 0, self.step, since, "compute"
        return "idle", None, (), 0, self.step, since, "idle"

    def _watch(self) -> None:
        timeout = self.cfg.hang_timeout_s
        while not self._stop.wait(min(0.2, timeout / 10)):
            if not self.armed or time.monotonic() - self.last_progress < timeout:
                continue
            self._fire(timeout)

    def _fire(self, timeout: float) -> None:
        phase, group, peers, seq, step, since, state = self._state()
        hang = new_hang(rank=self.rank, host=self.host, local_rank=self.local_rank, step=step, phase=phase,
                        group=group, peers=peers, seq=seq, since_s=since, timeout_s=timeout, state=state)
        try:
            self.file.flush()
        except ValueError:
            pass
        try:
            with open(self.folder / f"stacks-rank-{self.rank:05d}.txt", "w", encoding="utf-8") as f:
                faulthandler.dump_traceback(file=f, all_threads=True)
            self._dump_flight_recorder()
            write_hang(self.folder, hang)
        except (OSError, RankmapError) as exc:  # still stop: a hung rank must not outlive its watchdog
            print(f"rankmap-engine: [rank {self.rank}] cannot write the hang record: {exc}", flush=True)
        where = f"{phase} ({group} #{seq})" if group else f"{phase} ({state})"
        print(f"rankmap-engine: [rank {self.rank}] no progress for {timeout:g} s in {where}; hang record and "
              f"stacks written to {self.folder}, stopping", flush=True)
        # Peers that stopped a moment later write their records before the launcher,
        # seeing this process end, tears the job down.
        time.sleep(GRACE_S)
        os._exit(124)

    def _dump_flight_recorder(self) -> None:
        try:
            from torch._C._distributed_c10d import _dump_fr_trace_json
            data = _dump_fr_trace_json(True, False)
        except Exception:  # noqa: BLE001 - the recorder is optional (off unless TORCH_FR_BUFFER_SIZE is set)
            return
        data = data if isinstance(data, bytes) else str(data).encode()
        (self.folder / f"fr-rank-{self.rank:05d}.json").write_bytes(data)
