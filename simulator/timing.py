"""Iteration time, tokens/s and MFU of a placed job: compute, schedule and simulated communication.

The network simulation (:mod:`rankmap.simulator.iteration`) gives each phase's collectives
as parts with per-group finish times; :func:`comm_times` turns them into what one pass of
the schedule waits for, taking the slowest group of each part (every group of a kind runs
the same collectives at once):

- a pipeline message: the ``pp p2p`` part's time over the ``m * v`` messages each
  boundary sends per direction (both directions run at once); the wrap-around hop of an
  interleaved pipeline the same;
- the TP (and CP, EP) collectives of one pass: each such part's time over ``m * v``
  passes per stage, half forward, half backward (2 of the 4 TP collectives each way);
- the DP all-gather and reduction: their phases' times; each stage's own reduction, its
  DP groups entering the network when its backward ends, comes from
  :func:`rankmap.simulator.staging.staged_comm_times` (``dp_reduce_stage_s``).

These are the rates the traffic got while all of the phase's traffic ran together, an
approximation: in the schedule they run at the moments it places them. With full
activation recomputation the backward pass first re-runs the forward, collectives
included (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", MLSys'23, §2 and §5: a transformer layer with tensor parallelism then runs 6
all-reduces per micro-batch, not 4), so :func:`pipeline_costs` adds one forward's
TP/CP/EP communication to every backward pass. The simulated traffic
(:mod:`rankmap.job.comm`) leaves these repeats out, so the network phase does not see
their extra contention; their time is the forward's, at the simulated rate.

MFU is model FLOPs without recomputation over ``time x GPUs x peak``
(:func:`rankmap.simulator.compute.model_flops`); the exposed communication of a kind is
how much longer the iteration is than with that kind's communication taking no time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from rankmap.errors import SpecError
from rankmap.job.spec import JobSpec
from rankmap.simulator.compute import ComputeConfig, StageTimes, model_flops, stage_times
from rankmap.simulator.pipeline_costs import OverlapConfig, PipelineCosts
from rankmap.simulator.schedule import ScheduleResult, run_schedule
from rankmap.simulator.stats import summarize

__all__ = ["CommTimes", "IterationTiming", "comm_times", "configs_of", "pipeline_costs", "reduce_buckets",
           "iteration_timing", "timing_summary", "workload_stage_times"]


@dataclass(frozen=True, kw_only=True)
class CommTimes:
    """Seconds of communication the schedule places.

    Attributes
    ----------
    p2p_s, wrap_s : float
        One pipeline message; one message last stage -> first stage.
    pass_s : dict of str to float
        ``{kind: s}``: TP/CP/EP collectives of one micro-batch through one chunk, forward
        and backward together.
    dp_gather_s, dp_reduce_s : float
        The iteration's DP all-gather and gradient reduction (slowest group).
    dp_reduce_stage_s : tuple of float
        ``[p]``: each stage's own gradient reduction, its DP groups entering the network
        when its backward ends (:func:`rankmap.simulator.staging.staged_comm_times`); empty:
        every stage takes ``dp_reduce_s``.
    """

    p2p_s: float = 0.0
    wrap_s: float = 0.0
    pass_s: dict = field(default_factory=dict)
    dp_gather_s: float = 0.0
    dp_reduce_s: float = 0.0
    dp_reduce_stage_s: tuple = ()

    def without(self, kind: str) -> "CommTimes":
        """These times with ``kind``'s (``"pp"``, ``"dp"`` or a pass kind) set to zero."""
        if kind == "pp":
            return dataclasses.replace(self, p2p_s=0.0, wrap_s=0.0)
        if kind == "dp":
            return dataclasses.replace(self, dp_gather_s=0.0, dp_reduce_s=0.0,
                                       dp_reduce_stage_s=(0.0,) * len(self.dp_reduce_stage_s))
        return dataclasses.replace(self, pass_s={k: (0.0 if k == kind else t) for k, t in self.pass_s.items()})

    def kinds(self) -> list[str]:
        """Kinds that take time, in a fixed order."""
        out = [k for k, t in self.pass_s.items() if t > 0]
        out += ["pp"] if self.p2p_s > 0 or self.wrap_s > 0 else []
        dp = self.dp_gather_s > 0 or self.dp_reduce_s > 0 or any(t > 0 for t in self.dp_reduce_stage_s)
        return out + (["dp"] if dp else [])


