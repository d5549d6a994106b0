"""engine.yaml and the run it resolves to, with the rank map's job (no torch)."""

from __future__ import annotations

import pytest

from rankmap.engine.config import EngineConfig, ModelConfig, load_config
from rankmap.engine.runspec import resolve_run
from rankmap.errors import EngineError, SpecError
from rankmap.job.spec import JobSpec, ModelShape


def test_defaults_and_values(engine_yaml):
    cfg = load_config(engine_yaml("model: {layers: 8, heads: 8}\ntrain: {steps: 3, lr: 0.01, seed: 7}\n"
                                  "parallel: {schedule: gpipe, data_parallel: ddp, launcher_order: rerank}\n"))
    assert (cfg.model.layers, cfg.model.heads, cfg.model.head_dim) == (8, 8, 8)
    assert (cfg.train.steps, cfg.train.lr, cfg.train.seed) == (3, 0.01, 7)
    assert (cfg.parallel.schedule, cfg.parallel.data_parallel, cfg.parallel.launcher_order) == ("gpipe", "ddp", "rerank")
    assert load_config(None) == EngineConfig()
    # the process group's timeout outlasts the progress watchdog by default, so hangs are recorded
    assert cfg.init_timeout_s >= cfg.diagnostics.hang_timeout_s + 30 == 270
    assert load_config(engine_yaml("diagnostics: {hang_timeout_s: 0}\ninit_timeout_s: 5\n")).init_timeout_s == 5
    assert cfg.with_steps(0).train.steps == 0 and cfg.with_steps(0).train.lr == 0.01


@pytest.mark.parametrize("text, message", [
    ("model: {heads: 3}\n", "engine.yaml:1: model.heads: heads (3) must divide hidden (64)"),
    ("train:\n  steps: 2\n  lrr: 0.1\n", "engine.yaml:3: train.lrr: unknown key 'lrr'"),
    ("parallel:\n  schedule: zigzag\n", "engine.yaml:2: parallel.schedule: parallel.schedule must be one of"),
    ("train: {lr: -1}\n", "engine.yaml:1: train.lr: must be positive, got -1"),
    ("model: {layers: two}\n", "engine.yaml:1: model.layers: expected an integer, got 'two'"),
    ("modle: {layers: 2}\n", "engine.yaml:1: modle: unknown key 'modle'"),
    ("model: {hidden: 12, heads: 4}\n", "head dimension hidden/heads = 3 must be even"),
    ("diagnostics: {hang_timeout_s: 300}\n", "engine.yaml:1: init_timeout_s: the process-group timeout init_timeout_s "
                                             "(300 s) must be at least diagnostics.hang_timeout_s (300 s) + 30 s"),
    ("diagnostics: {hang_timeout_s: 10}\ninit_timeout_s: 39\n", "engine.yaml:2: init_timeout_s: the process-group"),
    ("diagnostics: {stall_rank: 1, stall_step: 2, stall_mode: nap}\n", "stall_mode must be one of collective, "
                                                                        "compute, freeze, got 'nap'"),
    ("diagnostics: {inject_phase: recv}\n", "inject_phase must be one of forward, backward, optimizer, send"),
])
def test_bad_config_names_file_line_and_key(engine_yaml, text, message):
    with pytest.raises(SpecError) as err:
        load_config(engine_yaml(text))
    assert message in str(err.value)


def _job(**kw):
    base = dict(tp=2, pp=2, dp=2, num_micro_batches=4, model=ModelShape(layers=4, hidden=64, heads=4, seq_len=64))
    return JobSpec(**{**base, **kw})


def test_default_model_fits_the_plan():
    spec = resolve_run(EngineConfig(), _job(pp=3, tp=8, dp=1))
    assert (spec.model.layers, spec.model.heads) == (6, 8)
    spec = resolve_run(EngineConfig(), _job(pp=2, tp=1, dp=1, virtual_stages=2))
    assert (spec.model.layers, spec.model.heads) == (4, 4)


def test_run_takes_sizes_and_batch_from_the_map_and_model_from_the_config(engine_yaml):
    spec = resolve_run(load_config(engine_yaml("model: {layers: 8}\n")), _job(virtual_stages=2))
    assert (spec.tp, spec.pp, spec.dp, spec.vpp, spec.micro_batches, spec.rows) == (2, 2, 2, 2, 4, 8)
    assert spec.tokens_per_step == 8 * 64 and spec.model.layers == 8
    from_map = resolve_run(load_config(engine_yaml("model: rankmap\n")), _job())
    assert from_map.model == ModelConfig(layers=4, hidden=64, heads=4, seq_len=64)
    batch = resolve_run(load_config(engine_yaml("train: {micro_batch_size: 2, micro_batches: 8}\n")), _job())
    assert batch.rows == 2 * 8 * 2


@pytest.mark.parametrize("job, text, message", [
    (_job(pp=3), "model: {layers: 4}\n", "model.layers (4) must be divisible by pp*vpp = 3"),
    (_job(tp=8, dp=1), "model: {heads: 4}\n", "tp=8 must divide model.heads (4)"),
    (_job(cp=2, dp=2), "", "no context or expert parallelism (cp=2, ep=1)"),
    (_job(), "parallel: {data_parallel: ddp}\n", "ddp composes with pipeline parallelism only; with tp=2 use fsdp"),
])
def test_layouts_the_engine_cannot_run_are_refused(engine_yaml, job, text, message):
    with pytest.raises(EngineError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        resolve_run(load_config(engine_yaml(text or "{}\n")), job)
