"""The same model, batches and optimiser in one process, without any parallelism.

The distributed run must match it: the first step's loss is a forward pass over the same
weights and tokens (equal to float rounding), and later steps match while the gradients,
their clipping and AdamW agree. Used by the tests and ``benchmarks/engine.py``.
"""

from __future__ import annotations

import torch

from rankmap.engine.config import EngineConfig
from rankmap.engine.data import Corpus, global_batch, load_corpus
from rankmap.engine.model import GPT
from rankmap.engine.optim import lr_at
from rankmap.engine.parallel import lm_loss
from rankmap.engine.runspec import RunSpec

__all__ = ["reference_losses"]


def reference_losses(cfg: EngineConfig, spec: RunSpec, steps: int, corpus: Corpus | None = None) -> list[float]:
    """Mean loss (nats per byte) of each of ``steps`` iterations, trained in this process.

    Each iteration runs the ``dp * micro_batches`` micro-batches of ``micro_batch_size`` rows of
    the distributed run's global batch, accumulates ``loss / count`` gradients, clips with
    ``torch.nn.utils.clip_grad_norm_`` and steps AdamW -- what every DP rank and pipeline stage
    does together.
    """
    tc = cfg.train
    corpus = corpus or load_corpus(cfg.data)
    torch.manual_seed(tc.seed)
    model = GPT(spec.model)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, betas=(tc.beta1, tc.beta2), weight_decay=tc.weight_decay,
                            foreach=False)
    out = []
    for step in range(1, steps + 1):
        batch = torch.from_numpy(global_batch(corpus, step, tc.seed, spec.rows, spec.seq_len))  # (rows, T+1)
        xs = batch[:, :-1].split(spec.micro_batch_size)  # each (b, T)
        ys = batch[:, 1:].split(spec.micro_batch_size)
        total = 0.0
        for x, y in zip(xs, ys):
            loss = lm_loss(model(x), y)
            (loss / len(xs)).backward()
            total += float(loss.detach())
        if tc.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, tc)
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.append(total / len(xs))
    return out
