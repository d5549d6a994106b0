"""Typed configuration of an engine run (``engine.yaml``), validated when it is built.

The rank map decides the parallel sizes (tp, pp, dp), the virtual stages and the batch
(micro-batch size, micro-batches per iteration); the config decides everything else. Every
key is optional; the defaults train a tiny model that runs on CPUs in seconds::

    model: {layers: null, hidden: 64, heads: null, seq_len: 64}  # null: fit the plan (see ModelConfig);
                                                                 # "model: rankmap": the map's shape
    parallel:
      schedule: auto            # auto (interleaved-1f1b when vpp > 1, else 1f1b), 1f1b, gpipe,
                                # interleaved-1f1b
      virtual_stages: null      # null: the rank map's vpp
      data_parallel: fsdp       # fsdp (FSDP2 fully_shard) or ddp
      sequence_parallel: true   # Megatron-style sequence parallelism with tp > 1
      launcher_order: error     # error: stop when the launcher numbered ranks unlike the map;
                                # rerank: take each rank from the map by (host, local rank)
    train: {steps: 20, lr: 0.003, warmup_steps: 0, weight_decay: 0.0, grad_clip: 1.0, seed: 0,
            micro_batch_size: null, micro_batches: null}    # null: the rank map's batch
    data: {root: null, max_bytes: 4000000}                  # null: this Python's standard library
    checkpoint: {dir: null, every: 0, resume: true}
    diagnostics: {timing: true, hang_timeout_s: 240,       # per-rank records; progress watchdog (0: off)
                  inject_rank: null, inject_phase: null, inject_delay_s: 0,   # fault drills: a slow phase
                                                           # (forward, backward, optimizer) or link (send),
                  stall_rank: null, stall_step: null, stall_mode: collective} # or a stalled rank:
                                                           # blocked in its next collective, stuck
                                                           # in compute (compute), frozen (freeze)
    init_timeout_s: 300         # the process group's timeout: at least hang_timeout_s + 30

``train.steps: 0`` runs the start-up checks only (placement report, no training).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rankmap.errors import SpecError
from rankmap.yamlio import Fields, read_yaml

__all__ = ["ModelConfig", "ParallelConfig", "TrainConfig", "DataConfig", "CheckpointConfig", "DiagnosticsConfig",
           "EngineConfig",
           "load_config", "config_from_data", "SCHEDULES", "STALL_MODES", "WATCHDOG_MARGIN_S", "BYTE_VOCAB"]

SCHEDULES = ("auto", "1f1b", "gpipe", "interleaved-1f1b")
STALL_MODES = ("collective", "compute", "freeze")
# The process group's timeout must leave the watchdog time to write its records (its poll,
# the dumps and GRACE_S of rankmap.engine.timing) before gloo aborts the waits.
WATCHDOG_MARGIN_S = 30.0
BYTE_VOCAB = 256  # byte-level tokens: one per byte value


def _check(ok: bool, key: str, message: str) -> None:
    """Raise SpecError naming the dotted ``key`` unless ``ok``."""
    if not ok:
        raise SpecError(message, key=key)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape of the GPT model (counts; ``vocab`` is the byte vocabulary, 256).

    ``hidden / heads`` is the head dimension, which rotary embeddings need even. ``layers`` and
    ``heads`` left as None fit the plan (:func:`rankmap.engine.runspec.resolve_run`): the fewest layers
    >= 4 that pp*vpp divides, and the fewest heads >= 4 that tp divides.
    """

    layers: int | None = None
    hidden: int = 64
    heads: int | None = None
    seq_len: int = 64
    vocab: int = BYTE_VOCAB
    mlp_ratio: int = 4
    rope_base: float = 10000.0
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "seq_len", "vocab", "mlp_ratio"):
            value = getattr(self, key)
            _check(value is None or value >= 1, f"model.{key}", f"must be >= 1, got {value}")
        if self.heads is not None:
            _check(self.hidden % self.heads == 0, "model.heads",
                   f"heads ({self.heads}) must divide hidden ({self.hidden})")
            _check((self.hidden // self.heads) % 2 == 0, "model.heads",
                   f"the head dimension hidden/heads = {self.hidden // self.heads} must be even (rotary embeddings)")
        _check(self.rope_base > 1 and self.init_std > 0, "model", "model.rope_base must be > 1 and model.init_std > 0")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """How the rank map's tp/pp/dp are realised (see the module docstring)."""

    schedule: str = "auto"
    virtual_stages: int | None = None
    data_parallel: str = "fsdp"
    sequence_parallel: bool = True
    launcher_order: str = "error"

    def __post_init__(self) -> None:
        _check(self.schedule in SCHEDULES, "parallel.schedule", f"parallel.schedule must be one of {', '.join(SCHEDULES)}, "
                                           f"got {self.schedule!r}")
        _check(self.virtual_stages is None or self.virtual_stages >= 1, "parallel.virtual_stages", "parallel.virtual_stages must be >= 1")
        _check(self.data_parallel in ("fsdp", "ddp"), "parallel.data_parallel", f"parallel.data_parallel must be fsdp or ddp, "
                                                      f"got {self.data_parallel!r}")
        _check(self.launcher_order in ("error", "rerank"), "parallel.launcher_order", f"parallel.launcher_order must be error or rerank, "
                                                           f"got {self.launcher_order!r}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation: AdamW with linear warm-up, global-norm clipping; ``lr`` per step."""

    steps: int = 20
    lr: float = 3e-3
    warmup_steps: int = 0
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    seed: int = 0
    micro_batch_size: int | None = None
    micro_batches: int | None = None

    def __post_init__(self) -> None:
        _check(self.steps >= 0 and self.warmup_steps >= 0, "train.steps", "train.steps and train.warmup_steps must be >= 0")
        _check(self.lr > 0 and self.weight_decay >= 0, "train.lr", "train.lr must be > 0 and train.weight_decay >= 0")
        _check(0 <= self.beta1 < 1 and 0 <= self.beta2 < 1, "train.beta1", "train.beta1 and train.beta2 must be in [0, 1)")
        _check(self.grad_clip >= 0, "train.grad_clip", "train.grad_clip must be >= 0 (0: no clipping)")
        for key in ("micro_batch_size", "micro_batches"):
            value = getattr(self, key)
            _check(value is None or value >= 1, f"train.{key}", f"must be >= 1, got {value}")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the text comes from: ``root`` (None: this Python's standard library), files ending
    in one of ``suffixes``, read in sorted path order until ``max_bytes``."""

    root: str | None = None
    suffixes: tuple = (".py", ".txt", ".rst")
    max_bytes: int = 4_000_000

    def __post_init__(self) -> None:
        _check(self.max_bytes >= 4096, "data.max_bytes", f"data.max_bytes must be >= 4096, got {self.max_bytes}")
        _check(bool(self.suffixes), "data.suffixes", "data.suffixes must not be empty")


@dataclass(frozen=True, kw_only=True)
class CheckpointConfig:
    """Save every ``every`` steps (0: only at the end when ``dir`` is set) into ``dir``;
    ``resume`` continues from its latest checkpoint."""

    dir: str | None = None
    every: int = 0
    resume: bool = True

    def __post_init__(self) -> None:
        _check(self.every >= 0, "checkpoint.every", f"checkpoint.every must be >= 0, got {self.every}")


@dataclass(frozen=True, kw_only=True)
class DiagnosticsConfig:
    """Timing and the progress watchdog (:mod:`rankmap.engine.timing`), plus fault drills: spin
    ``inject_delay_s`` inside ``inject_phase`` of ``inject_rank`` (a compute phase, or ``send``:
    each P2P send), or have ``stall_rank`` stall at ``stall_step`` (``stall_mode``: ``collective``
    enters its next collective -- not a P2P send or receive -- and never completes it, so the
    group's other members block in it too; ``compute`` spins in its forward pass; ``freeze``
    stops the process with SIGSTOP before its next collective or P2P operation)."""

    timing: bool = True
    hang_timeout_s: float = 240.0
    inject_rank: int | None = None
    inject_phase: str | None = None
    inject_delay_s: float = 0.0
    stall_rank: int | None = None
    stall_step: int | None = None
    stall_mode: str = "collective"

    def __post_init__(self) -> None:
        from rankmap.diagnose.records import COMPUTE
        _check(self.hang_timeout_s >= 0, "diagnostics.hang_timeout_s", "hang_timeout_s must be >= 0")
        _check(self.inject_phase is None or self.inject_phase in COMPUTE + ("send",), "diagnostics.inject_phase",
               f"inject_phase must be one of {', '.join(COMPUTE + ('send',))}, got {self.inject_phase!r}")
        _check((self.stall_rank is None) == (self.stall_step is None), "diagnostics.stall_step",
               "stall_rank and stall_step go together")
        _check(self.stall_mode in STALL_MODES, "diagnostics.stall_mode",
               f"stall_mode must be one of {', '.join(STALL_MODES)}, got {self.stall_mode!r}")


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """One engine run. ``model_from_rankmap``: use the rank map job's model shape."""

    model: ModelConfig = field(default_factory=ModelConfig)
    model_from_rankmap: bool = False
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    init_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        _check(self.init_timeout_s > 0, "init_timeout_s", "init_timeout_s must be > 0")
        d = self.diagnostics
        _check(not (d.timing and d.hang_timeout_s) or self.init_timeout_s >= d.hang_timeout_s + WATCHDOG_MARGIN_S,
               "init_timeout_s", f"the process-group timeout init_timeout_s ({self.init_timeout_s:g} s) must be at "
               f"least diagnostics.hang_timeout_s ({d.hang_timeout_s:g} s) + {WATCHDOG_MARGIN_S:g} s, so a hang is "
               f"recorded before the process group aborts")

    def with_steps(self, steps: int) -> "EngineConfig":
        """The config with ``train.steps`` replaced (``--steps`` on the command line)."""
        return dataclasses.replace(self, train=dataclasses.replace(self.train, steps=steps))


_SECTIONS = {
    "model": (ModelConfig, {"layers": "int?", "hidden": "int", "heads": "int?", "seq_len": "int", "mlp_ratio": "int",
                            "rope_base": "number", "init_std": "number"}),
    "parallel": (ParallelConfig, {"schedule": "str", "virtual_stages": "int?", "data_parallel": "str",
                                  "sequence_parallel": "bool", "launcher_order": "str"}),
    "train": (TrainConfig, {"steps": "int", "lr": "number", "warmup_steps": "int", "weight_decay": "number0",
                            "beta1": "number0", "beta2": "number0", "grad_clip": "number0", "seed": "int",
                            "micro_batch_size": "int?", "micro_batches": "int?"}),
    "data": (DataConfig, {"root": "str?", "suffixes": "strs", "max_bytes": "int"}),
    "checkpoint": (CheckpointConfig, {"dir": "str?", "every": "int", "resume": "bool"}),
    "diagnostics": (DiagnosticsConfig, {"timing": "bool", "hang_timeout_s": "number0", "inject_rank": "int?",
                                        "inject_phase": "str?", "inject_delay_s": "number0", "stall_rank": "int?",
                                        "stall_step": "int?", "stall_mode": "str"}),
}


def load_config(path: str | Path | None) -> EngineConfig:
    """Read ``engine.yaml`` (None: the defaults).

    Raises
    ------
    SpecError
        ``FILE:LINE: key: what is wrong`` for an unknown key or a bad value.
    """
    if path is None:
        return EngineConfig()
    return config_from_data(read_yaml(path), str(path))


def config_from_data(data, source: str) -> EngineConfig:
    """Build an :class:`EngineConfig` from parsed YAML (see :func:`load_config`).

    Examples
    --------
    >>> from rankmap.yamlio import parse_yaml
    >>> cfg = config_from_data(parse_yaml("train: {steps: 3}\\nparallel: {schedule: gpipe}\\n"), "e.yaml")
    >>> cfg.train.steps, cfg.parallel.schedule, cfg.model.hidden
    (3, 'gpipe', 64)
    """
    top = Fields(data if data is not None else {}, source).only(*_SECTIONS, "init_timeout_s")
    kwargs: dict = {}
    if top.raw("model", None) == "rankmap":
        kwargs["model_from_rankmap"] = True
    for name, (cls, keys) in _SECTIONS.items():
        if name in kwargs or (name == "model" and kwargs.get("model_from_rankmap")):
            continue
        sub = top.sub(name).only(*keys)
        values = {key: _value(sub, key, kind) for key, kind in keys.items() if sub.has(key)}
        sub.done()
        try:
            kwargs[name] = cls(**values)
        except SpecError as exc:
            key = (exc.key or "").rpartition(".")[2]
            raise SpecError(exc.message, source=source, line=sub.line_of(key) if sub.has(key) else sub.line,
                            key=exc.key) from None
    if top.has("init_timeout_s"):
        kwargs["init_timeout_s"] = top.number("init_timeout_s")
    top.done()
    try:
        return EngineConfig(**kwargs)
    except SpecError as exc:
        line = top.line_of("init_timeout_s") if top.has("init_timeout_s") else top.line
        raise SpecError(exc.message, source=source, line=line, key=exc.key) from None


def _value(f: Fields, key: str, kind: str):
    if kind.endswith("?") and f.raw(key) is None:
        return None
    kind = kind.rstrip("?")
    if kind == "int":
        return f.int(key, minimum=0)
    if kind == "number":
        return float(f.number(key))
    if kind == "number0":
        return float(f.number(key, positive=False))
    if kind == "bool":
        return f.bool(key)
    if kind == "strs":
        items = f.seq(key)
        if not items or not all(isinstance(s, str) and s for s in items):
            raise f.error(key, f"expected a list of non-empty strings, got {items!r}")
        return tuple(items)
    return f.str(key)
