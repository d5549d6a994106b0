"""AdamW, the learning-rate schedule and gradient clipping across meshes.

Clipping by the global gradient norm (Pascanu et al., "On the difficulty of training recurrent
neural networks", 2013) needs the norm over all parameters of the model, which here live on
different meshes: TP-sharded parameters on the (dp, tp) mesh under FSDP, the others on the dp
mesh, plain tensors where no DTensor applies, and each pipeline stage holds other parameters.
One ``clip_grad_norm_`` call over them raises "different meshes" errors, so:

1. group gradients by mesh; a group's norm is ``get_total_norm`` of its gradients, made whole
   with ``.full_tensor()`` (DTensor reduces the partial norms over the mesh); plain tensors
   are replicated over DP and TP (DDP keeps them equal), so their local norm is the norm;
2. sum the squares of the groups' norms, all-reduce the sum over the pipeline group (stages
   hold disjoint parameters) and take the square root: the global norm;
3. scale every gradient by ``max_norm / (norm + 1e-6)`` when that is below 1 -- the formula of
   ``torch.nn.utils.clip_grad_norm_``, so a single-process run clips identically.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from rankmap.engine.config import TrainConfig

__all__ = ["build_optimizers", "lr_at", "set_lr", "global_grad_norm", "clip_grad_norm"]


def build_optimizers(modules: list, cfg: TrainConfig) -> list[torch.optim.Optimizer]:
    """One AdamW per model chunk (per-parameter updates: the same as one optimizer over all).

    ``foreach=False``: a chunk may hold DTensors on different meshes and plain tensors, which
    the multi-tensor kernels cannot mix.
    """
    return [torch.optim.AdamW(m.parameters(), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                              weight_decay=cfg.weight_decay, foreach=False) for m in modules]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of 1-based ``step``: linear warm-up over ``warmup_steps``, then constant.

    Examples
    --------
    >>> lr_at(1, TrainConfig(lr=1.0, warmup_steps=4)), lr_at(9, TrainConfig(lr=1.0, warmup_steps=4))
    (0.25, 1.0)
    """
    if cfg.warmup_steps and step <= cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    return cfg.lr


def set_lr(optimizers: list, lr: float) -> None:
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = lr


def _mesh_key(grad: torch.Tensor):
    if isinstance(grad, DTensor):
        mesh = grad.device_mesh
        return ("mesh", mesh.mesh_dim_names, tuple(mesh.mesh.flatten().tolist()))
    return ("local",)


def global_grad_norm(params, pp_group=None) -> float:
    """The 2-norm of all gradients of the model, the same on every rank (see the module docstring)."""
    groups: dict = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(_mesh_key(p.grad), []).append(p.grad)
    total_sq = torch.zeros((), dtype=torch.float64)
    for key in sorted(groups, key=repr):  # the same order on every rank of a stage
        norm = torch.nn.utils.get_total_norm(groups[key], norm_type=2.0, foreach=False)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        total_sq += norm.detach().double().cpu() ** 2
    if pp_group is not None and dist.get_world_size(pp_group) > 1:
        device = next((g.device for gs in groups.values() for g in gs), torch.device("cpu"))
        total = total_sq.to(device)
        dist.all_reduce(total, group=pp_group)
        total_sq = total.cpu()
    return math.sqrt(float(total_sq))


def clip_grad_norm(params, max_norm: float, pp_group=None) -> float:
    """Clip gradients in place to global norm ``max_norm``; return the norm before clipping."""
    params = [p for p in params if p.grad is not None]
    norm = global_grad_norm(params, pp_group)
    coef = max_norm / (norm + 1e-6)
    if max_norm > 0 and coef < 1.0:
        with torch.no_grad():
            for p in params:
                p.grad.mul_(coef)
    return norm
