"""One training iteration's communication: the one description both consumers derive from.

:func:`iteration_comm` lists the collectives a job's ranks issue in one iteration, as
:class:`CommOp` records -- which collective, in which kind of group
(:data:`rankmap.job.layout.GROUP_KINDS`), nccl-tests' message size ``S`` in bytes, how
many per iteration, in which phase of the schedule -- with the size of each kind's groups.
The planner's edge bytes (:func:`rankmap.job.traffic.job_traffic`) and the simulator's
operations (:func:`rankmap.simulator.iteration.job_comm_ops`) are both computed from it.

Accounting per micro-batch of ``b`` sequences of length ``s``, hidden size ``h``, ``a``
bytes per activation element, ``m`` micro-batches per iteration, ``L / pp`` layers per
stage (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", SC'21, §3; sequence parallelism: Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", MLSys 2023):

- TP (+SP): per layer and micro-batch, 4 all-reduce-sized collectives of
  ``S = b * (s/cp) * h * a`` (2 forward, 2 backward; with sequence parallelism each
  all-reduce is an all-gather + reduce-scatter pair moving the same bytes).
- CP: per layer and micro-batch, an all-gather of K and V forward and a reduce-scatter of
  their gradients backward, ``S = 2 * b * s * (h/tp) * a`` (Megatron-Core context
  parallelism). Both move ``(n-1)/n * S`` per rank on the same ring, so they are one
  all-gather of ``2 * L/pp * m`` per iteration here.
- EP: per layer and micro-batch, 4 all-to-alls (dispatch and combine, forward and
  backward) of ``S = b * (s/(cp*tp)) * h * a * top_k`` per rank.
- PP: per stage boundary and micro-batch, ``b*(s/cp)*h*a`` forward and the same backward
  (``1/tp`` of it per rank with sequence parallelism). With ``v`` model chunks per rank
  (interleaved 1F1B) a micro-batch passes the pipeline ``v`` times: each boundary
  carries ``v`` times as much and the hop from the last stage back to the first ``v - 1``
  times (Narayanan et al. SC'21, §2.2.2).
- DP (gradients reduced over DP x CP): ZeRO/FSDP-style reduce-scatter of the gradients
  and all-gather of the parameters of the local ``P/(tp*pp)`` parameters
  (Rajbhandari et al., "ZeRO", SC'20; MegaScale, NSDI'24, §3.2), or one all-reduce of
  the gradients.

Phases (:data:`PHASES`): ``dp-gather`` (ZeRO's parameter all-gather before the forward
passes), ``pipeline`` (the micro-batches' passes, with TP/CP/EP collectives and pipeline
send/recv), ``dp-reduce`` (the gradient reduction after the last backward).

Bytes a rank sends per collective are nccl-tests' ``busbw / algbw`` factor times ``S``
(NVIDIA/nccl-tests, doc/PERFORMANCE.md): all-reduce ``2(n-1)/n``, all-gather,
reduce-scatter and all-to-all ``(n-1)/n``, send/recv 1. Recomputation, embedding
imbalance and optimizer-state traffic are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from rankmap.job.layout import GROUP_KINDS, kind_size
from rankmap.job.spec import JobSpec

__all__ = ["COLLECTIVES", "P2P", "PHASES", "PATTERNS", "bus_factor", "CommOp", "IterationComm",
           "iteration_comm"]

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")
P2P = "p2p"                         # pipeline hops between neighbouring stages
PHASES = ("dp-gather", "pipeline", "dp-reduce")
# Which rank pairs exchange bytes: ring r_i -> r_(i+1 mod n), chain r_i <-> r_(i+1), every ordered pair.
PATTERNS = {"allreduce": "ring", "allgather": "ring", "reducescatter": "ring", "sendrecv": "ring",
            "alltoall": "all-to-all", P2P: "chain"}


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``op`` on ``n`` ranks: bytes a rank sends per byte of ``S``.

    Raises
    ------
    ValueError
        ``op`` is not one of :data:`COLLECTIVES`.

    Examples
    --------
    >>> bus_factor("allreduce", 4), bus_factor("allgather", 4), bus_factor("sendrecv", 4)
    (1.5, 0.75, 1.0)

    References
    ----------
    NVIDIA nccl-tests, doc/PERFORMANCE.md ("Bus bandwidth").
    """
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    if op == "sendrecv":
        return 1.0
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(COLLECTIVES)})")


