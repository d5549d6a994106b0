"""Job specs: the parallel layout, model shape, batch and precision of a training job.

Job YAML format (every key optional except the model; defaults shown)::

    name: gpt3-175b
    parallel: {tp: 8, pp: 8, dp: auto, cp: 1, ep: 1, etp: tp, vpp: 1, order: tp-cp-ep-dp-pp}
    model: {preset: gpt3-175b}        # or layers, hidden, heads, seq_len, vocab, params
    batch: {micro_batch_size: 1, num_micro_batches: 8}   # or global_batch_size
    precision: {activation_bytes: 2, param_bytes: 2, grad_bytes: 4}
    data_parallel: zero               # zero (reduce-scatter + all-gather) or allreduce
    sequence_parallel: true
    hardware: {gpu: a100, efficiency_gemm: 0.65, efficiency_elementwise: 0.7,
               recompute: false, optimizer_step_s: auto}
    overlap: {tp: true, dp_gather: true, dp_reduce: true}
    framework: engine                 # or megatron, torchtitan, deepspeed; or {name: megatron, version: "0.12"}

``hardware`` and ``overlap`` drive the iteration-time model (rankmap.simulator.compute,
rankmap.simulator.schedule): GPU preset (a100, h100, h200, b200), achieved fraction of peak
for GEMM/attention and of HBM bandwidth for elementwise kernels, full activation
recomputation, the optimizer step in seconds (auto: from HBM bandwidth); which
communication runs under compute (MegaScale, NSDI'24: TP/SP collectives under the
transformer block, ZeRO's first all-gather under data loading, the gradient
reduce-scatter per model chunk under the backwards left).

``dp: auto`` fills the free GPUs of the cluster the job is planned on.

``framework`` names what will train the job (:data:`FRAMEWORKS`; default ``engine``, rankmap's
own engine on torch.distributed, with its version None meaning the current release); the
rules that differ between frameworks follow it and their messages say whose rule applies
(:func:`interleaved_rule`). ``parallel.etp`` is the expert tensor-parallel size (default tp);
see :mod:`rankmap.job.layout` for how expert groups are built.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rankmap.errors import SpecError
from rankmap.job.frameworks import DEFAULT_FRAMEWORK, FOLDING_SINCE, FRAMEWORKS, interleaved_rule, release
from rankmap.job.generators import DIMS, megatron_check
from rankmap.yamlio import Fields, parse_yaml, read_yaml

__all__ = ["ModelShape", "JobSpec", "Hardware", "GPU_NAMES", "MODEL_PRESETS", "DIMS", "DEFAULT_ORDER",
           "FRAMEWORKS", "DEFAULT_FRAMEWORK", "interleaved_rule", "layout_sizes", "load_job", "parse_job", "job_from_data",
           "job_to_dict", "model_params"]

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
    overlap_tp, overlap_dp_gather, overlap_dp_reduce (bool).
    """

    gpu: str = "a100"
    efficiency_gemm: float = 0.65
    efficiency_elementwise: float = 0.7
    recompute: bool = False
    optimizer_step_s: float | None = None
    overlap_tp: bool = True
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
            _check_batch(job)
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


def _check_batch(job: JobSpec) -> None:
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
    why = interleaved_rule(job.framework, job.pp, job.virtual_stages, job.micro_batches())
    if why:
        raise SpecError(f"{why} (framework: {job.framework}; set framework: to the one that trains the job)",
                        key="batch.num_micro_batches")
    if m is not None and g is not None and g != b * m * job.dp:
        raise SpecError(f"global_batch_size {g} != micro_batch_size*num_micro_batches*dp = {b * m * job.dp}",
                        key="batch.global_batch_size")


def load_job(path: str | Path, overrides: dict | None = None) -> JobSpec:
    """Read a job spec YAML file, then apply ``overrides`` (e.g. ``{"tp": 8}``) on top.

    Raises
    ------
    SpecError
        Unreadable file, unknown key or bad value (FILE:LINE and key in the message).
    """
    return job_from_data(read_yaml(path), str(path), overrides)


