"""One training iteration on one rank: forward/backward over the micro-batches, clip, update.

With pp > 1 the pipeline schedule runs the micro-batches (first stages feed tokens, last stages
take targets and collect per-micro-batch losses; ``scale_grads`` divides gradients by the
micro-batch count). With pp = 1 the micro-batches run in a plain loop, each loss divided by
the count, the data-parallel all-reduce held back until the last one under DDP. Either way the
gradient is that of the mean loss over the iteration's tokens, which a single process computes
from the same batch (:mod:`rankmap.engine.reference`).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from rankmap.engine.data import dp_rows
from rankmap.engine.optim import clip_grad_norm, set_lr
from rankmap.engine.parallel import ModelParts, lm_loss

__all__ = ["train_step", "split_batch"]


def split_batch(batch: np.ndarray, dp_rank: int, dp: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """This DP rank's inputs and targets, each ``(micro_batch_size * micro_batches, T)`` int64."""
    rows = torch.from_numpy(dp_rows(batch, dp_rank, dp)).to(device)  # (b*m, T+1)
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def _local_losses(parts: ModelParts, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    lay = parts.layout
    if parts.schedule is not None:
        losses: list = []
        kwargs = {"target": y, "losses": losses} if parts.has_last else {}
        if parts.has_first:
            parts.schedule.step(x, **kwargs)
        else:
            parts.schedule.step(**kwargs)
        return [loss.detach() for loss in losses]
    module = parts.modules[0]
    out = []
    xs, ys = x.split(lay.micro_batch_size), y.split(lay.micro_batch_size)  # m x (b, T)
    for i, (xi, yi) in enumerate(zip(xs, ys)):
        last = i == len(xs) - 1
        ctx = module.no_sync() if isinstance(module, DistributedDataParallel) and not last else contextlib.nullcontext()
        with ctx:
            loss = lm_loss(module(xi), yi)  # (b, T, V) -> scalar
            (loss / len(xs)).backward()
        out.append(loss.detach())
    return out


def train_step(parts: ModelParts, optimizers: list, x: torch.Tensor, y: torch.Tensor, lr: float,
               grad_clip: float, pp_group, device: torch.device, timer=None) -> tuple[float, float]:
    """Run one iteration; return (mean loss over the iteration's tokens, gradient norm before clipping).

    The loss is the same on every rank: last-stage ranks (dp * tp of them, TP ranks agreeing)
    contribute their mean, which one all-reduce over the world sums.
    """
    lay = parts.layout
    with timer.backward_span() if timer else contextlib.nullcontext():  # forward: the timer's module hooks
        losses = _local_losses(parts, x, y)
    with timer.phase("optimizer") if timer else contextlib.nullcontext():
        with timer.labelled("grad-norm") if timer else contextlib.nullcontext():
            norm = clip_grad_norm(list(parts.parameters()), grad_clip, pp_group)
        set_lr(optimizers, lr)
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
    mine = torch.stack(losses).double().mean() if losses else torch.zeros((), dtype=torch.float64)
    total = mine.reshape(1).to(device)
    with timer.labelled("loss") if timer else contextlib.nullcontext():  # timed by the timer's CommHooks
        dist.all_reduce(total)
    return float(total.item()) / (lay.dp * lay.tp), norm