@dataclass(frozen=True, kw_only=True)
class CommOp:
    """``count`` collectives of ``size_bytes`` (nccl-tests' S) per iteration in every group of ``kind``.

    Attributes
    ----------
    kind : str
        Group kind, one of :data:`rankmap.job.layout.GROUP_KINDS` (``dp_ep``: expert data parallel).
    op : str
        One of :data:`COLLECTIVES`, or ``"p2p"``: pipeline hops, ``count`` messages per stage
        boundary (half forward, half backward).
    size_bytes : float
        Message size S, bytes.
    count : float
        Collectives (or messages per boundary) per iteration.
    phase : str
        One of :data:`PHASES`.
    wrap_count : float
        ``p2p`` only: messages on the hop from the last stage back to the first
        (interleaved schedules), else 0.

    Raises
    ------
    ValueError
        Unknown kind, op or phase, a negative number, or ``wrap_count`` on a collective.
    """

    kind: str
    op: str
    size_bytes: float
    count: float
    phase: str
    wrap_count: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in GROUP_KINDS:
            raise ValueError(f"kind must be one of {', '.join(GROUP_KINDS)}, got {self.kind!r}")
        if self.op not in COLLECTIVES + (P2P,):
            raise ValueError(f"op must be one of {', '.join(COLLECTIVES + (P2P,))}, got {self.op!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {self.phase!r}")
        if not self.size_bytes >= 0 or not self.count >= 0 or not self.wrap_count >= 0:
            raise ValueError(f"size_bytes, count and wrap_count must be >= 0, got {self.size_bytes!r}, "
                             f"{self.count!r}, {self.wrap_count!r}")
        if self.wrap_count and self.op != P2P:
            raise ValueError(f"wrap_count is for pipeline hops (op 'p2p'), not {self.op!r}")

    @property
    def label(self) -> str:
        """``"<kind> <op>"``, e.g. ``"dp reducescatter"``."""
        return f"{self.kind} {self.op}"

    @property
    def pattern(self) -> str:
        """``"ring"``, ``"chain"`` or ``"all-to-all"`` (:data:`PATTERNS`)."""
        return PATTERNS[self.op]

    def rank_bytes(self, n: int) -> float:
        """Bytes one rank sends per iteration in a group of ``n`` (interior stage for ``p2p``; 0 if n < 2)."""
        if n < 2:
            return 0
        if self.op == P2P:
            return self.size_bytes * self.count
        return bus_factor(self.op, n) * self.size_bytes * self.count


@dataclass(frozen=True)
class IterationComm:
    """A job's communication in one iteration.

    Attributes
    ----------
    group_sizes : dict of str to int
        Ranks per group of each kind the ops use.
    ops : tuple of CommOp
        Every collective the accounting lists, kinds of size 1 included (they move no bytes).
    """

    group_sizes: dict
    ops: tuple

    def kinds(self) -> list[str]:
        """Kinds in the order their first op appears."""
        return list(dict.fromkeys(o.kind for o in self.ops))

    def of_kind(self, kind: str) -> tuple:
        """The ops of one kind, in order."""
        return tuple(o for o in self.ops if o.kind == kind)

    def network_ops(self) -> tuple:
        """The ops that put bytes on links: groups of two or more ranks, ``count > 0``."""
        return tuple(o for o in self.ops if self.group_sizes[o.kind] > 1 and o.count > 0)


def iteration_comm(job: JobSpec) -> IterationComm:
    """The communication of one iteration of a resolved job (see the module docstring).

    Raises
    ------
    ValueError
        ``job.dp`` is not resolved.

    Examples
    --------
    >>> comm = iteration_comm(JobSpec(tp=8, pp=8, dp=2, num_micro_batches=4))
    >>> [(o.label, o.phase, o.count) for o in comm.network_ops()]  # doctest: +NORMALIZE_WHITESPACE
    [('tp allreduce', 'pipeline', 192), ('pp p2p', 'pipeline', 8), ('dp allgather', 'dp-gather', 1),
     ('dp reducescatter', 'dp-reduce', 1)]
    """
    if job.dp is None:
        raise ValueError("iteration_comm needs a resolved dp")
    model = job.model
    b, s, h, a = job.micro_batch_size, model.seq_len, model.hidden, job.activation_bytes
    m, v = job.micro_batches(), job.virtual_stages
    per_stage = model.layers // job.pp * m              # layer passes of one stage per iteration
    tp, cp, ep = job.tp, job.cp, job.ep
    act = b * (s // cp) * h * a // (tp if job.sequence_parallel else 1)   # one pipeline message
    ops = [
        CommOp(kind="tp", op="allreduce", size_bytes=b * (s // cp) * h * a, count=4 * per_stage, phase="pipeline"),
        CommOp(kind="cp", op="allgather", size_bytes=2 * b * s * (h // tp) * a, count=2 * per_stage,
               phase="pipeline"),
        CommOp(kind="ep", op="alltoall", size_bytes=b * (s // (cp * tp)) * h * a * model.top_k,
               count=4 * per_stage if ep > 1 else 0, phase="pipeline"),
        CommOp(kind="pp", op=P2P, size_bytes=act, count=2 * m * v, phase="pipeline", wrap_count=2 * m * (v - 1)),
    ]
    local_params = model.params / (tp * job.pp)        # P / (tp * pp), elements
    if job.data_parallel == "zero":
        ops += [CommOp(kind="dp", op="allgather", size_bytes=local_params * job.param_bytes, count=1,
                       phase="dp-gather"),
                CommOp(kind="dp", op="reducescatter", size_bytes=local_params * job.grad_bytes, count=1,
                       phase="dp-reduce")]
    else:
        ops.append(CommOp(kind="dp", op="allreduce", size_bytes=local_params * job.grad_bytes, count=1,
                          phase="dp-reduce"))
    sizes = job.sizes()
    return IterationComm({kind: kind_size(sizes, kind) for kind in ("tp", "cp", "ep", "pp", "dp")}, tuple(ops))
