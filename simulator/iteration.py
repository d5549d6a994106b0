"""One training iteration of a placed job: its collectives, in the phases the schedule runs them.

The traffic is that of :func:`rankmap.job.traffic.job_traffic` (the planner's accounting)
or of a SimAI/AICB workload (:mod:`rankmap.simulator.workload`), as a list of :class:`CommOp`.
Every group of a kind runs the same collectives at the same time (SPMD), so each phase
is simulated as one flow set holding every group's traffic:

1. ``dp-gather``: ZeRO's all-gather of parameters before the forward passes (MegaScale
   prefetches it beside data loading).
2. ``pipeline``: the micro-batches' forward and backward passes (1F1B). Pipeline
   send/recv runs beside compute, and so do the TP (and CP, EP) collectives, which
   MegaScale overlaps with the transformer block; they run concurrently here and contend
   where they share links. A phase's volume is the iteration's: all ``m`` micro-batches,
   which in a fluid model just scales the time of one.
3. ``dp-reduce``: the gradient reduce-scatter (ZeRO) or all-reduce after the last backward.

The phases run one after another; the iteration's communication time is their sum
(compute is not modelled, so this is the time the network needs for the iteration's
traffic). Each phase waits for its slowest group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import JobSpec
from rankmap.job.traffic import job_traffic
from rankmap.simulator.collectives import OPS, CollectiveConfig, collective_flows, pipeline_flows
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.events import FlowResult, simulate_flows
from rankmap.simulator.flows import FlowSet, RankPlacement
from rankmap.simulator.network import Network

__all__ = ["PHASES", "KINDS", "CommOp", "PartResult", "PhaseResult", "IterationResult", "job_comm_ops",
           "group_table", "phase_flows", "simulate_phase", "simulate_iteration"]

PHASES = ("dp-gather", "pipeline", "dp-reduce")
KINDS = ("tp", "cp", "ep", "dp", "dp_ep", "pp")
_COORD = {"tp": 0, "cp": 1, "ep": 2, "dp": 3, "pp": 4}


@dataclass(frozen=True, kw_only=True)
class CommOp:
    """``count`` collectives of ``size_bytes`` (nccl-tests' S) per iteration in every group of ``kind``.

    ``op`` is one of :data:`rankmap.simulator.collectives.OPS` or ``"p2p"`` (pipeline hops: ``count``
    messages per stage boundary, half forward and half backward, and ``wrap_count`` on the
    hop from the last stage back to the first, which interleaved schedules use). ``kind``
    ``dp_ep`` is the expert data-parallel group (Megatron-Core: DP without the EP ranks).
    """

    kind: str
    op: str
    size_bytes: float
    count: float
    phase: str
    wrap_count: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.op not in OPS + ("p2p",):
            raise ValueError(f"op must be one of {', '.join(OPS + ('p2p',))}, got {self.op!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {self.phase!r}")
        if not self.size_bytes >= 0 or not self.count >= 0 or not self.wrap_count >= 0:
            raise ValueError(f"size_bytes, count and wrap_count must be >= 0, got {self.size_bytes!r}, "
                             f"{self.count!r}, {self.wrap_count!r}")
        if self.wrap_count and self.op != "p2p":
            raise ValueError(f"wrap_count is for pipeline hops (op 'p2p'), not {self.op!r}")

    @property
    def label(self) -> str:
        return f"{self.kind} {self.op}"


def job_comm_ops(job: JobSpec) -> tuple[CommOp, ...]:
    """The collectives of one iteration of ``job``, from :func:`rankmap.job.traffic.job_traffic`.

    Examples
    --------
    >>> ops = job_comm_ops(JobSpec(tp=8, pp=8, dp=2, num_micro_batches=4))
    >>> [(o.label, o.phase, o.count) for o in ops]  # doctest: +NORMALIZE_WHITESPACE
    [('tp allreduce', 'pipeline', 192), ('pp p2p', 'pipeline', 8), ('dp allgather', 'dp-gather', 1),
     ('dp reducescatter', 'dp-reduce', 1)]
    """
    traffic = job_traffic(job)
    ops: list[CommOp] = []
    tp, cp, ep, pp, dp = (traffic[k] for k in ("tp", "cp", "ep", "pp", "dp"))
    if tp.group_size > 1:
        ops.append(CommOp(kind="tp", op="allreduce", size_bytes=tp.op_bytes, count=tp.ops, phase="pipeline"))
    if cp.group_size > 1:
        # all-gather of K, V forward and reduce-scatter of their gradients backward: same bytes
        ops.append(CommOp(kind="cp", op="allgather", size_bytes=cp.op_bytes, count=cp.ops, phase="pipeline"))
    if ep.group_size > 1 and ep.ops:
        ops.append(CommOp(kind="ep", op="alltoall", size_bytes=ep.op_bytes, count=ep.ops, phase="pipeline"))
    if pp.group_size > 1:
        ops.append(CommOp(kind="pp", op="p2p", size_bytes=pp.op_bytes, count=pp.ops, phase="pipeline",
                          wrap_count=pp.wrap_bytes / pp.op_bytes if pp.op_bytes else 0.0))
    if dp.group_size > 1:
        if job.data_parallel == "zero":
            params = dp.op_bytes / job.grad_bytes                # local parameters P / (tp * pp)
            ops.append(CommOp(kind="dp", op="allgather", size_bytes=params * job.param_bytes, count=1,
                              phase="dp-gather"))
            ops.append(CommOp(kind="dp", op="reducescatter", size_bytes=dp.op_bytes, count=1, phase="dp-reduce"))
        else:
            ops.append(CommOp(kind="dp", op="allreduce", size_bytes=dp.op_bytes, count=1, phase="dp-reduce"))
    return tuple(ops)


def group_table(layout: ParallelLayout, kind: str) -> np.ndarray:
    """``ranks[n_groups, size]`` of one kind; ``dp_ep`` groups ranks equal in tp, cp, ep and pp."""
    if kind != "dp_ep":
        return layout.groups(kind)
    coords = layout.coord_table                                # (W, 5)
    key = coords[:, [_COORD["tp"], _COORD["cp"], _COORD["ep"], _COORD["pp"]]]
    _, group = np.unique(key, axis=0, return_inverse=True)
    order = np.lexsort((np.arange(coords.shape[0]), group.ravel()))
    table = order.reshape(-1, coords.shape[0] // (group.max() + 1))
    return table[np.argsort(table[:, 0], kind="stable")]


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
    """One phase: its time, its parts, and the bytes it put on every link (``link_bytes[L]``)."""

    name: str
    time_s: float
    parts: tuple
    link_bytes: np.ndarray
    n_flows: int
    events: int


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
        table = group_table(layout, kind)
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
                   config: CollectiveConfig, routing: EcmpConfig) -> tuple[PhaseResult, FlowSet, FlowResult] | None:
    """Simulate one phase; None when it carries no traffic. Also returns its flows and raw result."""
    flows, tables = phase_flows(placement, layout, ops, phase, config)
    if flows.n_coflows == 0:
        return None
    result = simulate_flows(network, flows, routing, config.efficiency)
    parts = []
    for i, (label, table) in enumerate(zip(flows.parts, tables)):
        mine = flows.coflow_part == i
        times = np.zeros(table.shape[0])
        np.maximum.at(times, flows.coflow_group[mine], result.finish_s[mine])
        parts.append(PartResult(label, table, times))
    return PhaseResult(phase, result.time_s, tuple(parts), result.link_bytes, flows.n_flows, result.events), \
        flows, result


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
