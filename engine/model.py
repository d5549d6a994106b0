"""A small GPT: byte tokens, pre-norm decoder blocks with rotary attention, a linear head.

Written so that tensor and pipeline parallelism can be applied from outside:

- the attention reshapes with ``view(B, T, -1, head_dim)``, so a rank holding ``heads / tp``
  heads after a column-wise split of ``wq``/``wk``/``wv`` works unchanged;
- blocks live in an ``nn.ModuleDict`` keyed by layer index, so a pipeline stage deletes the
  layers it does not run and keeps the others' names (checkpoints stay stage-independent);
- ``tok_emb``, ``norm`` and ``head`` may be None (stages without the first or last layer).

Positions are encoded with rotary embeddings (Su et al., "RoFormer: Enhanced Transformer with
Rotary Position Embedding", 2021), applied inside the attention, so sequence-parallel shards
of the residual stream need no position table. Weights are initialised N(0, init_std), the
residual output projections with ``init_std / sqrt(2 * layers)`` (Radford et al., GPT-2, 2019).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rankmap.engine.config import ModelConfig

__all__ = ["GPT", "Block", "Attention", "MLP", "rope_tables", "apply_rope"]


def rope_tables(seq_len: int, head_dim: int, base: float, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary cos/sin tables, each ``(T, head_dim / 2)``: angle ``t * base^(-2i / head_dim)``."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim)  # (D/2,)
    angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float64), inv_freq)  # (T, D/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (first half, second half) of the head dimension of ``x`` (B, T, H, D)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (B, T, H, D/2) each
    c, s = cos[None, :, None, :], sin[None, :, None, :]  # (1, T, 1, D/2)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


class Attention(nn.Module):
    """Causal multi-head self-attention with rotary positions; no biases."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c = cfg.hidden
        self.head_dim = cfg.head_dim
        self.rope_base = cfg.rope_base
        self.wq = nn.Linear(c, c, bias=False)
        self.wk = nn.Linear(c, c, bias=False)
        self.wv = nn.Linear(c, c, bias=False)
        self.wo = nn.Linear(c, c, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (B, T, C)
        q = self.wq(x).view(b, t, -1, self.head_dim)  # (B, T, H, D): H = heads / tp under TP
        k = self.wk(x).view(b, t, -1, self.head_dim)
        v = self.wv(x).view(b, t, -1, self.head_dim)
        cos, sin = rope_tables(t, self.head_dim, self.rope_base, x.device, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)  # (B, H, T, D)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))  # (B, T, C)


class MLP(nn.Module):
    """``w_out(gelu(w_in(x)))``, hidden width ``mlp_ratio * C``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w_in = nn.Linear(cfg.hidden, cfg.mlp_ratio * cfg.hidden, bias=False)
        self.w_out = nn.Linear(cfg.mlp_ratio * cfg.hidden, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_out(F.gelu(self.w_in(x)))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


class Block(nn.Module):
    """Pre-norm decoder block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = nn.LayerNorm(cfg.hidden)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))  # (B, T, C)
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    """Decoder-only language model over ``cfg.vocab`` byte tokens.

    ``forward`` maps tokens ``(B, T)`` to logits ``(B, T, V)``; a pipeline stage without
    ``tok_emb`` takes hidden states ``(B, T, C)``, one without ``head`` returns them.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb: nn.Module | None = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.layers)})
        self.norm: nn.Module | None = nn.LayerNorm(cfg.hidden)
        self.head: nn.Module | None = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise in a fixed order, so one seed gives the same weights on every rank."""
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith("norm.bias"):
                p.zero_()
            elif name.endswith(("wo.weight", "w_out.weight")):
                p.normal_(0.0, std / math.sqrt(2 * self.cfg.layers))
            else:
                p.normal_(0.0, std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok_emb(x) if self.tok_emb is not None else x  # (B, T) -> (B, T, C)
        for block in self.layers.values():
            h = block(h)
        if self.norm is not None:
            h = self.norm(h)
        return self.head(h) if self.head is not None else h  # (B, T, V)
