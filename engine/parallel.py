"""Tensor, pipeline and data parallelism from torch.distributed's own parts.

- Pipeline (PP): the model's layers are cut into ``pp * vpp`` stages of equal depth; pipeline
  rank ``p`` runs stages ``p, p + pp, ...`` (the interleaved assignment of Narayanan et al.,
  SC'21, §2.2). Each stage is a copy of the model with the other layers deleted, wrapped in a
  ``torch.distributed.pipelining.PipelineStage``; schedules ``Schedule1F1B``, ``ScheduleGPipe``
  or ``ScheduleInterleaved1F1B`` (PyTorch docs, "torch.distributed.pipelining").
- Tensor (TP): ``parallelize_module`` with ``ColwiseParallel`` for ``wq``/``wk``/``wv``/``w_in``
  and the output head, ``RowwiseParallel`` for ``wo``/``w_out`` and the vocabulary-parallel
  embedding; with sequence parallelism the norms run on sequence shards (``SequenceParallel``)
  and attention/MLP inputs are gathered with ``PrepareModuleInput`` (Korthikanti et al.,
  "Reducing Activation Recomputation in Large Transformer Models", 2022; PyTorch docs,
  "Large Scale Transformer model training with Tensor Parallel").
- Data (DP): FSDP2 ``fully_shard`` per block and per stage over the DP mesh, or DDP over the DP
  process group (with tp = 1 only: DDP's tensor-parallel support re-creates the parameters on
  every forward, ``torch.distributed.tensor.parallel.ddp``, which breaks optimizers and clipping). With pipelining, FSDP keeps parameters gathered between micro-batches
  (``reshard_after_forward=False``), as torchtitan does.

The order is PP split -> TP -> DP, as the TP and FSDP docs require (TP before FSDP).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.nn.parallel import DistributedDataParallel

from rankmap.engine.model import GPT
from rankmap.errors import EngineError
from rankmap.job.frameworks import interleaved_rule

__all__ = ["Layout", "ModelParts", "lm_loss", "stage_layers", "split_stage", "apply_tp", "apply_dp",
           "build_parts", "resolve_schedule"]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy: logits ``(B, T, V)``, targets ``(B, T)`` -> scalar (nats)."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@dataclass(frozen=True, kw_only=True)
class Layout:
    """What one rank runs: sizes, its pipeline rank, schedule and batch shape."""

    tp: int
    pp: int
    dp: int
    vpp: int
    pp_rank: int
    schedule: str
    data_parallel: str
    sequence_parallel: bool
    micro_batch_size: int
    micro_batches: int
    seq_len: int

    @property
    def stage_ids(self) -> list[int]:
        """Stages of this pipeline rank, in model order."""
        return [self.pp_rank + k * self.pp for k in range(self.vpp)]

    @property
    def n_stages(self) -> int:
        return self.pp * self.vpp


def resolve_schedule(name: str, pp: int, vpp: int, micro_batches: int) -> str:
    """The schedule to run: ``auto`` picks interleaved 1F1B when vpp > 1, else 1F1B.

    Raises
    ------
    EngineError
        A single-stage schedule with vpp > 1, or too few micro-batches for the pipeline.
    """
    if name == "auto":
        name = "interleaved-1f1b" if vpp > 1 else "1f1b"
    if vpp > 1 and name != "interleaved-1f1b":
        raise EngineError(f"parallel.schedule {name} runs one stage per pipeline rank; vpp={vpp} needs "
                          f"interleaved-1f1b")
    why = interleaved_rule("engine", pp, vpp, micro_batches) if name == "interleaved-1f1b" else None
    if why:
        raise EngineError(why)
    return name


def stage_layers(layers: int, n_stages: int, stage: int) -> range:
    """Layer indices of one stage (equal depth; ``n_stages`` divides ``layers``)."""
    per = layers // n_stages
    return range(stage * per, (stage + 1) * per)


def split_stage(full: GPT, stage: int, n_stages: int) -> GPT:
    """A copy of ``full`` keeping only the layers of ``stage`` (and the embedding / head at the ends)."""
    part = copy.deepcopy(full)
    keep = {str(i) for i in stage_layers(full.cfg.layers, n_stages, stage)}
    for name in list(part.layers.keys()):
        if name not in keep:
            del part.layers[name]
    if stage != 0:
        part.tok_emb = None
    if stage != n_stages - 1:
        part.norm = None
        part.head = None
    return part


def apply_tp(part: GPT, tp_mesh: DeviceMesh, sequence_parallel: bool) -> None:
    """Shard ``part`` over the TP mesh in place (see the module docstring)."""
    sp = sequence_parallel
    seq = Shard(1)  # (B, T, C): sequence shards
    plan: dict = {}
    if part.tok_emb is not None:  # vocabulary-parallel embedding: rows split over TP
        plan["tok_emb"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq if sp else Replicate())
    if part.head is not None:
        if sp:
            plan["norm"] = SequenceParallel()
        plan["head"] = ColwiseParallel(input_layouts=seq if sp else Replicate(), output_layouts=Replicate())
    parallelize_module(part, tp_mesh, plan)
    for block in part.layers.values():
        bplan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
                 "attn.wo": RowwiseParallel(output_layouts=seq if sp else Replicate()),
                 "mlp.w_in": ColwiseParallel(),
                 "mlp.w_out": RowwiseParallel(output_layouts=seq if sp else Replicate())}
        if sp:
            gather = PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),))
            bplan.update({"attn_norm": SequenceParallel(), "attn": gather, "mlp_norm": SequenceParallel(),
                          "mlp": copy.copy(gather)})
        parallelize_module(block, tp_mesh, bplan)


def apply_dp(part: nn.Module, dp_mesh: DeviceMesh, mode: str, pipelined: bool) -> nn.Module:
    """Wrap ``part`` for data parallelism over ``dp_mesh``; returns the module to run."""
    if mode == "fsdp":
        reshard = not pipelined  # PP runs several micro-batches per step: keep parameters gathered
        for block in part.layers.values():
            fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard)
        fully_shard(part, mesh=dp_mesh, reshard_after_forward=reshard)
        return part
    return DistributedDataParallel(part, process_group=dp_mesh.get_group(), broadcast_buffers=False,
                                   init_sync=False)


@dataclass
class ModelParts:
    """The model chunks of one rank and the schedule that runs them (None when pp == 1)."""

    modules: list
    stages: list
    schedule: object | None
    layout: Layout

    @property
    def has_first(self) -> bool:
        return 0 in self.layout.stage_ids

    @property
    def has_last(self) -> bool:
        return self.layout.n_stages - 1 in self.layout.stage_ids

    def parameters(self):
        for module in self.modules:
            yield from module.parameters()


def _stage_io(lay: Layout, stage: int, hidden: int, vocab: int, device: torch.device):
    b = lay.micro_batch_size
    t_local = lay.seq_len // lay.tp if lay.sequence_parallel and lay.tp > 1 else lay.seq_len
    # Floating examples carry requires_grad: the stage takes from them whether gradients flow back.
    hid = torch.empty(b, t_local, hidden, device=device, requires_grad=True)  # (b, T or T/tp, C)
    first = torch.empty(b, lay.seq_len, dtype=torch.long, device=device)  # (b, T) tokens
    last = torch.empty(b, lay.seq_len, vocab, device=device, requires_grad=True)  # (b, T, V) logits
    return (first if stage == 0 else hid), (last if stage == lay.n_stages - 1 else hid)


def build_parts(full: GPT, mesh: DeviceMesh, lay: Layout, device: torch.device) -> ModelParts:
    """Split, shard and wrap ``full`` for this rank; build the pipeline schedule when pp > 1.

    The layout was checked against the model by :func:`rankmap.engine.runspec.resolve_run`.
    """
    cfg = full.cfg
    modules, stages = [], []
    for stage in lay.stage_ids:
        part = split_stage(full, stage, lay.n_stages).to(device)
        if lay.tp > 1:
            apply_tp(part, mesh["tp"], lay.sequence_parallel)
        if lay.dp > 1:
            part = apply_dp(part, mesh["dp"], lay.data_parallel, lay.pp > 1)
        modules.append(part)
        if lay.pp > 1:
            inp, out = _stage_io(lay, stage, cfg.hidden, cfg.vocab, device)
            stages.append(PipelineStage(part, stage, lay.n_stages, device, input_args=(inp,), output_args=out,
                                        group=mesh["pp"].get_group()))
    schedule = None
    if lay.pp > 1:
        if lay.schedule == "interleaved-1f1b":
            schedule = ScheduleInterleaved1F1B(stages, n_microbatches=lay.micro_batches, loss_fn=lm_loss)
        else:
            kind = Schedule1F1B if lay.schedule == "1f1b" else ScheduleGPipe
            schedule = kind(stages[0], n_microbatches=lay.micro_batches, loss_fn=lm_loss)
    return ModelParts(modules=modules, stages=stages, schedule=schedule, layout=lay)