def comm_times(result, job: JobSpec) -> CommTimes:
    """Per-pass communication of one simulated iteration (an ``IterationResult``; see the module)."""
    passes = job.micro_batches() * job.virtual_stages
    p2p, pass_s = 0.0, {}
    pipeline = result.phase("pipeline")
    for part in (pipeline.parts if pipeline is not None else ()):
        kind, op = part.label.split(" ", 1)
        slowest = float(part.group_times_s.max(initial=0.0))
        if op == "p2p":
            p2p = slowest / passes
        else:
            pass_s[kind] = pass_s.get(kind, 0.0) + slowest / passes
    gather, reduce = result.phase("dp-gather"), result.phase("dp-reduce")
    return CommTimes(p2p_s=p2p, wrap_s=p2p if job.virtual_stages > 1 else 0.0, pass_s=pass_s,
                     dp_gather_s=gather.time_s if gather else 0.0, dp_reduce_s=reduce.time_s if reduce else 0.0)


def reduce_buckets(job: JobSpec) -> int:
    """Gradient buckets per model chunk: Megatron-Core's default bucket of ``max(4e7, 1e6 * dp)``
    parameters (megatron/core/distributed/distributed_data_parallel.py, ``DistributedDataParallel``;
    distributed_data_parallel_config.py, ``bucket_size``) over the chunk's ``params / (tp pp v)``.

    Examples
    --------
    >>> reduce_buckets(JobSpec(tp=8, pp=8, dp=192, global_batch_size=6144, virtual_stages=3))   # 175B: 192M each
    5
    """
    dp = job.sizes()["dp"]
    chunk_params = job.model.params / (job.tp * job.pp * job.virtual_stages)
    return max(1, math.ceil(chunk_params / max(40_000_000, 1_000_000 * dp)))


def pipeline_costs(job: JobSpec, stages: StageTimes, comm: CommTimes, recompute: bool = False,
                   data_loading_s: float = 0.0, overlap: OverlapConfig | None = None) -> PipelineCosts:
    """The schedule's inputs from compute per stage and communication per pass.

    A pass's TP/CP/EP communication is split evenly between its forward and backward;
    ``recompute`` adds the recomputed forward's share to the backward (see the module).
    TP's collectives, and CP's and EP's where ``overlap.cp`` / ``overlap.ep`` are on, may
    run under the pass's compute (``comm_*``); CP and EP with their overlap off add to it
    (``serial_*``). Default ``overlap``: :class:`OverlapConfig` (CP hidden, EP exposed).
    Gradients reduce in :func:`reduce_buckets` buckets per chunk; ``data_loading_s`` is the
    window the first chunk's all-gather runs under (:class:`~rankmap.simulator.compute.ComputeConfig`).

    Examples
    --------
    >>> comm = CommTimes(pass_s={"tp": 4.0})
    >>> st = StageTimes(forward_s=(1.0,), backward_s=(3.0,), optimizer_s=0.0)
    >>> c = pipeline_costs(JobSpec(tp=8, pp=1, dp=1, global_batch_size=4), st, comm, recompute=True)
    >>> c.comm_forward_s, c.comm_backward_s
    ((2.0,), (4.0,))
    >>> c = pipeline_costs(JobSpec(tp=8, pp=1, dp=1, global_batch_size=4), st, CommTimes(pass_s={"tp": 4.0, "ep": 2.0}))
    >>> c.comm_forward_s, c.serial_forward_s
    ((2.0,), (1.0,))
    """
    overlap = overlap or OverlapConfig()
    hidden = {"cp": overlap.cp, "ep": overlap.ep}
    per_pass = sum(t for k, t in comm.pass_s.items() if hidden.get(k, True))
    serial = sum(t for k, t in comm.pass_s.items() if not hidden.get(k, True))
    p, again = job.pp, (2 if recompute else 1)
    return PipelineCosts(forward_s=tuple(stages.forward_s), backward_s=tuple(stages.backward_s),
                         comm_forward_s=(per_pass / 2,) * p, comm_backward_s=(per_pass / 2 * again,) * p,
                         serial_forward_s=(serial / 2,) * p if serial else (),
                         serial_backward_s=(serial / 2 * again,) * p if serial else (),
                         p2p_s=comm.p2p_s, wrap_s=comm.wrap_s, dp_gather_s=comm.dp_gather_s,
                         data_loading_s=data_loading_s, dp_reduce_s=comm.dp_reduce_stage_s or comm.dp_reduce_s,
                         reduce_buckets=reduce_buckets(job), logit_forward_s=stages.logit_forward_s,
                         logit_backward_s=stages.logit_backward_s, optimizer_s=stages.optimizer_s,
                         m=job.micro_batches(), v=job.virtual_stages)


