"""Distributed checkpoints of the model chunks and their optimizers, committed atomically.

Every rank writes its shards with ``torch.distributed.checkpoint`` (DCP) into
``DIR/.step-NNNNNNNN.tmp``; once all have written, rank 0 adds ``meta.json`` and renames the
folder to ``DIR/step-NNNNNNNN``, then points ``DIR/latest`` at it (written atomically). A run
that dies mid-save leaves the previous checkpoint and ``latest`` as they were.

State dicts use the model's own names (``layers.3.attn.wq.weight``): a stage keeps the names
of the full model, so the keys do not depend on the pipeline split, and DCP reshards DTensors
on load. Optimizer states are flattened to the same names (``StateDictOptions(
flatten_optimizer_state_dict=True)``). Sources: PyTorch docs, "Getting Started with Distributed
Checkpoint (DCP)" and ``torch.distributed.checkpoint.state_dict``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from rankmap.errors import EngineError
from rankmap.fileio import atomic_write_text

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint"]

_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


def _state(modules: list, optimizers: list) -> tuple[dict, list]:
    """Merged ``{"model": ..., "optim": ...}`` and each chunk's own (model keys, optimizer keys)."""
    model, optim, keys = {}, {}, []
    for module, opt in zip(modules, optimizers):
        msd = get_model_state_dict(module)
        osd = get_optimizer_state_dict(module, opt, options=_OPTS)
        model.update(msd)
        optim.update(osd)
        keys.append((list(msd), list(osd)))
    return {"model": model, "optim": optim}, keys


def save_checkpoint(folder: str | Path, step: int, modules: list, optimizers: list, meta: dict) -> Path:
    """Save all ranks' state for ``step`` (collective); returns the committed folder."""
    root = Path(folder)
    name = f"step-{step:08d}"
    final, tmp = root / name, root / f".{name}.tmp"
    rank0 = dist.get_rank() == 0
    if rank0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    dist.barrier()
    state, _ = _state(modules, optimizers)
    dcp.save(state, checkpoint_id=str(tmp))
    dist.barrier()
    if rank0:
        atomic_write_text(tmp / "meta.json", json.dumps({"step": step, **meta}, sort_keys=True) + "\n")
        old = root / f".{name}.old"
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        atomic_write_text(root / "latest", name + "\n")
    dist.barrier()
    return final


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The folder ``DIR/latest`` names, or None when there is no checkpoint yet."""
    pointer = Path(folder) / "latest"
    if not pointer.is_file():
        return None
    path = Path(folder) / pointer.read_text(encoding="utf-8").strip()
    if not (path / "meta.json").is_file():
        raise EngineError(f"{pointer}: names {path.name}, which is not a complete checkpoint")
    return path


def load_checkpoint(path: str | Path, modules: list, optimizers: list) -> dict:
    """Load a checkpoint into the chunks and optimizers in place (collective); returns its meta."""
    path = Path(path)
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EngineError(f"{path}: not a checkpoint ({exc})") from None
    state, keys = _state(modules, optimizers)
    dcp.load(state, checkpoint_id=str(path))
    for (mkeys, okeys), module, opt in zip(keys, modules, optimizers):
        set_model_state_dict(module, {k: state["model"][k] for k in mkeys})
        set_optimizer_state_dict(module, opt, {k: state["optim"][k] for k in okeys}, options=_OPTS)
    return meta
