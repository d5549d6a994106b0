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
groups at the same moments. With interleaving and ``dp_reduce`` overlap a stage's groups
are released when its first chunk's reduction may start, and the stage's time is spread
over its chunks as before (an approximation: all of the stage's bytes enter at once).

The ZeRO all-gather is left as it was: every stage's gather runs before the first forward,
at the same moment (:mod:`rankmap.simulator.schedule`), so the all-at-once run is its
schedule.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rankmap.job.spec import JobSpec
from rankmap.simulator.collectives import CollectiveConfig
from rankmap.simulator.compute import StageTimes, stage_times
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import simulate_phase
from rankmap.simulator.network import Network
from rankmap.simulator.schedule import OverlapConfig, ScheduleResult, run_schedule
from rankmap.simulator.timing import CommTimes, configs_of, pipeline_costs

__all__ = ["reduce_release_s", "stage_reduce_s", "staged_comm_times"]


def reduce_release_s(schedule: ScheduleResult, overlap: OverlapConfig) -> np.ndarray:
    """``release_s[p]``: when each stage's gradient reduction may start, from the earliest stage's.

    The stage's last backward (with interleaving and ``overlap.dp_reduce``: its last chunk's
    last backward, the first chunk to finish; see :func:`rankmap.simulator.schedule.run_schedule`).

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
    last = schedule.timeline.backward_end_s.max(axis=1)        # (p, v) last backward of each chunk
    start = last[:, -1] if overlap.dp_reduce and last.shape[1] > 1 else last.max(axis=1)
    return start - start.min()


def stage_reduce_s(network: Network, placement: RankPlacement, layout, ops, release_s: np.ndarray,
                   config: CollectiveConfig, routing: EcmpConfig) -> np.ndarray | None:
    """``reduce_s[p]``: each stage's ``dp-reduce`` time, its groups released at ``release_s[p]``.

    A stage's time runs from its release to its slowest group's finish; 0 for a stage
    without reduction traffic. None when the phase carries no traffic.
    """
    got = simulate_phase(network, placement, layout, ops, "dp-reduce", config, routing, stage_release_s=release_s)
    if got is None:
        return None
    end = np.full(len(release_s), -np.inf)
    for part in got[0].parts:
        np.maximum.at(end, layout.column("pp")[part.groups[:, 0]], part.group_times_s)
    return np.where(np.isfinite(end), np.maximum(end - release_s, 0.0), 0.0)


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
    costs = pipeline_costs(job, stages or stage_times(job, compute), comm, compute.recompute)
    release = reduce_release_s(run_schedule(costs, overlap), overlap)
    reduce_s = stage_reduce_s(network, placement, layout, ops, release, config, routing)
    if reduce_s is None:
        return comm
    return dataclasses.replace(comm, dp_reduce_stage_s=tuple(float(t) for t in reduce_s))
