"""Each stage's gradient reduction in the network from the moment its backward ends.

The network simulation of an iteration (:func:`rankmap.simulator.iteration.simulate_iteration`)
runs every phase's groups at once, so its ``dp-reduce`` phase has the DP groups of all
pipeline stages fighting for the uplinks together. In the schedule they do not: stage
``i``'s gradients are ready when its last backward ends, and under 1F1B the last stage
finishes first and stage 0 last (Narayanan et al., "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM", SC'21, §2.2; Megatron-LM's
``finalize_model_grads`` runs each stage's data-parallel reduction after that stage's
``forward_backward_func``, and with ``overlap_grad_reduce`` per bucket as its grads are
ready). :func:`staged_comm_times` couples the two:

1. run the schedule (:func:`rankmap.simulator.schedule.run_schedule`) with the reduction
   estimates of the all-at-once run;
2. simulate the ``dp-reduce`` flows again, each stage's groups released into the network
   when that stage's reduction starts in the schedule
   (:func:`rankmap.simulator.events.complete_coflows` with release times);
3. give each stage its own reduction time: when its last group finished, less its release.

One pass is the fixed point: the backward ends, hence the release times, do not depend on
the reductions (a reduction only delays the optimizer step), so a second pass releases the
groups at the same moments.

With interleaving (``v`` model chunks per stage) and ``dp_reduce`` overlap, each chunk's
share of the stage's gradients (``1/v`` of the bytes: chunks hold equal layers) enters the
network when that chunk's last backward ends (:func:`chunk_release_s`), as in Megatron-LM:
each model chunk is its own ``DistributedDataParallel`` with its own grad buffers, whose
buckets are marked ready only in the chunk's last micro-batch
(``megatron/core/distributed/param_and_grad_buffer.py``, ``register_grad_ready``), and the
interleaved schedule enables grad sync for a chunk in the backward of its last micro-batch
(``megatron/core/pipeline_parallel/schedules.py``, ``backward_step_helper_preprocess``,
``is_last_microbatch_for_model_chunk``). Backwards run the chunks last-to-first, so chunk
``v - 1``'s share goes first. Inside that last backward the buckets become ready one by one
(``n`` buckets, a backward of ``d``: the first ``d (1 - 1/n)`` before it ends); a share
enters the network whole when its first bucket is ready, as the schedule's bucket rule
assumes (:mod:`rankmap.simulator.schedule`), so an uncontended stage gets the same time
staged as all at once. Not modelled: with ``align_grad_reduce`` (Megatron-LM's default
when grads are overlapped) the schedule launches chunk ``c``'s sync ``pipeline rank``
backwards later (``backward_step_helper_postprocess``), to line the stages up. The shares of a stage
run on the same connections (same paths). The schedule takes one reduction time per stage
and spreads it over the chunks (:mod:`rankmap.simulator.schedule`), so
:func:`staged_comm_times` gives each stage the time that makes the schedule's reduction end
where the stage's last share finished in the network (found by bisection on the
schedule's output, whatever its rule for the chunks).

The ZeRO all-gather is left as it was: every stage's gather starts with the iteration, at
the same moment (:mod:`rankmap.simulator.schedule`), so the all-at-once run is its
schedule.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rankmap.job.spec import JobSpec
from rankmap.simulator.collectives import CollectiveConfig, run_flows
from rankmap.simulator.compute import StageTimes, stage_times
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import FlowSet, RankPlacement
from rankmap.simulator.iteration import phase_flows, simulate_phase
from rankmap.simulator.network import Network
from rankmap.simulator.pipeline_costs import OverlapConfig
from rankmap.simulator.schedule import ScheduleResult, backward_pass_s, buckets, run_schedule
from rankmap.simulator.timing import CommTimes, configs_of, pipeline_costs

__all__ = ["chunk_release_s", "reduce_release_s", "stage_reduce_s", "staged_comm_times"]


def chunk_release_s(schedule: ScheduleResult, overlap: OverlapConfig, lead_s: np.ndarray | None = None
                    ) -> np.ndarray:
    """``release_s[p, v]``: when each stage's share of each model chunk's gradients may enter
    the network, from the earliest release.

    With ``overlap.dp_reduce``: chunk ``c``'s last backward on the stage, less ``lead_s[p, v]``
    (when its first gradient bucket is ready: ``d (1 - 1/n)``, default 0; Megatron-LM
    releases each chunk's grad buckets in that chunk's last micro-batch; see the module);
    otherwise every chunk at the stage's last backward. Read from the schedule's timeline
    (``backward_end_s[p, m, v]``).

    Examples
    --------
    Two stages, two micro-batches, two chunks, 1 s forwards and 2 s backwards: the
    backwards of chunk 1 end at 11 s (stage 0) and 9 s (stage 1), those of chunk 0 at 15 s
    and 13 s, so chunk 0's shares go 4 s after chunk 1's.

    >>> from rankmap.simulator.schedule import PipelineCosts
    >>> c = PipelineCosts(forward_s=(1.0,) * 2, backward_s=(2.0,) * 2, comm_forward_s=(0.0,) * 2,
    ...                   comm_backward_s=(0.0,) * 2, m=2, v=2)
    >>> chunk_release_s(run_schedule(c), OverlapConfig()).tolist()
    [[6.0, 2.0], [4.0, 0.0]]
    >>> chunk_release_s(run_schedule(c), OverlapConfig(dp_reduce=False)).tolist()
    [[2.0, 2.0], [0.0, 0.0]]
    """
    last = schedule.timeline.backward_end_s.max(axis=1)        # (p, v) last backward of each chunk
    if not overlap.dp_reduce:
        last = np.repeat(last.max(axis=1, keepdims=True), last.shape[1], axis=1)
    elif lead_s is not None:
        last = last - np.asarray(lead_s, dtype=float)
    return last - last.min()


def reduce_release_s(schedule: ScheduleResult, overlap: OverlapConfig) -> np.ndarray:
    """``release_s[p]``: when each stage's first gradients may enter the network, from the earliest.

    The earliest of :func:`chunk_release_s` per stage: the stage's last backward, or with
    interleaving and ``overlap.dp_reduce`` its chunk ``v - 1``'s (the first to finish).

    Examples
    --------
    Four equal stages, 1F1B: stage ``i``'s last backward ends ``p - 1 - i`` backwards after
    the last stage's, so with 2 s backwards the releases are 6, 4, 2, 0 s.

    >>> from rankmap.simulator.schedule import PipelineCosts
    >>> c = PipelineCosts(forward_s=(1.0,) * 4, backward_s=(2.0,) * 4, comm_forward_s=(0.0,) * 4,
    ...                   comm_backward_s=(0.0,) * 4, m=8)
    >>> reduce_release_s(run_schedule(c), OverlapConfig()).tolist()
    [6.0, 4.0, 2.0, 0.0]
    """
    return chunk_release_s(schedule, overlap).min(axis=1)


def stage_reduce_s(network: Network, placement: RankPlacement, layout, ops, release_s: np.ndarray,
                   config: CollectiveConfig, routing: EcmpConfig) -> np.ndarray | None:
    """``reduce_s[p]``: each stage's ``dp-reduce`` time, its groups released at ``release_s``.

    ``release_s[p]``: a stage's groups enter at once; a stage's time runs from its release
    to its slowest group's finish. ``release_s[p, v]`` (:func:`chunk_release_s`): each
    chunk's share (``1/v`` of the bytes, on the same connections) enters on its own, and a
    stage's time runs from its first share's release to its last share's finish; columns
    all equal are the one-release case. 0 for a stage without reduction traffic; None when
    the phase carries none.
    """
    release_s = np.asarray(release_s, dtype=float)
    if release_s.ndim == 2 and (release_s == release_s[:, :1]).all():
        release_s = release_s[:, 0]
    if release_s.ndim == 2:
        return _chunk_reduce_s(network, placement, layout, ops, release_s, config, routing)
    got = simulate_phase(network, placement, layout, ops, "dp-reduce", config, routing, stage_release_s=release_s)
    if got is None:
        return None
    end = np.full(len(release_s), -np.inf)
    for part in got[0].parts:
        np.maximum.at(end, layout.column("pp")[part.groups[:, 0]], part.group_times_s)
    return np.where(np.isfinite(end), np.maximum(end - release_s, 0.0), 0.0)


def _chunk_reduce_s(network: Network, placement: RankPlacement, layout, ops, release_s: np.ndarray,
                    config: CollectiveConfig, routing: EcmpConfig) -> np.ndarray | None:
    """:func:`stage_reduce_s` with one release per (stage, chunk) (see :func:`_chunk_finish_s`)."""
    finish = _chunk_finish_s(network, placement, layout, ops, release_s, config, routing)
    if finish is None:
        return None
    return _span_s(release_s, finish)


def _span_s(release_s: np.ndarray, finish_s: np.ndarray) -> np.ndarray:
    """``[p]``: each stage's first share's release to its last share's finish (0 without bytes)."""
    first = release_s.min(axis=1)
    return np.fmax(np.nanmax(np.where(np.isnan(finish_s), -np.inf, finish_s), axis=1), first) - first


