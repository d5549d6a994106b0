"""The model, the text and the single-process reference, in this process (torch, no processes)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the engine's model needs PyTorch (pip install torch==2.13.0)")

from rankmap.engine.config import DataConfig, EngineConfig, ModelConfig
from rankmap.engine.data import global_batch, load_corpus
from rankmap.engine.model import GPT, apply_rope, rope_tables
from rankmap.engine.parallel import split_stage, stage_layers
from rankmap.engine.reference import reference_losses
from rankmap.engine.runspec import RunSpec

torch.set_num_threads(1)


def test_same_seed_same_weights_and_logits_shape():
    cfg = ModelConfig(layers=2, hidden=32, heads=4, seq_len=16)
    torch.manual_seed(3)
    a = GPT(cfg)
    torch.manual_seed(3)
    b = GPT(cfg)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    x = torch.randint(0, 256, (2, 16))
    assert a(x).shape == (2, 16, 256)


def test_rope_is_a_rotation_that_depends_on_relative_position():
    cos, sin = rope_tables(8, 4, 10000.0, "cpu", torch.float64)
    q = torch.randn(1, 8, 1, 4, dtype=torch.float64)
    k = torch.randn(1, 8, 1, 4, dtype=torch.float64)
    rq, rk = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1))
    # Same vectors at positions (2, 5) and (3, 6): same dot product after rotation.
    q2 = q.clone()
    q2[0, 3], k[0, 6] = q[0, 2], k[0, 5]
    rq2, rk2 = apply_rope(q2, cos, sin), apply_rope(k, cos, sin)
    assert torch.isclose((rq2[0, 3] * rk2[0, 6]).sum(), (rq[0, 2] * rk[0, 5]).sum())


def test_pipeline_stages_keep_the_full_models_names_and_compose_to_it():
    cfg = ModelConfig(layers=4, hidden=32, heads=4, seq_len=16)
    torch.manual_seed(0)
    full = GPT(cfg)
    stages = [split_stage(full, s, 4) for s in range(4)]
    assert list(stage_layers(8, 4, 3)) == [6, 7]
    assert list(stages[2].layers.keys()) == ["2"] and stages[2].tok_emb is None and stages[3].head is not None
    names = [n for st in stages for n, _ in st.named_parameters()]
    assert sorted(names) == sorted(n for n, _ in full.named_parameters())
    x = torch.randint(0, 256, (2, 16))
    h = x
    for st in stages:
        h = st(h)
    assert torch.allclose(h, full(x), atol=1e-6)


def test_text_is_real_and_batches_are_seeded():
    corpus = load_corpus(DataConfig(max_bytes=200_000))
    assert corpus.files >= 1 and corpus.tokens.shape[0] <= 200_000 and len(corpus.sha256) == 64
    text = bytes(corpus.tokens[:20_000]).decode("utf-8", errors="replace")
    assert text.count("\n") > 100 and any(w in text for w in ("def ", "import ", "Python"))
    a = global_batch(corpus, 5, 0, rows=4, seq_len=32)
    assert a.shape == (4, 33) and np.array_equal(a, global_batch(corpus, 5, 0, rows=4, seq_len=32))
    assert not np.array_equal(a, global_batch(corpus, 6, 0, rows=4, seq_len=32))
    assert not np.array_equal(a, global_batch(corpus, 5, 1, rows=4, seq_len=32))


def test_single_process_reference_learns_and_starts_near_uniform():
    cfg = EngineConfig(data=DataConfig(max_bytes=200_000))
    spec = RunSpec(model=ModelConfig(layers=2, hidden=32, heads=2, seq_len=32), tp=1, pp=1, dp=2, vpp=1,
                   micro_batch_size=2, micro_batches=2)
    losses = reference_losses(cfg, spec, 8)
    assert abs(losses[0] - np.log(256)) < 0.1  # small init: close to the uniform byte distribution
    assert losses[-1] < losses[0] - 0.5