def parse_job(text: str, source: str = "<string>", overrides: dict | None = None) -> JobSpec:
    """Parse a job spec from YAML text; see :func:`load_job`."""
    return job_from_data(parse_yaml(text, source), source, overrides)


_PARALLEL_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "order")


def job_from_data(data, source: str, overrides: dict | None = None) -> JobSpec:
    """Build a JobSpec from parsed YAML; ``overrides`` come from the command line."""
    top = Fields(data if data is not None else {}, source).only(
        "name", "parallel", "model", "batch", "precision", "data_parallel", "sequence_parallel", "hardware",
        "overlap", "framework")
    overrides = dict(overrides or {})
    par = top.sub("parallel").only(*_PARALLEL_KEYS)
    values: dict = {}
    for dim in ("tp", "pp", "cp", "ep"):
        values[dim] = par.int(dim, 1, minimum=1)
    values["dp"] = None if par.raw("dp", "auto") == "auto" else par.int("dp", minimum=1)
    values["order"] = par.str("order", DEFAULT_ORDER)
    values["virtual_stages"] = par.int("vpp", 1, minimum=1)
    values["etp"] = par.int("etp", None, minimum=1)
    par.done()
    model_key = overrides.pop("model", None)
    if model_key is not None and model_key not in MODEL_PRESETS:
        raise SpecError(f"unknown model preset {model_key!r} (known: {', '.join(MODEL_PRESETS)})", key="--model")
    model = MODEL_PRESETS[model_key] if model_key else _model(top.sub("model", required=True))
    if model_key:
        top.raw("model", None)
    batch = top.sub("batch").only("micro_batch_size", "num_micro_batches", "global_batch_size")
    prec = top.sub("precision").only("activation_bytes", "param_bytes", "grad_bytes")
    kwargs = dict(
        name=top.name("name", "job name", "job"),
        model=model,
        micro_batch_size=batch.int("micro_batch_size", 1, minimum=1),
        num_micro_batches=batch.int("num_micro_batches", None, minimum=1),
        global_batch_size=batch.int("global_batch_size", None, minimum=1),
        activation_bytes=prec.int("activation_bytes", 2, minimum=1),
        param_bytes=prec.int("param_bytes", 2, minimum=1),
        grad_bytes=prec.int("grad_bytes", 4, minimum=1),
        data_parallel=top.choice("data_parallel", ("zero", "allreduce"), "zero"),
        sequence_parallel=top.bool("sequence_parallel", True),
        hardware=_hardware(top.sub("hardware"), top.sub("overlap")),
        **_framework(top),
        source=source,
        **values,
    )
    if "num_micro_batches" in overrides and "global_batch_size" not in overrides:
        kwargs["global_batch_size"] = None  # the command line's micro-batch count wins
    kwargs.update(overrides)
    job = JobSpec(**kwargs)
    batch.done()
    prec.done()
    top.done()
    _check_shape(job, {"": top, "parallel": par, "batch": batch})
    return job


def _framework(top: Fields) -> dict:
    """``framework: NAME`` or ``framework: {name: NAME, version: "X.Y"}``."""
    raw = top.raw("framework", DEFAULT_FRAMEWORK)
    if isinstance(raw, dict):
        f = top.sub("framework").only("name", "version")
        name = f.choice("name", FRAMEWORKS)
        version = f.raw("version", None)
        if version is not None and not isinstance(version, str):
            raise f.error("version", f"write the version as a string such as \"0.10\" (YAML reads {version!r} "
                                     "as a number)")
        if version is not None and not all(p.isdigit() for p in version.split(".")):
            raise f.error("version", f"expected a release such as \"0.12\", got {version!r}")
        f.done()
        return {"framework": name, "framework_version": None if version is None else str(version)}
    return {"framework": top.choice("framework", FRAMEWORKS, DEFAULT_FRAMEWORK), "framework_version": None}