def _chunk_finish_s(network: Network, placement: RankPlacement, layout, ops, release_s: np.ndarray,
                    config: CollectiveConfig, routing: EcmpConfig) -> np.ndarray | None:
    """``finish_s[p, v]``: when each stage's share of each chunk left the network (NaN for a
    stage without reduction bytes): ``v`` copies of the phase's flows, each ``1/v`` of the
    bytes, copy ``c`` of a stage's groups released at ``release_s[stage, c]``."""
    p, v = release_s.shape
    shares = tuple(dataclasses.replace(o, size_bytes=o.size_bytes / v) if o.phase == "dp-reduce" else o for o in ops)
    flows, tables = phase_flows(placement, layout, shares, "dp-reduce", config)
    if flows.n_coflows == 0:
        return None
    stage = np.zeros(flows.n_coflows, dtype=np.int64)          # (C,) each coflow's stage
    for i, table in enumerate(tables):
        mine = flows.coflow_part == i
        stage[mine] = layout.column("pp")[table[flows.coflow_group[mine], 0]]
    copies = FlowSet.concat([flows] * v)
    chunk = np.repeat(np.arange(v), flows.n_coflows)           # (v * C,) each copy's chunk
    stage = np.tile(stage, v)
    result = run_flows(network, copies, routing, config, release_s=release_s[stage, chunk])
    finish = np.full((p, v), -np.inf)
    np.maximum.at(finish, (stage, chunk), result.finish_s)
    return np.where(np.isfinite(finish), finish, np.nan)


