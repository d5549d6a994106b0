"""What the pipeline schedule (:mod:`rankmap.simulator.schedule`) places: which communication
may run under compute (:class:`OverlapConfig`) and the seconds of every pass and collective
(:class:`PipelineCosts`, per stage ``[p]``).

The overlaps are MegaScale's (Jiang et al., "MegaScale: Scaling Large Language Model Training
to More Than 10,000 GPUs", NSDI'24, §3.2) and Megatron-LM's switches
(megatron/core/distributed/distributed_data_parallel.py, megatron/training/arguments.py).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OverlapConfig", "PipelineCosts"]


@dataclass(frozen=True, kw_only=True)
class OverlapConfig:
    """Which communication runs under compute (MegaScale, NSDI'24, §3.2; see
    :mod:`rankmap.simulator.schedule`); all on by default."""

    tp: bool = True
    dp_gather: bool = True
    dp_reduce: bool = True
    #: CP's KV exchange under attention compute: ring attention sends the next KV block while
    #: the current one is attended (Liu et al., "Ring Attention", arXiv 2310.01889, §3; Megatron-
    #: Core's TransformerEngine context parallel, ``cp_comm_type: p2p``), so on by default.
    cp: bool = True
    #: EP's dispatch/combine all-to-all under compute. A MoE layer's all-to-all sits on its data
    #: path (the experts wait for the tokens), so it hides only under another micro-batch's
    #: compute, which Megatron-Core does only when asked: ``--overlap-moe-expert-parallel-comm``
    #: (with ``--delay-wgrad-compute``, megatron/training/arguments.py). Off by default.
    ep: bool = False
    #: Megatron-Core's bucketing and dispatch (``framework: megatron``) instead of MegaScale's:
    #: only the first stage's first chunk is cut into buckets (``disable_bucketing`` or
    #: ``pp_rank > 0`` in megatron/core/distributed/distributed_data_parallel.py: "data-parallel
    #: communication on these stages is not on the critical path"), and without interleaving a
    #: stage's parameter all-gather is dispatched only in its first forward pre-hook
    #: (``align_param_gather`` is off for the non-interleaved schedule, megatron/training/arguments.py).
    megatron_core: bool = False


@dataclass(frozen=True, kw_only=True)
class PipelineCosts:
    """Seconds of everything the schedule places; arrays are per stage ``[p]``.

    Attributes
    ----------
    forward_s, backward_s : sequence of float
        ``[p]`` compute of one micro-batch through one chunk.
    comm_forward_s, comm_backward_s : sequence of float
        ``[p]`` collectives of that pass that may run under its compute (TP, and CP/EP
        whose overlap is on: :func:`rankmap.simulator.timing.pipeline_costs` sorts them).
    serial_forward_s, serial_backward_s : sequence of float
        ``[p]`` collectives of that pass that never run under its compute (CP/EP whose
        overlap is off); empty means none.
    p2p_s, wrap_s : float
        One pipeline message between neighbouring stages; last stage to first (interleaved).
    dp_gather_s : float
        The iteration's parameter all-gather, all chunks (``dp_gather_s / v`` each).
    data_loading_s : float
        Loading the iteration's batch before the first forward (seconds, inside the
        iteration), beside which the first chunk's all-gather runs (MegaScale §3.2); 0: the
        batch is ready (prefetched by the data loader) and the gather runs under the first
        forward.
    dp_reduce_s : float or sequence of float
        The gradient reduction of one stage: the same for every stage, or ``[p]`` each
        stage's own (its DP groups in the network from when its backward ends,
        :mod:`rankmap.simulator.staging`).
    reduce_buckets : int
        Gradient buckets per chunk (Megatron-LM: ``max(4e7, 1e6 * dp)`` parameters each).
    logit_forward_s, logit_backward_s : float
        The logit layer's compute, in the last chunk of the last stage only.
    optimizer_s : float
    m, v : int
        Micro-batches per iteration and model chunks per stage.
    """

    forward_s: tuple
    backward_s: tuple
    comm_forward_s: tuple
    comm_backward_s: tuple
    serial_forward_s: tuple = ()
    serial_backward_s: tuple = ()
    p2p_s: float = 0.0
    wrap_s: float = 0.0
    dp_gather_s: float = 0.0
    data_loading_s: float = 0.0
    dp_reduce_s: float | tuple = 0.0
    reduce_buckets: int = 1
    logit_forward_s: float = 0.0
    logit_backward_s: float = 0.0
    optimizer_s: float = 0.0
    m: int = 1
    v: int = 1

    @property
    def p(self) -> int:
        return len(self.forward_s)