@dataclass(frozen=True, kw_only=True)
class IterationTiming:
    """Predicted iteration of a placed job.

    Attributes
    ----------
    time_s : float
    tokens_per_s : float
        ``B * s / time_s``.
    mfu : float
        Model FLOPs (no recomputation) / (time x GPUs x peak).
    tflops_per_gpu : float
        FLOPs executed (recomputation included) per GPU per second, in TFLOP/s: Megatron-LM's figure.
    bubble_fraction : float
    compute_s : float
        Busiest stage's time in its passes: compute, plus the TP/CP/EP collectives not hidden.
    exposed_comm_s : dict of str to float
        ``{kind: s}``: iteration time minus the time with that kind's communication free.
    schedule : ScheduleResult
    """

    time_s: float
    tokens_per_s: float
    mfu: float
    tflops_per_gpu: float
    bubble_fraction: float
    compute_s: float
    exposed_comm_s: dict
    schedule: ScheduleResult

    def summary(self) -> dict:
        """The fields ``simulation.json`` keeps (no arrays)."""
        return {"time_s": self.time_s, "tokens_per_s": self.tokens_per_s, "mfu": self.mfu,
                "tflops_per_gpu": self.tflops_per_gpu, "bubble_fraction": self.bubble_fraction,
                "compute_s": self.compute_s, "exposed_comm_s": dict(self.exposed_comm_s)}


def iteration_timing(job: JobSpec, comm: CommTimes, compute: ComputeConfig | None = None,
                     overlap: OverlapConfig | None = None, stages: StageTimes | None = None) -> IterationTiming:
    """Predict one iteration of ``job`` given its communication.

    Parameters
    ----------
    job : JobSpec
        Resolved.
    comm : CommTimes
        From :func:`comm_times` (simulated) or built analytically.
    compute : ComputeConfig, optional
    overlap : OverlapConfig, optional
    stages : StageTimes, optional
        Measured per-stage times (a workload's); default derived from FLOPs.

    Returns
    -------
    IterationTiming
    """
    compute = compute or ComputeConfig()
    overlap = overlap or OverlapConfig()
    stages = stages or stage_times(job, compute)
    sched = run_schedule(pipeline_costs(job, stages, comm, compute.recompute, compute.data_loading_s, overlap),
                         overlap)
    exposed = {k: sched.time_s - run_schedule(pipeline_costs(job, stages, comm.without(k), compute.recompute,
                                                             compute.data_loading_s, overlap), overlap).time_s
               for k in comm.kinds()}
    gpus = job.world_size
    peak = compute.spec.peak_tflops * 1e12
    tokens = job.micro_batch_size * job.micro_batches() * job.sizes()["dp"] * job.model.seq_len
    executed = model_flops(job) * (4 / 3 if compute.recompute else 1.0)
    return IterationTiming(time_s=sched.time_s, tokens_per_s=tokens / sched.time_s,
                           mfu=model_flops(job) / (sched.time_s * gpus * peak),
                           tflops_per_gpu=executed / (sched.time_s * gpus) / 1e12,
                           bubble_fraction=sched.bubble_fraction, compute_s=float(sched.busy_s.max()),
                           exposed_comm_s=exposed, schedule=sched)


