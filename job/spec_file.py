"""The job spec YAML file: reading it into a :class:`~rankmap.job.spec.JobSpec` and writing one back.

Job YAML format (every key optional except the model; defaults shown)::

    name: gpt3-175b
    parallel: {tp: 8, pp: 8, dp: auto, cp: 1, ep: 1, etp: tp, vpp: 1, order: tp-cp-ep-dp-pp}
    model: {preset: gpt3-175b}        # or layers, hidden, heads, seq_len, vocab, params
    batch: {micro_batch_size: 1, num_micro_batches: 8}   # or global_batch_size
    precision: {activation_bytes: 2, param_bytes: 2, grad_bytes: 4}
    data_parallel: zero               # zero (reduce-scatter + all-gather) or allreduce
    sequence_parallel: true
    hardware: {gpu: a100, efficiency_gemm: 0.65, efficiency_elementwise: 0.7,
               recompute: false, optimizer_step_s: auto, data_loading_s: 0}
    overlap: {tp: true, cp: true, ep: false, dp_gather: true, dp_reduce: true}
    framework: engine                 # or megatron, torchtitan, deepspeed; or {name: megatron, version: "0.12"}

``hardware`` and ``overlap`` drive the iteration-time model (rankmap.simulator.compute,
rankmap.simulator.schedule): GPU preset (a100, h100, h200, b200), achieved fraction of peak
for GEMM/attention and of HBM bandwidth for elementwise kernels, full activation
recomputation, the optimizer step in seconds (auto: from HBM bandwidth); which
communication runs under compute (MegaScale, NSDI'24: TP/SP collectives under the
transformer block, ZeRO's first all-gather under data loading, the gradient
reduce-scatter per model chunk under the backwards left; CP's ring-attention P2P under
attention compute; EP's all-to-all only when set, as Megatron-Core's opt-in
``--overlap-moe-expert-parallel-comm``).

``dp: auto`` fills the free GPUs of the cluster the job is planned on.

``framework`` names what will train the job (:data:`FRAMEWORKS`; default ``engine``, rankmap's
own engine on torch.distributed, with its version None meaning the current release); the
rules that differ between frameworks follow it and their messages say whose rule applies
(:func:`interleaved_rule`). ``parallel.etp`` is the expert tensor-parallel size (default tp);
see :mod:`rankmap.job.layout` for how expert groups are built.
"""

from __future__ import annotations

from pathlib import Path

from rankmap.errors import SpecError
from rankmap.job.frameworks import DEFAULT_FRAMEWORK, FRAMEWORKS, layout_rule, virtual_stages_rule
from rankmap.job.generators import DIMS
from rankmap.job.spec import DEFAULT_ORDER, GPU_NAMES, MODEL_PRESETS, Hardware, JobSpec, ModelShape, check_batch
from rankmap.yamlio import Fields, parse_yaml, read_yaml

__all__ = ["load_job", "parse_job", "job_from_data", "job_to_dict", "MAX_VOLUME_BYTES"]


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
    hw.only("gpu", "efficiency_gemm", "efficiency_elementwise", "recompute", "optimizer_step_s", "data_loading_s")
    ov.only("tp", "cp", "ep", "dp_gather", "dp_reduce")
    step = hw.raw("optimizer_step_s", "auto")
    d = Hardware()                             # defaults for keys the file leaves out
    got = Hardware(gpu=hw.choice("gpu", GPU_NAMES, d.gpu),
                   efficiency_gemm=_fraction(hw, "efficiency_gemm", d.efficiency_gemm),
                   efficiency_elementwise=_fraction(hw, "efficiency_elementwise", d.efficiency_elementwise),
                   recompute=hw.bool("recompute", d.recompute),
                   data_loading_s=float(hw.number("data_loading_s", d.data_loading_s, positive=False)),
                   optimizer_step_s=None if step == "auto" else float(hw.number("optimizer_step_s", positive=False)),
                   overlap_tp=ov.bool("tp", d.overlap_tp), overlap_cp=ov.bool("cp", d.overlap_cp),
                   overlap_ep=ov.bool("ep", d.overlap_ep), overlap_dp_gather=ov.bool("dp_gather", d.overlap_dp_gather),
                   overlap_dp_reduce=ov.bool("dp_reduce", d.overlap_dp_reduce))
    if got.optimizer_step_s is not None and got.optimizer_step_s < 0:
        raise hw.error("optimizer_step_s", f"must be >= 0 or auto, got {got.optimizer_step_s}")
    if got.data_loading_s < 0:
        raise hw.error("data_loading_s", f"must be >= 0 seconds, got {got.data_loading_s}")
    hw.done()
    ov.done()
    return got


def _hardware_dict(hw: Hardware) -> dict:
    """``{"hardware": ..., "overlap": ...}`` in the YAML layout; empty when every setting is the default."""
    if hw == Hardware():
        return {}
    return {"hardware": {"gpu": hw.gpu, "efficiency_gemm": hw.efficiency_gemm,
                         "efficiency_elementwise": hw.efficiency_elementwise, "recompute": hw.recompute,
                         "optimizer_step_s": "auto" if hw.optimizer_step_s is None else hw.optimizer_step_s,
                         "data_loading_s": hw.data_loading_s},
            "overlap": {"tp": hw.overlap_tp, "cp": hw.overlap_cp, "ep": hw.overlap_ep, "dp_gather": hw.overlap_dp_gather, "dp_reduce": hw.overlap_dp_reduce}}


def _model(f: Fields) -> ModelShape:
    shape_keys = ("layers", "hidden", "heads", "seq_len", "vocab", "params", "experts", "top_k")
    if f.has("preset"):
        extra = [k for k in f.data if k != "preset"]
        if extra and extra[0] in shape_keys:  # model: {preset: gpt3-13b, layers: 41}
            raise f.error(extra[0], f"a preset fixes the whole shape, so preset and {extra[0]} cannot be combined: "
                                    f"give the preset alone, or the shape keys ({', '.join(shape_keys[:4])}, ...) "
                                    f"without it")
        f.only("preset")
        name = f.choice("preset", tuple(MODEL_PRESETS))
        return MODEL_PRESETS[name]
    f.only(*shape_keys)
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
            check_batch(job)
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


def _check_framework(job: JobSpec, par: Fields) -> None:
    """The job's framework can build its groups (:func:`rankmap.job.frameworks.layout_rule`): its
    order, CP/EP and interleaving, refused here (plan time) rather than by ``launch --flags``.
    With dp auto, refused only when no dp (1 or more) would pass."""
    sizes = {"tp": job.tp, "cp": job.cp, "ep": job.ep, "pp": job.pp}
    rules = [layout_rule(job.framework, {**sizes, "dp": dp}, job.order, job.virtual_stages)
             for dp in ((job.dp,) if job.dp is not None else (2, 1))]
    if all(rules):
        key, why = rules[0]
        raise par.error(key, f"{why} (framework: {job.framework})")


def _check_model(job: JobSpec, par: Fields) -> None:
    model = job.model
    if model.layers % job.pp:
        raise par.error("pp", f"pp={job.pp} must divide the model's {model.layers} layers")
    why = virtual_stages_rule(job.framework, job.pp, job.virtual_stages)
    if why:
        raise par.error("vpp", why)
    if model.layers % (job.pp * job.virtual_stages):
        raise par.error("vpp", f"pp*vpp = {job.pp * job.virtual_stages} must divide the model's {model.layers} layers")
    _check_framework(job, par)
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