def _fraction(f: Fields, key: str, default: float) -> float:
    value = f.number(key, default)
    if value > 1:
        raise f.error(key, f"must be a fraction in (0, 1], got {value}")
    return float(value)


def _hardware(hw: Fields, ov: Fields) -> Hardware:
    hw.only("gpu", "efficiency_gemm", "efficiency_elementwise", "recompute", "optimizer_step_s")
    ov.only("tp", "dp_gather", "dp_reduce")
    step = hw.raw("optimizer_step_s", "auto")
    d = Hardware()                             # defaults for keys the file leaves out
    got = Hardware(gpu=hw.choice("gpu", GPU_NAMES, d.gpu),
                   efficiency_gemm=_fraction(hw, "efficiency_gemm", d.efficiency_gemm),
                   efficiency_elementwise=_fraction(hw, "efficiency_elementwise", d.efficiency_elementwise),
                   recompute=hw.bool("recompute", d.recompute),
                   optimizer_step_s=None if step == "auto" else float(hw.number("optimizer_step_s", positive=False)),
                   overlap_tp=ov.bool("tp", d.overlap_tp), overlap_dp_gather=ov.bool("dp_gather", d.overlap_dp_gather),
                   overlap_dp_reduce=ov.bool("dp_reduce", d.overlap_dp_reduce))
    if got.optimizer_step_s is not None and got.optimizer_step_s < 0:
        raise hw.error("optimizer_step_s", f"must be >= 0 or auto, got {got.optimizer_step_s}")
    hw.done()
    ov.done()
    return got


def _hardware_dict(hw: Hardware) -> dict:
    """``{"hardware": ..., "overlap": ...}`` in the YAML layout; empty when every setting is the default."""
    if hw == Hardware():
        return {}
    return {"hardware": {"gpu": hw.gpu, "efficiency_gemm": hw.efficiency_gemm,
                         "efficiency_elementwise": hw.efficiency_elementwise, "recompute": hw.recompute,
                         "optimizer_step_s": "auto" if hw.optimizer_step_s is None else hw.optimizer_step_s},
            "overlap": {"tp": hw.overlap_tp, "dp_gather": hw.overlap_dp_gather, "dp_reduce": hw.overlap_dp_reduce}}


def _model(f: Fields) -> ModelShape:
    if f.has("preset"):
        f.only("preset")
        name = f.choice("preset", tuple(MODEL_PRESETS))
        return MODEL_PRESETS[name]
    f.only("layers", "hidden", "heads", "seq_len", "vocab", "params", "experts", "top_k")
    shape = ModelShape(layers=f.int("layers", minimum=1), hidden=f.int("hidden", minimum=1),
                       heads=f.int("heads", minimum=1), seq_len=f.int("seq_len", minimum=1),
                       vocab=f.int("vocab", 50257, minimum=1), params=f.int("params", 0, minimum=0),
                       experts=f.int("experts", 0, minimum=0), top_k=f.int("top_k", 2, minimum=1))
    f.done()
    return shape


def _check_shape(job: JobSpec, fields: dict[str, Fields]) -> None:
    par = fields["parallel"]
    if job.order != "auto":  # "auto": the planner picks the order
        dims = job.order.split("-")
        if sorted(set(dims)) != sorted(dims) or not set(dims) <= set(DIMS):
            raise par.error("order", f"order {job.order!r} must list distinct dims from {'-'.join(DIMS)}, or be auto")
        for dim in DIMS:
            if dim not in dims and (getattr(job, dim) or 1) != 1:
                raise par.error("order", f"order {job.order!r} lacks {dim!r} but {dim}={getattr(job, dim)}")
    _check_model(job, par)
    _check_magnitude(job, fields)
    if job.dp is not None:
        try:
            _check_batch(job)
        except SpecError as exc:
            section, _, where = (exc.key or "batch").rpartition(".")
            sub = fields.get(section, fields[""])
            raise SpecError(exc.message, source=par.source, line=sub.line_of(where), key=exc.key) from None


