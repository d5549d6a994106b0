"""What a run trains, resolved from the config and the rank map's job (no torch).

The rank map decides tp, pp, dp, vpp and the batch; the config may override the batch and
vpp and decides the model (its own shape, or the map's with ``model: rankmap``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rankmap.engine.config import BYTE_VOCAB, EngineConfig, ModelConfig
from rankmap.errors import EngineError
from rankmap.job.spec import JobSpec

__all__ = ["RunSpec", "resolve_run"]


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Sizes and batch of one run; ``rows`` sequences of ``seq_len`` tokens per iteration."""

    model: ModelConfig
    tp: int
    pp: int
    dp: int
    vpp: int
    micro_batch_size: int
    micro_batches: int

    @property
    def seq_len(self) -> int:
        return self.model.seq_len

    @property
    def rows(self) -> int:
        """Sequences per iteration: ``dp * micro_batch_size * micro_batches``."""
        return self.dp * self.micro_batch_size * self.micro_batches

    @property
    def tokens_per_step(self) -> int:
        return self.rows * self.seq_len


def resolve_run(cfg: EngineConfig, job: JobSpec) -> RunSpec:
    """Combine the config with the rank map's job.

    Raises
    ------
    EngineError
        cp or ep > 1 (the model has neither), or a model that does not divide into the layout.

    Examples
    --------
    >>> spec = resolve_run(EngineConfig(), JobSpec(tp=2, pp=2, dp=2, num_micro_batches=4))
    >>> spec.rows, spec.tokens_per_step, spec.vpp
    (8, 512, 1)
    """
    if job.cp > 1 or job.ep > 1:
        raise EngineError(f"the engine's model has no context or expert parallelism (cp={job.cp}, ep={job.ep}); "
                          f"plan the job with cp=1 and ep=1 to train it here")
    if cfg.model_from_rankmap:
        m = job.model
        model = ModelConfig(layers=m.layers, hidden=m.hidden, heads=m.heads, seq_len=m.seq_len, vocab=BYTE_VOCAB)
    else:
        model = cfg.model
    vpp = cfg.parallel.virtual_stages or job.virtual_stages
    if model.layers is None or model.heads is None:  # fit the plan: multiples of pp*vpp and of tp, >= 4
        n = job.pp * vpp
        model = dataclasses.replace(model, layers=model.layers or -(-4 // n) * n, heads=model.heads or job.tp * -(-4 // job.tp))
    spec = RunSpec(model=model, tp=job.tp, pp=job.pp, dp=job.dp, vpp=vpp,
                   micro_batch_size=cfg.train.micro_batch_size or job.micro_batch_size,
                   micro_batches=cfg.train.micro_batches or job.micro_batches())
    if model.layers % (spec.pp * vpp):
        raise EngineError(f"model.layers ({model.layers}) must be divisible by pp*vpp = {spec.pp * vpp}")
    if cfg.parallel.data_parallel == "ddp" and spec.tp > 1:
        raise EngineError(f"parallel.data_parallel: ddp composes with pipeline parallelism only; with tp={spec.tp} "
                          f"use fsdp (DDP's tensor-parallel support re-creates parameters every forward)")
    sp = cfg.parallel.sequence_parallel and spec.tp > 1
    if model.heads % spec.tp or model.vocab % spec.tp or (sp and model.seq_len % spec.tp):
        raise EngineError(f"tp={spec.tp} must divide model.heads ({model.heads}), the vocabulary ({model.vocab}) "
                          f"and, with sequence parallelism, model.seq_len ({model.seq_len})")
    return spec
