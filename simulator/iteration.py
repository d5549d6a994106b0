"""One training iteration of a placed job: its collectives, in the phases the schedule runs them.

The traffic is the job's own description, :func:`rankmap.job.comm.iteration_comm` (the
same one the planner's edge bytes come from), or a SimAI/AICB workload
(:mod:`rankmap.simulator.workload`), as a list of :class:`~rankmap.job.comm.CommOp`.
Every group of a kind runs the same collectives at the same time (SPMD), so each phase
is simulated as one flow set holding every group's traffic:

1. ``dp-gather``: ZeRO's all-gather of parameters before the forward passes (MegaScale,
   NSDI'24, prefetches it beside data loading).
2. ``pipeline``: the micro-batches' forward and backward passes (1F1B). Pipeline
   send/recv runs beside compute, and so do the TP (and CP, EP) collectives, which
   MegaScale overlaps with the transformer block; they run concurrently here and contend
   where they share links. A phase's volume is the iteration's: all ``m`` micro-batches,
   which in a fluid model just scales the time of one.
3. ``dp-reduce``: the gradient reduce-scatter (ZeRO) or all-reduce after the last backward.
   Here every stage's groups start together; the iteration timing simulates it again with
   each stage's groups released when its backward ends (``simulate_phase``'s
   ``stage_release_s``, :mod:`rankmap.simulator.staging`).

The phases run one after another; the iteration's communication time is their sum
(compute is not modelled, so this is the time the network needs for the iteration's
traffic). Each phase waits for its slowest group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.job.comm import PHASES, CommOp, iteration_comm
from rankmap.job.layout import GROUP_KINDS, ParallelLayout
from rankmap.job.spec import JobSpec
from rankmap.simulator.collectives import CollectiveConfig, collective_flows, pipeline_flows, run_flows
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.events import FlowResult
from rankmap.simulator.flows import FlowSet, RankPlacement
from rankmap.simulator.network import Network

__all__ = ["PHASES", "KINDS", "CommOp", "PartResult", "PhaseResult", "IterationResult", "job_comm_ops",
           "phase_flows", "simulate_phase", "simulate_iteration"]

KINDS = tuple(GROUP_KINDS)          # group kinds a CommOp may name (rankmap.job.layout)


def job_comm_ops(job: JobSpec) -> tuple[CommOp, ...]:
    """The collectives of one iteration of ``job`` that put bytes on links.

    :meth:`rankmap.job.comm.IterationComm.network_ops` of :func:`rankmap.job.comm.iteration_comm`:
    the job's description less the groups of one rank and the collectives it does not run.

    Examples
    --------
    >>> ops = job_comm_ops(JobSpec(tp=8, pp=8, dp=2, num_micro_batches=4))
    >>> [(o.label, o.phase, o.count) for o in ops]  # doctest: +NORMALIZE_WHITESPACE
    [('tp allreduce', 'pipeline', 192), ('pp p2p', 'pipeline', 8), ('dp allgather', 'dp-gather', 1),
     ('dp reducescatter', 'dp-reduce', 1)]
    """
    return iteration_comm(job).network_ops()


@dataclass(frozen=True, eq=False)
class PartResult:
    """One collective kind within a phase.

    Attributes
    ----------
    label : str
        e.g. ``"dp reducescatter"``.
    groups : ndarray
        ``groups[n_groups, size]`` ranks of its groups.
    group_times_s : ndarray
        ``group_times_s[n_groups]``: when each group's traffic of this part completed.
    """

    label: str
    groups: np.ndarray
    group_times_s: np.ndarray

    @property
    def slowest_group(self) -> int:
        return int(np.argmax(self.group_times_s)) if self.group_times_s.size else 0


@dataclass(frozen=True, eq=False)
class PhaseResult:
    """One phase: its time, its parts, and the bytes it put on every link (``link_bytes[L]``).

    ``uplink_qps[n_tor_groups * rails * uplinks]``: hashed queue pairs on each ToR uplink
    cable (``tor-up`` links in order; zeros under packet spraying, which hashes nothing).
    """

    name: str
    time_s: float
    parts: tuple
    link_bytes: np.ndarray
    n_flows: int
    events: int
    uplink_qps: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class IterationResult:
    """A simulated iteration.

    Attributes
    ----------
    phases : tuple of PhaseResult
        In schedule order; phases without traffic are left out.
    comm_time_s : float
        Sum of the phase times.
    """

    phases: tuple
    comm_time_s: float

    @property
    def n_flows(self) -> int:
        return sum(p.n_flows for p in self.phases)

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)

    def slowest(self) -> tuple[PhaseResult, PartResult, int] | None:
        """The slowest group of the longest phase: ``(phase, part, group index)``."""
        if not self.phases:
            return None
        phase = max(self.phases, key=lambda p: p.time_s)
        part = max(phase.parts, key=lambda q: q.group_times_s.max(initial=0.0))
        return phase, part, part.slowest_group

    def uplink_qps(self, network: Network, phase: str) -> np.ndarray:
        """``uplink_qps[n_tor_groups, rails * uplinks]``: hashed queue pairs per ToR uplink cable in ``phase``."""
        got = self.phase(phase)
        shape = (network.n_groups, network.rails * network.uplinks)
        if got is None or got.uplink_qps is None:
            return np.zeros(shape, dtype=np.int32)
        return got.uplink_qps.reshape(shape)

    def uplink_bytes(self, network: Network) -> np.ndarray:
        """``uplink_bytes[n_tor_groups, rails * uplinks]``: bytes each ToR uplink carried."""
        r = network.link_range("tor-up")
        total = sum(p.link_bytes[r.start:r.stop] for p in self.phases) if self.phases else np.zeros(len(r))
        return np.asarray(total).reshape(network.n_groups, network.rails * network.uplinks)


def phase_flows(placement: RankPlacement, layout: ParallelLayout, ops, phase: str,
                config: CollectiveConfig) -> tuple[FlowSet, list[np.ndarray]]:
    """The flow set of one phase and the group table of each of its parts.

    Ops of one kind and collective are merged: their bytes and step counts add up.
    """
    merged: dict[tuple[str, str], list[float]] = {}
    for o in ops:
        if o.phase == phase and o.size_bytes > 0 and o.count > 0:
            acc = merged.setdefault((o.kind, o.op), [0.0, 0.0, 0.0])
            acc[0] += o.size_bytes * o.count
            acc[1] += o.count
            acc[2] += o.size_bytes * o.wrap_count
    sets, tables = [], []
    for (kind, op), (total, count, wrap) in merged.items():
        table = layout.groups(kind)
        if table.shape[1] < 2:
            continue
        label = f"{kind} {op}"
        if op == "p2p":
            size = total / count
            flows = pipeline_flows(placement, table, size, count / 2, wrap_sends=wrap / size / 2, config=config,
                                   label=label, comm=kind)
        else:
            flows = collective_flows(placement, table, op, total / count, count=count, config=config,
                                     label=label, comm=kind)
        sets.append(flows)
        tables.append(table)
    return FlowSet.concat(sets), tables


def simulate_phase(network: Network, placement: RankPlacement, layout: ParallelLayout, ops, phase: str,
                   config: CollectiveConfig, routing: EcmpConfig, stage_release_s: np.ndarray | None = None
                   ) -> tuple[PhaseResult, FlowSet, FlowResult] | None:
    """Simulate one phase; None when it carries no traffic. Also returns its flows and raw result.

    ``stage_release_s[pp]``, optional: when each pipeline stage's groups enter the network
    (seconds from the earliest; default all at 0). A group's stage is its first rank's,
    which is every rank's for the DP (and expert DP) groups. Times in the result are then
    absolute: a group's time is when it finished.
    """
    flows, tables = phase_flows(placement, layout, ops, phase, config)
    if flows.n_coflows == 0:
        return None
    release = None
    if stage_release_s is not None:
        stage_of = [layout.column("pp")[table[:, 0]] for table in tables]          # [parts][n_groups]
        release = np.zeros(flows.n_coflows)
        for i, stages in enumerate(stage_of):
            mine = flows.coflow_part == i
            release[mine] = np.asarray(stage_release_s, dtype=float)[stages[flows.coflow_group[mine]]]
    result = run_flows(network, flows, routing, config, release_s=release)
    parts = []
    for i, (label, table) in enumerate(zip(flows.parts, tables)):
        mine = flows.coflow_part == i
        times = np.zeros(table.shape[0])
        np.maximum.at(times, flows.coflow_group[mine], result.finish_s[mine])
        parts.append(PartResult(label, table, times))
    up = network.link_range("tor-up")
    uplink_qps = np.bincount(result.routing.uplink - up.start, minlength=len(up)).astype(np.int32)
    return PhaseResult(phase, result.time_s, tuple(parts), result.link_bytes, flows.n_flows, result.events,
                       uplink_qps), flows, result


def simulate_iteration(network: Network, placement: RankPlacement, layout: ParallelLayout, ops,
                       config: CollectiveConfig | None = None, routing: EcmpConfig | None = None) -> IterationResult:
    """Simulate one iteration's traffic phase by phase.

    Parameters
    ----------
    network : Network
    placement : RankPlacement
        Where the job's ranks run (:meth:`RankPlacement.from_rankmap`).
    layout : ParallelLayout
        The job's rank layout (groups per kind).
    ops : sequence of CommOp
        The iteration's collectives (:func:`job_comm_ops` or a workload's).
    config : CollectiveConfig, optional
    routing : EcmpConfig, optional

    Returns
    -------
    IterationResult
    """
    config = config or CollectiveConfig()
    routing = routing or EcmpConfig()
    phases = [got[0] for name in PHASES
              if (got := simulate_phase(network, placement, layout, ops, name, config, routing)) is not None]
    return IterationResult(tuple(phases), float(sum(p.time_s for p in phases)))