#: Largest traffic volume one iteration may move for one group, in bytes (2**45, 32 TiB): counts of
#: up to 2**18 ranks times it still fit the int64 arithmetic of the planner and simulator.
MAX_VOLUME_BYTES = 2**45


def _check_magnitude(job: JobSpec, fields: dict[str, Fields]) -> None:
    """Refuse shapes whose gradient or activation volume would overflow int64 downstream."""
    grads = job.model.params * max(job.param_bytes, job.grad_bytes)
    if grads > MAX_VOLUME_BYTES:
        raise fields[""].error("model", f"{job.model.params} parameters of {max(job.param_bytes, job.grad_bytes)} "
                                        f"bytes is over {MAX_VOLUME_BYTES} bytes of gradients")
    m = job.num_micro_batches or job.global_batch_size or 1
    acts = job.micro_batch_size * job.model.seq_len * job.model.hidden * job.activation_bytes * m
    if acts > MAX_VOLUME_BYTES:
        raise fields["batch"].error("micro_batch_size", f"activations of {acts} bytes per iteration "
                                                        f"(over {MAX_VOLUME_BYTES})")


def _check_model(job: JobSpec, par: Fields) -> None:
    model = job.model
    if model.layers % job.pp:
        raise par.error("pp", f"pp={job.pp} must divide the model's {model.layers} layers")
    if model.layers % (job.pp * job.virtual_stages):
        raise par.error("vpp", f"pp*vpp = {job.pp * job.virtual_stages} must divide the model's {model.layers} layers")
    if model.heads % job.tp:
        raise par.error("tp", f"tp={job.tp} must divide the model's {model.heads} attention heads")
    if model.hidden % model.heads:
        raise par.error("tp", f"the model's hidden size {model.hidden} is not a multiple of its {model.heads} heads")
    if job.ep > 1 and (model.experts == 0 or model.experts % job.ep):
        raise par.error("ep", f"ep={job.ep} needs a mixture-of-experts model whose expert count it divides "
                              f"(model.experts = {model.experts})")
    if model.seq_len % job.cp:
        raise par.error("cp", f"cp={job.cp} must divide the sequence length {model.seq_len}")


def job_to_dict(job: JobSpec) -> dict:
    """The job as a plain dict in the YAML spec's layout (for rank maps and reports)."""
    keys = ("layers", "hidden", "heads", "seq_len", "vocab", "params") + (("experts", "top_k") if job.model.experts else ())
    model = {k: getattr(job.model, k) for k in keys}
    batch = {"micro_batch_size": job.micro_batch_size}
    if job.num_micro_batches is not None:
        batch["num_micro_batches"] = job.num_micro_batches
    if job.global_batch_size is not None:
        batch["global_batch_size"] = job.global_batch_size
    return {
        "name": job.name,
        "parallel": {"tp": job.tp, "pp": job.pp, "dp": job.dp if job.dp is not None else "auto",
                     "cp": job.cp, "ep": job.ep, "vpp": job.virtual_stages, "order": job.order,
                     **({"etp": job.etp} if job.etp is not None else {})},
        "model": model,
        "batch": batch,
        "precision": {"activation_bytes": job.activation_bytes, "param_bytes": job.param_bytes,
                      "grad_bytes": job.grad_bytes},
        "data_parallel": job.data_parallel,
        "sequence_parallel": job.sequence_parallel,
        **_hardware_dict(job.hardware),
        **_framework_dict(job),
    }


def _framework_dict(job: JobSpec) -> dict:
    """``{"framework": ...}`` in the YAML layout; empty for the default (keeps older outputs identical)."""
    if job.framework == DEFAULT_FRAMEWORK and job.framework_version is None:
        return {}
    if job.framework_version is None:
        return {"framework": job.framework}
    return {"framework": {"name": job.framework, "version": job.framework_version}}
