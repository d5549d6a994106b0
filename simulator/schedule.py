"""1F1B and interleaved 1F1B as a dependency graph: iteration time, bubble and overlap.

Each pipeline stage runs its passes in the order Megatron-LM's schedules give it
(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, §2.2; Megatron-LM ``forward_backward_pipelining_*``): with ``p``
stages, ``m`` micro-batches and ``v`` model chunks per stage, stage ``i`` first runs
``p - i - 1`` forwards (interleaved: ``2 (p - i - 1) + (v - 1) p``), then alternates one
forward and one backward, then drains the backwards. A pass (stage, micro-batch, chunk)
starts when its stage is free and its input has arrived:

- forward of chunk ``c`` on stage ``i > 0``: the forward on stage ``i - 1`` plus one
  pipeline send (``p2p_s``); on stage 0 with ``c > 0``: the forward of chunk ``c - 1`` on
  the last stage plus the wrap-around send (``wrap_s``);
- backward: the backward on stage ``i + 1`` plus one send; on the last stage the
  backward of chunk ``c + 1`` on stage 0 plus the wrap send, or its own forward.

With equal stages and free sends the pipeline takes ``(m + (p - 1)/v) (t_f + t_b)``, so
the bubble is ``(p - 1)/(m + p - 1)`` of it without interleaving and ``(p - 1)/v`` passes
of ``m + (p - 1)/v`` with it (Narayanan et al. SC'21, §2.2.1-2.2.2); tests check both.

Around the pipeline, each a switch in :class:`OverlapConfig`:

- ``dp_gather``, ZeRO's parameter all-gather, one share per model chunk in the same buckets
  as the gradients: Megatron-LM's ``--overlap-param-gather`` launches the buckets' all-gathers
  one after another and each module's forward pre-hook waits only for its own bucket
  (megatron/core/distributed/distributed_data_parallel.py ``_make_forward_pre_hook``,
  param_and_grad_buffer.py ``finish_param_sync`` dispatching the next bucket group), so a
  chunk's first forward of length ``d`` with its share ``g`` gathered from ``t0`` in ``n``
  buckets may start at ``t0 + g/n`` and ends at ``max(start + d, t0 + g + d/n)`` (``n = 1``
  without ``dp_reduce``: Megatron-LM buckets only with ``--overlap-grad-reduce``, which
  ``--overlap-param-gather`` requires). The first chunk's share starts with the iteration,
  beside loading the batch (MegaScale, Jiang et al., NSDI'24, §3.2): ``data_loading_s`` of
  it, during which no forward runs, so a longer load never shortens the iteration; chunk
  ``c + 1``'s share is prefetched once chunk ``c``'s share is in and its first forward has
  started. The forward time the gather adds is exposed DP communication
  (``StageTimeline.gather_wait_s``). Off: the batch is loaded, then the whole gather runs,
  then the first forward. Every stage starts its gather at the iteration's start, as
  MegaScale describes and Megatron-LM does with ``align_param_gather``; Megatron-Core
  without interleaving turns that off (megatron/training/arguments.py) and dispatches a
  stage's first bucket only in its first forward pre-hook, with one bucket for stages past
  the first (``disable_bucketing`` or ``pp_rank > 0`` in distributed_data_parallel.py), so
  each later stage's first forward waits for its whole gather after its input arrives:
  ``OverlapConfig.megatron_core`` (a job with ``framework: megatron``) models that.
- ``tp``, the TP/SP collectives of a pass, overlapped with the transformer block: a pass
  takes ``max(compute, comm)``, else ``compute + comm``. ``cp`` (on by default: ring
  attention's KV exchange runs under attention) and ``ep`` (off by default: a MoE layer's
  all-to-all is on its data path, hidden only with Megatron-Core's opt-in
  ``--overlap-moe-expert-parallel-comm``) put CP's and EP's collectives into that
  overlapped share or, when off, add them to the pass (``PipelineCosts.serial_*``).
- ``dp_reduce``, the gradient reduction of each chunk in buckets as its last backward
  produces them, Megatron-LM's ``--overlap-grad-reduce`` (megatron/core/distributed/
  distributed_data_parallel.py ``_make_backward_post_hook``; param_and_grad_buffer.py
  ``register_grad_ready`` starts a bucket's collective once every gradient in it is ready
  in the last micro-batch). With ``n`` buckets, reduce time ``r`` and last backward ``d``
  ending at ``E``, bucket ``k`` is ready at ``E - d + k d/n`` and the buckets reduce one
  after another, so the chunk's reduction ends at
  ``max(t0 + r, E - d (1 - 1/n) + r, E + r/n)`` (``t0``: when the previous chunk's ended;
  the first term for a queue, the others for the first and last bucket). Chunks reduce in
  the order their last backwards end (last chunk first). Off (or ``n = 1`` and ``v = 1``):
  the stage's whole reduction starts after its last backward. Megatron-Core buckets only
  the first chunk of the first pipeline stage (``disable_bucketing`` for later chunks and
  ``pp_rank > 0``: one bucket, started when the chunk's backward ends) because that chunk
  finishes last; by default (MegaScale) every chunk buckets, with ``megatron_core`` only that
  one (:func:`buckets`). The two differ only where a stage's head start over stage 0 (about
  ``i`` backwards for stage ``i``) is shorter than its reduction, which then ends up to
  ``d (1 - 1/n)`` later in Megatron-Core.

The optimizer step follows the slowest stage's reduction. The logit layer runs in the last
chunk of the last stage only (``logit_forward_s``, ``logit_backward_s``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rankmap.job.frameworks import interleaved_rounds
from rankmap.simulator.pipeline_costs import OverlapConfig, PipelineCosts

__all__ = ["backward_pass_s", "buckets", "OverlapConfig", "PipelineCosts", "StageTimeline", "ScheduleResult", "stage_order", "run_schedule"]


@dataclass(frozen=True, kw_only=True, eq=False)
class StageTimeline:
    """Every pass of one iteration on the clock, per stage: what the timeline figure draws.

    Attributes
    ----------
    start_s : float
        When the first forward may start: after loading the batch (``loading_s``), and after
        the whole all-gather too when its overlap is off.
    forward_end_s, backward_end_s : ndarray
        ``[p, m, v]``: end of each pass (stage, micro-batch, chunk).
    pass_s : ndarray
        ``pass_s[p, 2]``: mean duration of a forward (column 0) and a backward pass (1) over
        the stage's chunks, exposed TP/CP/EP communication included (the last stage's last
        chunk also runs the logit layer).
    compute_s : ndarray
        ``compute_s[p, 2]``: the compute in them (mean over chunks).
    reduce_end_s : ndarray
        ``reduce_end_s[p]``: when each stage's gradient reduction ends.
    time_s : float
        Iteration end (after the optimizer step).
    gather_wait_s : ndarray
        ``gather_wait_s[p, v]``: how much later each chunk's first forward ends because its
        parameters were still being gathered (exposed all-gather; drawn just before that pass).
    loading_s : float
        Loading the batch, the first ``loading_s`` of ``start_s``.
    """

    start_s: float
    forward_end_s: np.ndarray
    backward_end_s: np.ndarray
    pass_s: np.ndarray
    compute_s: np.ndarray
    reduce_end_s: np.ndarray
    time_s: float
    gather_wait_s: np.ndarray | None = None
    loading_s: float = 0.0

    def breakdown_s(self) -> np.ndarray:
        """``[p, 4]`` seconds per stage: compute, exposed communication, pipeline bubble, the rest.

        With ``P`` the end of the last backward of any stage: exposed communication is the
        all-gather not hidden (before the first forward, or stretching a chunk's first
        forward), the TP/CP/EP collectives not hidden in the passes and the stage's gradient
        reduction past ``P``; the bubble is the stage's other idle time from the first
        forward's start to ``P`` (``(p - 1)/(m + p - 1)`` of it for equal stages); the rest
        is loading the batch, waiting for slower stages' reductions and the optimizer step.
        Each row sums to ``time_s``.

        Examples
        --------
        >>> c = PipelineCosts(forward_s=(1.0,) * 4, backward_s=(2.0,) * 4, comm_forward_s=(0.0,) * 4,
        ...                   comm_backward_s=(0.0,) * 4, m=8, dp_reduce_s=3.0)
        >>> run_schedule(c).timeline.breakdown_s()[[0, 3]].tolist()   # bubble 3/11 of 33 s
        [[24.0, 3.0, 9.0, 0.0], [24.0, 0.0, 9.0, 3.0]]
        """
        m_v = self.forward_end_s[0].size                                  # m * v passes per direction
        compute = m_v * self.compute_s.sum(axis=1)                          # (p,)
        in_pass = m_v * (self.pass_s - self.compute_s).sum(axis=1)
        end = float(self.backward_end_s.max())                              # P
        wait = np.zeros(len(compute)) if self.gather_wait_s is None else self.gather_wait_s.sum(axis=1)
        bubble = (end - self.start_s) - m_v * self.pass_s.sum(axis=1) - wait
        exposed = (self.start_s - self.loading_s) + wait + in_pass + np.maximum(self.reduce_end_s - end, 0.0)
        rest = self.time_s - np.maximum(self.reduce_end_s, end) + self.loading_s
        return np.stack([compute, exposed, bubble, rest], axis=1)


@dataclass(frozen=True, kw_only=True)
class ScheduleResult:
    """One iteration placed on the clock.

    Attributes
    ----------
    time_s : float
        Iteration time: gather, pipeline, reductions, optimizer step.
    pipeline_s : float
        From the first forward's start to the last backward's end.
    bubble_fraction : float
        ``1 - busy / pipeline`` for the busiest stage, the pipeline timed with the all-gather
        free: time forwards wait for gathered parameters is exposed DP communication, not
        bubble.
    busy_s : ndarray
        ``busy_s[p]``: time each stage spends in its passes.
    backward_end_s : ndarray
        ``backward_end_s[p]``: when each stage's last backward ends.
    timeline : StageTimeline or None
        Every pass on the clock.
    """

    time_s: float
    pipeline_s: float
    bubble_fraction: float
    busy_s: np.ndarray
    backward_end_s: np.ndarray
    timeline: StageTimeline | None = None


def stage_order(stage: int, p: int, m: int, v: int = 1) -> list[tuple[bool, int, int]]:
    """Passes of ``stage`` in order, as ``(is_forward, micro_batch, chunk)``: 1F1B, and with
    ``v > 1`` chunks the interleaved 1F1B of Narayanan et al. (SC'21).

    Interleaving runs the micro-batches in ``rounds = max(1, m // p)`` rounds of ``m / rounds``
    each, as torch.distributed.pipelining's ``ScheduleInterleaved1F1B`` does
    (torch/distributed/pipelining/schedules.py, ``_get_warmup_ops`` and ``_get_1f1b_rank_ops``):
    a stage warms up with ``(v - 1) * (m / rounds) + 2 * (p - 1 - stage)`` forwards, and its
    k-th forward (backward) runs chunk ``(k // (m / rounds)) % v`` (counted from the last chunk).
    With ``m`` a multiple of ``p`` (``m / rounds = p``) this is Megatron-LM's interleaved order
    (megatron/core/pipeline_parallel/schedules.py), which requires that multiple.

    Raises
    ------
    ValueError
        ``v > 1`` and ``m`` not a multiple of the rounds (torch refuses it too; job specs are
        checked for it first, :func:`rankmap.job.frameworks.interleaved_rule`).

    Examples
    --------
    >>> [("F" if f else "B") + str(mb) for f, mb, _ in stage_order(0, 2, 3)]
    ['F0', 'F1', 'B0', 'F2', 'B1', 'B2']
    >>> [("F" if f else "B") + f"{mb}.{ch}" for f, mb, ch in stage_order(1, 2, 3, v=2)][:6]
    ['F0.0', 'F1.0', 'F2.0', 'F0.1', 'B0.1', 'F1.1']
    """
    total = m * v
    if v == 1:
        warm = min(p - stage - 1, m)
        per_round = m
    else:
        rounds = interleaved_rounds(m, p)
        if m % rounds:
            raise ValueError(f"interleaving runs {rounds} rounds and needs micro-batches ({m}) divisible by them")
        per_round = m // rounds
        warm = min((v - 1) * per_round + 2 * (p - 1 - stage), total)
    count = {(True, c): 0 for c in range(v)} | {(False, c): 0 for c in range(v)}

    def at(k: int, forward: bool) -> tuple[bool, int, int]:
        chunk = (k // per_round) % v
        chunk = chunk if forward else v - 1 - chunk
        mb = count[forward, chunk]
        count[forward, chunk] += 1
        return forward, mb, chunk

    order = [at(k, True) for k in range(warm)]
    for i in range(total - warm):
        order += [at(warm + i, True), at(i, False)]
    order += [at(k, False) for k in range(total - warm, total)]
    return order


def _ready(c: PipelineCosts, fend: np.ndarray, bend: np.ndarray, forward: bool, s: int, mb: int, ch: int) -> float:
    """When pass (s, mb, ch)'s input is there; NaN while it is not."""
    p, v = c.p, c.v
    if forward:
        if s > 0:
            return fend[s - 1, mb, ch] + c.p2p_s
        return fend[p - 1, mb, ch - 1] + c.wrap_s if ch > 0 else 0.0
    if s < p - 1:
        return bend[s + 1, mb, ch] + c.p2p_s
    return bend[0, mb, ch + 1] + c.wrap_s if ch < v - 1 else fend[s, mb, ch]


def _pass_s(c: PipelineCosts, overlap: OverlapConfig, s: int, forward: bool, chunk: int = 0) -> float:
    """Duration of one pass of stage ``s`` through ``chunk``; the logit layer in the model's last chunk."""
    compute = c.forward_s[s] if forward else c.backward_s[s]
    if s == c.p - 1 and chunk == c.v - 1:
        compute += c.logit_forward_s if forward else c.logit_backward_s
    comm = c.comm_forward_s[s] if forward else c.comm_backward_s[s]
    serial = c.serial_forward_s if forward else c.serial_backward_s
    return (max(compute, comm) if overlap.tp else compute + comm) + (serial[s] if serial else 0.0)


def buckets(costs: PipelineCosts, overlap: OverlapConfig | None = None) -> np.ndarray:
    """``[p, v]`` gradient (and parameter) buckets of each stage's chunk: ``costs.reduce_buckets``
    everywhere, or with ``overlap.megatron_core`` on the first stage's first chunk only (1
    elsewhere); 1 everywhere without the ``dp_reduce`` overlap (Megatron-LM buckets only with
    ``--overlap-grad-reduce``)."""
    overlap = overlap or OverlapConfig()
    n = np.full((costs.p, costs.v), costs.reduce_buckets if overlap.dp_reduce else 1, dtype=np.int64)
    if overlap.megatron_core:
        n[1:, :] = 1
        n[:, 1:] = 1
    return n


def backward_pass_s(costs: PipelineCosts, overlap: OverlapConfig | None = None) -> np.ndarray:
    """``[p, v]`` seconds: each stage's backward pass through each of its chunks (exposed
    TP/CP/EP communication and, in the model's last chunk, the logit layer included)."""
    overlap = overlap or OverlapConfig()
    return np.array([[_pass_s(costs, overlap, s, False, ch) for ch in range(costs.v)] for s in range(costs.p)])


def _first_start_s(c: PipelineCosts, overlap: OverlapConfig) -> float:
    """When the first forward may start: after loading the batch, then the whole gather when its overlap is off."""
    return c.data_loading_s + (0.0 if overlap.dp_gather else c.dp_gather_s)


def _run_passes(c: PipelineCosts, overlap: OverlapConfig, start_s: float):
    """Place every pass; returns ``(fend[p, m, v], bend[p, m, v], busy[p], wait[p, v])``.

    ``gather_start[s, ch]``: when stage ``s`` starts gathering chunk ``ch``'s parameters
    (NaN until the chunk before it has its share and starts its first forward, which issues
    the prefetch; see the module). ``wait[s, ch]``: what the gather adds to the end of
    chunk ``ch``'s first forward.
    """
    p, m, v = c.p, c.m, c.v
    fend, bend = np.full((p, m, v), np.nan), np.full((p, m, v), np.nan)
    orders = [stage_order(s, p, m, v) for s in range(p)]
    nxt, free = [0] * p, [start_s] * p
    busy, wait = np.zeros(p), np.zeros((p, v))
    dur = {(s, f, ch): _pass_s(c, overlap, s, f, ch) for s in range(p) for f in (True, False) for ch in range(v)}
    share = c.dp_gather_s / v if overlap.dp_gather else 0.0
    n = buckets(c, overlap) if overlap.dp_gather else np.ones((p, v), dtype=np.int64)
    lazy = overlap.megatron_core and v == 1                   # dispatched in the first forward pre-hook
    gather_start = np.full((p, v), np.nan if overlap.dp_gather else start_s)
    gather_start[:, 0] = 0.0 if overlap.dp_gather else start_s         # beside loading the batch
    left = sum(len(o) for o in orders)
    while left:
        moved = 0
        for s in range(p):
            while nxt[s] < len(orders[s]):
                forward, mb, ch = orders[s][nxt[s]]
                ready = _ready(c, fend, bend, forward, s, mb, ch)
                first = forward and mb == 0
                if np.isnan(ready) or (first and np.isnan(gather_start[s, ch])):
                    break
                d = dur[s, forward, ch]
                begin = max(free[s], ready)
                end = begin + d
                if first:                                            # its parameters arrive bucket by bucket
                    t0 = begin if lazy and overlap.dp_gather else gather_start[s, ch]
                    begin = max(begin, t0 + share / n[s, ch])
                    end = max(begin + d, t0 + share + d / n[s, ch])
                    wait[s, ch] = end - (max(free[s], ready) + d)
                    if ch + 1 < v:                                   # prefetch the next chunk's share
                        gather_start[s, ch + 1] = max(t0 + share, begin)
                free[s] = end
                (fend if forward else bend)[s, mb, ch] = end
                busy[s] += d
                nxt[s] += 1
                moved += 1
        if not moved:
            raise RuntimeError("pipeline schedule deadlocked")   # cannot happen for Megatron's orders
        left -= moved
    return fend, bend, busy, wait


def _reduce_end(c: PipelineCosts, overlap: OverlapConfig, bend: np.ndarray) -> np.ndarray:
    """``[p]``: when each stage's gradient reduction ends (bucketed per chunk; see the module)."""
    last = bend.max(axis=1)                                  # (p, v) last backward of each chunk
    reduce_s = np.asarray(c.dp_reduce_s, dtype=float)        # () or (p,)
    if not overlap.dp_reduce:
        return last.max(axis=1) + reduce_s
    n, r = buckets(c, overlap), reduce_s / c.v               # (p, v) buckets; reduce time of one chunk
    d = backward_pass_s(c, overlap)                          # (p, v)
    t = np.full(c.p, -np.inf)
    for ch in range(c.v - 1, -1, -1):                        # chunks finish their backwards last-to-first
        end, k = last[:, ch], n[:, ch]
        t = np.maximum.reduce([t + r, end - d[:, ch] * (1 - 1 / k) + r, end + r / k])
    return t


def run_schedule(costs: PipelineCosts, overlap: OverlapConfig | None = None) -> ScheduleResult:
    """Place one iteration's passes, reductions and optimizer step on the clock.

    Parameters
    ----------
    costs : PipelineCosts
    overlap : OverlapConfig, optional
        Default: every overlap on.

    Returns
    -------
    ScheduleResult

    Examples
    --------
    >>> c = PipelineCosts(forward_s=(1.0,) * 4, backward_s=(2.0,) * 4, comm_forward_s=(0.0,) * 4,
    ...                   comm_backward_s=(0.0,) * 4, m=8)
    >>> r = run_schedule(c)
    >>> r.pipeline_s, round(r.bubble_fraction, 4), round(3 / 11, 4)
    (33.0, 0.2727, 0.2727)
    """
    overlap = overlap or OverlapConfig()
    if costs.reduce_buckets < 1:
        raise ValueError(f"reduce_buckets must be >= 1, got {costs.reduce_buckets!r}")
    start = _first_start_s(costs, overlap)
    fend, bend, busy, wait = _run_passes(costs, overlap, start)
    pipeline = float(bend.max()) - start
    reduce_end = _reduce_end(costs, overlap, bend)
    free = pipeline                                          # the pipeline with its gather free: waits are exposed DP
    if wait.any():
        _, bend_free, _, _ = _run_passes(dataclasses.replace(costs, dp_gather_s=0.0), overlap, start)
        free = float(bend_free.max()) - start
    bubble = 1.0 - float(busy.max()) / free if free > 0 else 0.0
    time_s = float(reduce_end.max()) + costs.optimizer_s
    p, v = costs.p, costs.v
    pass_s = np.array([[np.mean([_pass_s(costs, overlap, s, f, ch) for ch in range(v)]) for f in (True, False)]
                       for s in range(p)])
    compute_s = np.array([[costs.forward_s[s], costs.backward_s[s]] for s in range(p)], dtype=float)
    compute_s[-1] += np.array([costs.logit_forward_s, costs.logit_backward_s]) / v
    timeline = StageTimeline(start_s=start, forward_end_s=fend, backward_end_s=bend, reduce_end_s=reduce_end,
                             time_s=time_s, pass_s=pass_s, compute_s=compute_s, gather_wait_s=wait,
                             loading_s=costs.data_loading_s)
    return ScheduleResult(time_s=time_s, pipeline_s=pipeline, bubble_fraction=bubble, busy_s=busy,
                          backward_end_s=bend.max(axis=(1, 2)), timeline=timeline)
