"""Job specs: the parallel layout, model shape, batch and precision of a training job.

The typed job (:class:`JobSpec`, :class:`ModelShape`, :class:`Hardware`), the model presets and
the checks that need a resolved ``dp``. The YAML file that describes a job, and its reader and
writer, live in :mod:`rankmap.job.spec_file`.

``framework`` names what will train the job (:data:`FRAMEWORKS`; default ``engine``, rankmap's
own engine on torch.distributed, with its version None meaning the current release); the
rules that differ between frameworks follow it and their messages say whose rule applies
(:func:`interleaved_rule`). ``etp`` is the expert tensor-parallel size (default tp);
see :mod:`rankmap.job.layout` for how expert groups are built.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from rankmap.errors import SpecError
from rankmap.job.frameworks import (
    DEFAULT_FRAMEWORK,
    FOLDING_SINCE,
    FRAMEWORKS,
    interleaved_rule,
    release,
    virtual_stages_rule,
)
from rankmap.job.generators import DIMS, megatron_check

__all__ = ["ModelShape", "JobSpec", "Hardware", "GPU_NAMES", "MODEL_PRESETS", "DIMS", "DEFAULT_ORDER",
           "FRAMEWORKS", "DEFAULT_FRAMEWORK", "interleaved_rule", "layout_sizes", "model_params", "check_batch"]

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
GPU_NAMES = ("a100", "h100", "h200", "b200")   # presets of rankmap.simulator.compute.GPUS
def model_params(layers: int, hidden: int, vocab: int, seq_len: int) -> int:
    """Parameters of a GPT-style decoder, from its shape.

    ``P = 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h))`` -- Narayanan et al., "Efficient
    Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21, §5.1.

    Examples
    --------
    >>> round(model_params(96, 12288, 50257, 2048) / 1e9, 1)   # GPT-3 175B
    174.6
    """
    l, h = layers, hidden
    return round(12 * l * h * h * (1 + 13 / (12 * h) + (vocab + seq_len) / (12 * l * h)))


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """Transformer shape. ``params`` is derived with :func:`model_params` unless given.

    Attributes: layers, hidden (h), heads, seq_len (s), vocab (V), params (P), all counts;
    ``experts`` (0 = dense) and ``top_k`` (experts per token) for mixture-of-experts models.
    """

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int = 50257
    params: int = 0
    experts: int = 0
    top_k: int = 2

    def __post_init__(self) -> None:
        if self.params == 0:
            object.__setattr__(self, "params", model_params(self.layers, self.hidden, self.vocab, self.seq_len))


# GPT-3 shapes: Brown et al. 2020, Table 2.1. Llama 2: Touvron et al. 2023, Table 1 and
# the released configs (70B: 80 layers, h 8192, 64 heads, 4096 context, 32000 vocab).
MODEL_PRESETS: dict[str, ModelShape] = {
    "gpt3-175b": ModelShape(layers=96, hidden=12288, heads=96, seq_len=2048),
    # Table 2.1 lists d_model 5140 with 40 heads of 128: 40 x 128 = 5120, which Megatron needs.
    "gpt3-13b": ModelShape(layers=40, hidden=5120, heads=40, seq_len=2048),
    "gpt3-6.7b": ModelShape(layers=32, hidden=4096, heads=32, seq_len=2048),
    "gpt3-1.3b": ModelShape(layers=24, hidden=2048, heads=16, seq_len=2048),
    "llama2-70b": ModelShape(layers=80, hidden=8192, heads=64, seq_len=4096, vocab=32000,
                             params=68_976_648_192),
}


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """Settings of the iteration-time model (defaults documented in the module docstring).

    Attributes: gpu (one of :data:`GPU_NAMES`), efficiency_gemm and efficiency_elementwise
    (fractions in (0, 1]), recompute (bool), optimizer_step_s (seconds, None = derived),
    data_loading_s (seconds before the first forward beside which the first parameter
    all-gather runs, MegaScale NSDI'24 §3.2; 0 by default),
    overlap_tp, overlap_cp, overlap_ep, overlap_dp_gather, overlap_dp_reduce (bool): which
    communication runs under compute (:class:`rankmap.simulator.schedule.OverlapConfig`).
    """

    gpu: str = "a100"
    efficiency_gemm: float = 0.65
    efficiency_elementwise: float = 0.7
    recompute: bool = False
    optimizer_step_s: float | None = None
    data_loading_s: float = 0.0
    overlap_tp: bool = True
    overlap_cp: bool = True
    overlap_ep: bool = False
    overlap_dp_gather: bool = True
    overlap_dp_reduce: bool = True


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A 3D-parallel (plus CP/EP) training job.

    Attributes
    ----------
    name : str
    tp, pp, cp, ep : int
        Tensor, pipeline, context and expert parallel sizes.
    dp : int or None
        Data-parallel size (dense); None means "fill the free GPUs" until resolved.
        Expert groups come from their own rank generator (Megatron-Core >= 0.10 parallel
        folding): ``etp * ep * pp`` divides the world size; ``ep`` need not divide ``dp``.
    order : str
        Megatron-style order of rank dimensions, fastest-varying first, or "auto" (the
        planner picks the order that moves the fewest bytes across ToR groups).
    model : ModelShape
    micro_batch_size : int
        Sequences per micro-batch (b).
    num_micro_batches : int or None
        Micro-batches per pipeline per iteration (m).
    global_batch_size : int or None
        Sequences per iteration; ``= b * m * dp``.
    activation_bytes, param_bytes, grad_bytes : int
        Bytes per element of activations, parameters and reduced gradients.
    data_parallel : str
        "zero" (reduce-scatter of gradients + all-gather of parameters) or "allreduce".
    sequence_parallel : bool
        Megatron sequence parallelism: pipeline sends carry 1/tp of an activation per rank.
    virtual_stages : int
        Model chunks per pipeline rank (``parallel.vpp``; interleaved 1F1B when > 1).
    hardware : Hardware
        GPU, kernel efficiencies, recomputation and overlaps of the iteration-time model.
    framework : str
        What trains the job, one of :data:`FRAMEWORKS` (default ``engine``).
    framework_version : str or None
        Its release ("0.12"); None: the current one.
    etp : int or None
        Expert tensor-parallel size (Megatron-Core ``expert_tensor_parallel_size``); None: tp.
    """

    name: str = "job"
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    cp: int = 1
    ep: int = 1
    order: str = DEFAULT_ORDER
    model: ModelShape = field(default_factory=lambda: MODEL_PRESETS["gpt3-175b"])
    micro_batch_size: int = 1
    num_micro_batches: int | None = None
    global_batch_size: int | None = None
    activation_bytes: int = 2
    param_bytes: int = 2
    grad_bytes: int = 4
    data_parallel: str = "zero"
    sequence_parallel: bool = True
    virtual_stages: int = 1
    hardware: Hardware = field(default_factory=Hardware)
    framework: str = DEFAULT_FRAMEWORK
    framework_version: str | None = None
    etp: int | None = None
    source: str = field(default="<inline>", compare=False)
    # Keys the caller set on top of the file (e.g. ``{"parallel.dp": "--dp"}``): errors about them
    # name the flag, not the file (see rankmap.api.load_job).
    set_by: dict = field(default_factory=dict, compare=False)

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: ``tp * cp * pp``."""
        return self.tp * self.cp * self.pp

    @property
    def world_size(self) -> int:
        """``tp * cp * dp * pp`` (expert groups fold over the same ranks); requires a resolved dp."""
        if self.dp is None:
            raise ValueError("dp is not resolved")
        return self.model_parallel * self.dp

    def sizes(self) -> dict[str, int]:
        """``{dim: size}`` for tp, cp, ep, dp, pp (dp must be resolved)."""
        return {"tp": self.tp, "cp": self.cp, "ep": self.ep, "dp": self.world_size // self.model_parallel,
                "pp": self.pp}

    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration (m)."""
        if self.num_micro_batches is not None:
            return self.num_micro_batches
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    def resolved(self, free_gpus: int) -> "JobSpec":
        """The job with ``dp`` fixed (``auto`` fills ``free_gpus``) and batch sizes checked.

        Raises
        ------
        SpecError
            Too few GPUs for one replica, a global batch that dp does not divide, ...
        """
        dp = self.dp
        if dp is None:
            dp = free_gpus // self.model_parallel
            per = None if self.global_batch_size is None else self.global_batch_size // self.micro_batch_size
            while dp > 0 and (self.tp * self.cp * dp % ((self.etp or self.tp) * self.ep) or (per and per % dp)):
                dp -= 1
            if dp <= 0:
                raise SpecError(f"one model replica needs tp*cp*pp*ep = {self.model_parallel * self.ep} GPUs, "
                                f"only {free_gpus} are free", source=self.source, key="parallel.dp")
        elif dp * self.model_parallel > free_gpus:
            raise SpecError(f"the job needs {dp * self.model_parallel} GPUs (tp*cp*pp*dp), "
                            f"only {free_gpus} are free", source=self.source, key="parallel.dp")
        job = dataclasses.replace(self, dp=dp)
        if job.order != "auto":
            missing = [d for d in DIMS if d not in job.order.split("-") and job.sizes()[d] != 1]
            if missing:
                raise SpecError(f"order {job.order!r} lacks {', '.join(missing)} (dp resolved to {dp})",
                                source=self.source, key="parallel.order")
        try:
            check_batch(job)
        except SpecError as exc:
            raise SpecError(exc.message, source=self.source, key=exc.key) from None
        return job




def layout_sizes(job: JobSpec) -> dict:
    """The job's sizes as :class:`~rankmap.job.layout.ParallelLayout` reads them: ``job.sizes()``,
    plus ``etp`` when given and ``ep_in_dp`` for a Megatron-Core target before 0.10 (whose
    expert groups carve EP out of DP instead of folding; see :mod:`rankmap.job.generators`).

    Examples
    --------
    >>> job = JobSpec(tp=2, dp=4, ep=2, num_micro_batches=1, framework="megatron", framework_version="0.9")
    >>> layout_sizes(job)["ep_in_dp"], "ep_in_dp" in layout_sizes(JobSpec(tp=2, dp=4, num_micro_batches=1))
    (True, False)
    """
    sizes = job.sizes()
    if job.etp is not None:
        sizes["etp"] = job.etp
    version = release(job.framework_version)
    if job.framework == "megatron" and version is not None and version < FOLDING_SINCE:
        sizes["ep_in_dp"] = True
    return sizes


def check_batch(job: JobSpec) -> None:
    """Check the batch, expert and interleaving rules of a job whose ``dp`` is resolved.

    Raises
    ------
    SpecError
        With the key (``batch.global_batch_size``, ``parallel.ep``, ...) but no source: callers
        add the file and line they know.
    """
    b, m, g = job.micro_batch_size, job.num_micro_batches, job.global_batch_size
    etp = job.etp or job.tp
    if job.world_size % (etp * job.ep * job.pp) and not layout_sizes(job).get("ep_in_dp"):
        raise SpecError(f"expert tp*ep*pp = {etp}*{job.ep}*{job.pp} must divide the {job.world_size} ranks "
                        f"(tp*cp*dp*pp; Megatron-Core builds expert groups over the same ranks)", key="parallel.ep")
    if job.order != "auto" and (job.ep > 1 or etp != job.tp):
        why = megatron_check(layout_sizes(job), job.order)
        if why:
            raise SpecError(f"Megatron-Core's initialize_model_parallel refuses this layout: {why}",
                            key="parallel.order")
    if m is None and g is None:
        raise SpecError("give batch.num_micro_batches or batch.global_batch_size", key="batch")
    if g is not None and g % (b * job.dp):
        raise SpecError(f"global_batch_size {g} is not a multiple of micro_batch_size*dp = {b * job.dp}",
                        key="batch.global_batch_size")
    why = virtual_stages_rule(job.framework, job.pp, job.virtual_stages)
    if why:
        raise SpecError(why, key="parallel.vpp")
    why = interleaved_rule(job.framework, job.pp, job.virtual_stages, job.micro_batches())
    if why:
        raise SpecError(f"{why} (framework: {job.framework}; set framework: to the one that trains the job)",
                        key="batch.num_micro_batches")
    if m is not None and g is not None and g != b * m * job.dp:
        raise SpecError(f"global_batch_size {g} != micro_batch_size*num_micro_batches*dp = {b * m * job.dp}",
                        key="batch.global_batch_size")
