"""Low-overhead phase timer and hang watchdog of one rank (MegaScale, NSDI'24 §5.1-5.2).

- Forward of every model chunk is timed by module hooks around its forward call (per
  micro-batch, also inside pipeline schedules); backward is the rest of the step's
  forward-backward span (one record per step: the span minus its forwards, which on CPU
  also subtracts their CPU time); the optimizer step and the engine's own collectives by
  context managers. Per-micro-batch gradient hooks would cost ~10% of a step here. On CUDA each segment records a pair of ``torch.cuda.Event``s and
  is resolved at a later step boundary once both events have completed, so timing adds
  no synchronisation; on CPU the wall clock is read directly.
- Records go to ``OUT/events/rank-NNNNN.jsonl``, flushed once per step; the record formats,
  their writing and their reading belong to :mod:`rankmap.diagnose.records`.
- The watchdog thread looks at the collective the rank is in; when one has not finished
  within ``hang_timeout_s`` it writes ``hang-rank-NNNNN.json`` (the phase, group, peers
  and sequence number) and ends the process, so the launcher tears the job down instead
  of hanging until the process group's own timeout.
- On CPU each record also carries the thread's CPU seconds (``cpu_s``): a rank blocked in a
  collective waits without using CPU, so compute stragglers stand out from their victims
  (a TP peer of a slow rank waits inside its own forward pass).
- Fault injection for tests and drills: ``inject_delay_s`` seconds of busy computation
  inside one phase of one rank (a slow GPU or host), or one rank stalling before a
  collective at one step.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

from rankmap.diagnose.records import append_event, new_event, new_hang, open_event_log, write_hang

__all__ = ["PhaseTimer"]

_GRACE_S = 5.0


class PhaseTimer:
    """Times one rank's phases; see the module docstring.

    Parameters
    ----------
    out : Path
        Run folder (records go to ``out/events/``).
    rank, host, local_rank : int, str, int
        Who this rank is (from the rank map).
    cuda : bool
        Time with CUDA events (True) or the wall clock.
    cfg : DiagnosticsConfig
        Timing switch, hang timeout and fault injection.
    """

    def __init__(self, out, rank: int, host: str, local_rank: int, cuda: bool, cfg):
        self.rank, self.host, self.local_rank, self.cuda, self.cfg = rank, host, local_rank, cuda, cfg
        self.out = out
        self.step = 0
        self.seq: dict = defaultdict(int)
        self.pending: list = []            # CUDA segments waiting for their events
        self.open: dict = {}               # hook-timed phases in progress: name -> (wall, start)
        self.current = None                # the collective in progress, for the watchdog
        self.fwd_sum = None                # forward seconds (wall, CPU) inside a backward span
        self.file = open_event_log(out, rank)
        self._stop = threading.Event()
        if cfg.hang_timeout_s > 0:
            threading.Thread(target=self._watch, name="rankmap-watchdog", daemon=True).start()

    # -- recording ---------------------------------------------------------------------------
    def _mark(self):
        if self.cuda:
            import torch
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter(), time.thread_time()

    def _finish(self, phase: str, wall: float, start, group=None, peers=(), seq=0) -> None:
        end = self._mark()
        if self.cuda:
            self.pending.append((phase, wall, start, end, group, peers, seq, self.step))
        else:
            dur, cpu = end[0] - start[0], end[1] - start[1]
            if phase == "forward" and self.fwd_sum is not None:
                self.fwd_sum[0] += dur
                self.fwd_sum[1] += cpu
            self._write(phase, wall, dur, group, peers, seq, self.step, cpu)

    def _write(self, phase, wall, dur_s, group, peers, seq, step, cpu_s=None) -> None:
        append_event(self.file, new_event(rank=self.rank, host=self.host, local_rank=self.local_rank, step=step,
                                          phase=phase, start_s=wall, dur_s=dur_s, group=group, peers=peers,
                                          seq=seq, cpu_s=cpu_s))

    def begin(self, phase: str) -> None:
        """Start a hook-timed phase (forward/backward of a chunk)."""
        self.open[phase] = (time.time(), self._mark())
        self._inject(phase)

    @contextmanager
    def backward_span(self):
        """Time the forward-backward span of a step and record its non-forward part as "backward"."""
        wall, t0, c0 = time.time(), time.perf_counter(), time.thread_time()
        self.fwd_sum = [0.0, 0.0]
        try:
            yield
        finally:
            if not self.cuda:
                self._inject("backward")
                total, cpu = time.perf_counter() - t0, time.thread_time() - c0
                self._write("backward", wall, max(0.0, total - self.fwd_sum[0]), None, (), 0, self.step,
                            max(0.0, cpu - self.fwd_sum[1]))
            self.fwd_sum = None

    def end(self, phase: str) -> None:
        if phase in self.open:  # a backward whose start had no gradient to hook is not timed
            wall, start = self.open.pop(phase)
            self._finish(phase, wall, start)

    @contextmanager
    def phase(self, phase: str, group: str | None = None, peers: tuple = ()):
        """Time a block; for a collective give its ``group`` kind and the global ``peers``."""
        seq = 0
        if group is not None:
            seq = self.seq[group]
            self.seq[group] += 1
            self._stall(phase)
        else:
            wall, start = time.time(), self._mark()
            self._inject(phase)
        if group is not None:
            wall, start = time.time(), self._mark()
            self.current = (phase, group, tuple(peers), seq, self.step, wall)
        try:
            yield
        finally:
            self.current = None
            self._finish(phase, wall, start, group, peers, seq)

    def end_step(self, step: int) -> None:
        """Resolve completed CUDA segments and flush; called after each iteration."""
        if self.pending:
            done = [p for p in self.pending if p[3].query()]
            self.pending = [p for p in self.pending if not p[3].query()]
            for phase, wall, start, end, group, peers, seq, s in done:
                self._write(phase, wall, start.elapsed_time(end) / 1e3, group, peers, seq, s)
        self.file.flush()
        self.step = step + 1

    def close(self) -> None:
        self._stop.set()
        if self.pending:
            import torch
            torch.cuda.synchronize()
            self.end_step(self.step)
        self.file.close()

    # -- fault injection ---------------------------------------------------------------------
    def _inject(self, phase: str) -> None:
        c = self.cfg
        if c.inject_delay_s and c.inject_rank == self.rank and c.inject_phase == phase:
            end = time.perf_counter() + c.inject_delay_s
            while time.perf_counter() < end:  # busy, like a slow device: it uses the CPU
                pass

    def _stall(self, phase: str) -> None:
        c = self.cfg
        if c.stall_rank == self.rank and c.stall_step == self.step:
            self.file.flush()
            while True:  # this rank stops entering collectives; the others' watchdogs fire
                time.sleep(1.0)

    # -- watchdog ------------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            cur = self.current
            if cur is None or time.time() - cur[5] < self.cfg.hang_timeout_s:
                continue
            phase, group, peers, seq, step, since = cur
            hang = new_hang(rank=self.rank, host=self.host, local_rank=self.local_rank, step=step, phase=phase,
                            group=group, peers=peers, seq=seq, since_s=since, timeout_s=self.cfg.hang_timeout_s)
            try:
                self.file.flush()
            except ValueError:
                pass
            write_hang(self.out, hang)
            print(f"rankmap-engine: [rank {self.rank}] {phase} ({group} #{seq}) did not finish within "
                  f"{self.cfg.hang_timeout_s:g} s; hang record written, stopping", flush=True)
            # Peers that began waiting a moment later write their records before the launcher,
            # seeing this process end, tears the job down.
            time.sleep(_GRACE_S)
            os._exit(124)