def configs_of(job: JobSpec) -> tuple[ComputeConfig, OverlapConfig]:
    """The compute and overlap settings of ``job.hardware`` (the job YAML's ``hardware`` and ``overlap``)."""
    hw = job.hardware
    return (ComputeConfig(gpu=hw.gpu, efficiency_gemm=hw.efficiency_gemm,
                          efficiency_elementwise=hw.efficiency_elementwise, recompute=hw.recompute,
                          optimizer_step_s=hw.optimizer_step_s, data_loading_s=hw.data_loading_s),
            OverlapConfig(tp=hw.overlap_tp, cp=hw.overlap_cp, ep=hw.overlap_ep, dp_gather=hw.overlap_dp_gather,
                          dp_reduce=hw.overlap_dp_reduce,
                          megatron_core=job.framework == "megatron"))


def timing_summary(job: JobSpec, runs, stages: StageTimes | None = None, comms=None) -> dict:
    """``simulation.json``'s ``"iteration"`` entry of one placement: the prediction under each seed's run.

    ``time_s`` and ``mfu`` are summaries over seeds (mean, min, p50, p95, max); the other
    figures are the mean over seeds. ``runs`` are ``IterationResult`` s, one per seed;
    ``comms``, optional, their :class:`CommTimes` (default :func:`comm_times` of each run).
    """
    compute, overlap = configs_of(job)
    comms = comms if comms is not None else [comm_times(r, job) for r in runs]
    got = [iteration_timing(job, c, compute, overlap, stages) for c in comms]
    kinds = list(dict.fromkeys(k for g in got for k in g.exposed_comm_s))
    out = {"time_s": summarize([g.time_s for g in got]), "mfu": summarize([g.mfu for g in got])}
    for name in ("tokens_per_s", "tflops_per_gpu", "bubble_fraction", "compute_s"):
        out[name] = float(np.mean([getattr(g, name) for g in got]))
    out["exposed_comm_s"] = {k: float(np.mean([g.exposed_comm_s.get(k, 0.0) for g in got])) for k in kinds}
    out["compute_source"] = stages.source if stages is not None else "flops"
    return out


def workload_stage_times(workload, job: JobSpec, time_unit_s: float = 1e-9) -> StageTimes:
    """Measured compute per stage from a SimAI/AICB workload's layer lines.

    The lines are one rank's iteration (as :mod:`rankmap.simulator.workload` reads their
    traffic), so one pass (micro-batch through one chunk) takes the forward or backward
    total over ``ga * vpp``; every stage gets the same (the file describes one rank). The
    weight-update total is the optimizer step. ``time_unit_s``: seconds per unit of the
    file, nanoseconds by default (an assumption: SimAI's simulated clock counts ns).
    """
    forward, backward, update = (t * time_unit_s for t in workload.compute_totals)
    passes = workload.ga * workload.vpp
    _check_physical(workload, job, forward / passes, time_unit_s)
    return StageTimes(forward_s=(forward / passes,) * job.pp, backward_s=(backward / passes,) * job.pp,
                      optimizer_s=update, source="workload")


def _check_physical(workload, job: JobSpec, forward_s: float, time_unit_s: float) -> None:
    """Refuse compute times faster than the job's GPU at its peak (an MFU above 100% would follow):
    times in another unit than ``time_unit_s``, or placeholders."""
    compute, _ = configs_of(job)
    fastest = stage_times(job, dataclasses.replace(compute, efficiency_gemm=1.0, efficiency_elementwise=1.0))
    floor_s = min(fastest.forward_s)
    if forward_s < floor_s:
        raise SpecError(f"the layer lines' forward compute is {forward_s:.3g} s per micro-batch and chunk (read "
                        f"as {time_unit_s:g} s units), faster than a {compute.gpu.upper()} at its peak needs for "
                        f"this model ({floor_s:.3g} s): the times are in another unit, or not measured",
                        source=workload.source, key="fwd_compute")