def _busy_s(release_s: np.ndarray, finish_s: np.ndarray) -> np.ndarray:
    """``[p]``: how long each stage's shares were in the network, the shares taken in release
    order and overlaps counted once (0 for a stage without bytes). A lower bound of the
    stage's reduction time: what it takes with no backward left to hide it."""
    busy = np.zeros(release_s.shape[0])
    for s in range(release_s.shape[0]):
        t = -np.inf
        for c in np.argsort(release_s[s], kind="stable"):
            if np.isnan(finish_s[s, c]):
                continue
            busy[s] += max(finish_s[s, c] - max(release_s[s, c], t), 0.0)
            t = max(t, finish_s[s, c])
    return busy


def staged_comm_times(network: Network, placement: RankPlacement, layout, ops, job: JobSpec, comm: CommTimes,
                      config: CollectiveConfig, routing: EcmpConfig, stages: StageTimes | None = None
                      ) -> CommTimes:
    """``comm`` with each stage's own gradient reduction (``dp_reduce_stage_s``; see the module).

    Parameters
    ----------
    network, placement, layout, ops, config, routing
        As for :func:`rankmap.simulator.iteration.simulate_iteration` (``routing`` with the
        seed of the run ``comm`` came from).
    job : JobSpec
        Resolved; its ``hardware`` gives compute and overlaps (:func:`rankmap.simulator.timing.configs_of`).
    comm : CommTimes
        From :func:`rankmap.simulator.timing.comm_times` of the all-at-once run.
    stages : StageTimes, optional
        Measured compute per stage; default from FLOPs.

    Returns
    -------
    CommTimes
        ``comm`` unchanged when the iteration has no reduction traffic.
    """
    compute, overlap = configs_of(job)
    costs = pipeline_costs(job, stages or stage_times(job, compute), comm, compute.recompute, overlap=overlap)
    schedule = run_schedule(costs, overlap)
    lead = backward_pass_s(costs, overlap) * (1 - 1 / buckets(costs, overlap)) * overlap.dp_reduce   # first bucket ready
    release = chunk_release_s(schedule, overlap, lead)
    if (release == release[:, :1]).all():                    # one release per stage
        reduce_s = stage_reduce_s(network, placement, layout, ops, release, config, routing)
    else:                                                    # shares apart: fit the schedule to the network
        finish = _chunk_finish_s(network, placement, layout, ops, release, config, routing)
        if finish is None:
            return comm
        span = _span_s(release, finish)
        offset = float((schedule.timeline.backward_end_s.max(axis=1) - lead).min())        # release 0 on the clock
        fitted = _fit_reduce_s(costs, overlap, offset + release.min(axis=1) + span, span)
        # a network done before the last backward ends fits to 0: the reduction still takes
        # the time its shares spent in the network, which the schedule hides as it can
        reduce_s = np.maximum(fitted, _busy_s(release, finish))
    if reduce_s is None:
        return comm
    return dataclasses.replace(comm, dp_reduce_stage_s=tuple(float(t) for t in reduce_s))


def _fit_reduce_s(costs, overlap: OverlapConfig, end_s: np.ndarray, span_s: np.ndarray) -> np.ndarray:
    """``reduce_s[p]`` with which the schedule's ``reduce_end_s`` is ``end_s[p]`` (bisection:
    a stage's reduction end grows with its time, from its last backward at 0; ``span_s[p]``,
    the stage's first release to its end, ends no earlier than ``end_s``)."""
    lo, hi = np.zeros_like(span_s), np.asarray(span_s, dtype=float)
    for _ in range(50):
        mid = (lo + hi) / 2
        got = run_schedule(dataclasses.replace(costs, dp_reduce_s=tuple(mid.tolist())), overlap).timeline.reduce_end_s
        early = got < end_s
        lo, hi = np.where(early, mid, lo), np.where(early, hi, mid)
    return hi
