"""The engine's entry point: ``python -m rankmap.engine.train --rankmap rankmap.json [--config engine.yaml]``.

Started by a launcher (torchrun, srun or mpirun; ``rankmap launch`` writes the lines) on every
host of the rank map. Parse -> build -> run -> close:

- build: read the map and config, join the process group, check every process's (host, local
  rank) against the map, build the mesh and check every TP/PP/DP group, load the text, build
  the model on every rank from one seed, split/shard/wrap it, optionally resume a checkpoint;
- run: ``train.steps`` iterations, each logged by rank 0 as one JSON line (stdout, and
  appended to ``OUT/train-log.jsonl``, fsynced): step, loss (nats per byte), grad_norm, lr,
  tokens, step_time_s, tokens_per_s;
- close: final checkpoint if configured, destroy the process group.

Rank 0 writes ``OUT/placement.json`` (every process's launcher rank, map rank, host and local
rank) before training; a start-up failure is written to ``OUT/error.txt`` and printed once.
Exit codes: 0 done, 3 bad input or placement mismatch, 124 the progress watchdog stopped a hang,
1 any other error (under torchrun its traceback goes to the agent's error file and root-cause report).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from rankmap.engine.config import EngineConfig, load_config
from rankmap.engine.runspec import RunSpec, resolve_run
from rankmap.errors import PlacementMismatch, RankmapError
from rankmap.fileio import atomic_write_text
from rankmap.job.rank_map import RankMap, read_rankmap
from rankmap.launch.ranks import LaunchEnv

__all__ = ["main", "build", "run", "close", "Trainer",
           "open_train_log", "append_train_log", "read_train_log"]


@dataclass
class Trainer:
    """Everything a run holds once built."""

    rm: RankMap
    cfg: EngineConfig
    spec: RunSpec
    out: Path
    rank: int
    device: object = None
    mesh: object = None
    parts: object = None
    optimizers: list = field(default_factory=list)
    corpus: object = None
    start_step: int = 0
    log: list = field(default_factory=list)
    timer: object = None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m rankmap.engine.train", description=__doc__.split("\n")[0])
    p.add_argument("--rankmap", type=Path, required=True, help="rankmap.json of the job")
    p.add_argument("--config", type=Path, help="engine.yaml (default: the built-in tiny model)")
    p.add_argument("--steps", type=int, help="override train.steps (0: start-up checks only)")
    p.add_argument("--out", type=Path, default=Path("rankmap-run"), help="log and report folder (default rankmap-run)")
    return p.parse_args(argv)


def _write_json(path: Path, doc) -> None:
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _placement_report(t: Trainer, launch: LaunchEnv, startup, verified: bool) -> None:
    if dist_rank() != 0:
        return
    ranks = [{"launcher_rank": c.launcher_rank, "rank": r, "host": c.host, "local_rank": c.local_rank,
              "machine": c.machine, "pid": c.pid} for c, r in zip(startup.claims, startup.map_rank)]
    _write_json(t.out / "placement.json", {"launcher": launch.launcher, "world_size": t.rm.world_size,
                                           "launcher_order": "kept" if startup.message is None else "differs",
                                           "message": startup.message, "groups_verified": verified, "ranks": ranks})


def dist_rank() -> int:
    import torch.distributed as dist
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))


def build(args: argparse.Namespace) -> Trainer:
    """Read inputs, start the process group checked against the map, build model and data."""
    import torch

    from rankmap.engine.data import load_corpus
    from rankmap.engine.mesh import build_mesh, exchange_claims, join, pick_device, rerank, verify_peers
    from rankmap.engine.model import GPT
    from rankmap.engine.optim import build_optimizers
    from rankmap.engine.parallel import Layout, build_parts, resolve_schedule

    rm = read_rankmap(args.rankmap)
    cfg = load_config(args.config)
    if args.steps is not None:
        cfg = cfg.with_steps(args.steps)
    spec = resolve_run(cfg, rm.job)
    schedule = resolve_schedule(cfg.parallel.schedule, spec.pp, spec.vpp, spec.micro_batches)
    launch = LaunchEnv.from_environ()
    device, backend = pick_device(launch.local_rank)
    # The c10d flight recorder (PyTorch docs, "Flight Recorder for Debugging Stuck Jobs"): its
    # ring of recent operations is dumped by the progress watchdog (rankmap.engine.timing).
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    join(launch, rm, backend, cfg.init_timeout_s)
    t = Trainer(rm=rm, cfg=cfg, spec=spec, out=args.out, rank=-1, device=device)
    startup = exchange_claims(rm, launch)
    _placement_report(t, launch, startup, verified=False)
    if startup.message is not None:
        if cfg.parallel.launcher_order == "error":
            raise PlacementMismatch(startup.message)
        rerank(startup.map_rank[launch.rank], backend, cfg.init_timeout_s)
    t.rank = dist_rank()
    entry = rm.entry(t.rank)
    t.mesh = build_mesh(rm, device.type)
    verify_peers(rm, t.mesh, entry["host"], entry["local_rank"])
    _placement_report(t, launch, startup, verified=True)
    if cfg.train.steps == 0:
        return t
    lay = Layout(tp=spec.tp, pp=spec.pp, dp=spec.dp, vpp=spec.vpp, pp_rank=t.mesh["pp"].get_local_rank(),
                 schedule=schedule, data_parallel=cfg.parallel.data_parallel,
                 sequence_parallel=cfg.parallel.sequence_parallel and spec.tp > 1,
                 micro_batch_size=spec.micro_batch_size, micro_batches=spec.micro_batches, seq_len=spec.seq_len)
    t.corpus = load_corpus(cfg.data)
    torch.manual_seed(cfg.train.seed)  # the same full model on every rank, then split and sharded
    full = GPT(spec.model)
    t.parts = build_parts(full, t.mesh, lay, device)
    del full
    t.optimizers = build_optimizers(t.parts.modules, cfg.train)
    _maybe_resume(t)
    if cfg.diagnostics.timing:
        t.timer = _timer(t, entry)
    return t


def _timer(t: Trainer, entry: dict):
    """The phase timer, with forward/backward hooks on every model chunk of this rank."""
    from rankmap.engine.comms import CommHooks, kinds_from_mesh
    from rankmap.engine.timing import PhaseTimer, new_run_id

    run_id = new_run_id()
    timer = PhaseTimer(t.out, t.rank, entry["host"], entry["local_rank"], t.device.type == "cuda", t.cfg.diagnostics,
                       run_id)
    if t.rank == 0:
        print(f"rankmap-engine: timing records in {timer.folder}", flush=True)
    timer.hooks = CommHooks(timer, kinds_from_mesh(t.mesh)).install()
    for module in t.parts.modules:
        # Forward: each chunk's forward call (module hooks: free). Backward: the rest of the
        # forward-backward span (see PhaseTimer.backward_span); gradient hooks per micro-batch
        # cost ~10% of a step here.
        module.register_forward_pre_hook(lambda *_: timer.begin("forward"))
        module.register_forward_hook(lambda *_: timer.end("forward"))
    timer.step = t.start_step + 1
    return timer


def _maybe_resume(t: Trainer) -> None:
    from rankmap.engine.checkpoint import latest_checkpoint, load_checkpoint

    ck = t.cfg.checkpoint
    if ck.dir and ck.resume:
        path = latest_checkpoint(ck.dir)
        if path is not None:
            meta = load_checkpoint(path, t.parts.modules, t.optimizers)
            t.start_step = int(meta["step"])
            log = t.out / "train-log.jsonl"
            if log.is_file():
                t.log = [r for r in read_train_log(log) if r["step"] <= t.start_step]


def _save(t: Trainer, step: int) -> None:
    from rankmap.engine.checkpoint import save_checkpoint

    save_checkpoint(t.cfg.checkpoint.dir, step, t.parts.modules, t.optimizers,
                    {"rankmap": str(t.rm.cluster_name), "world_size": t.rm.world_size})


def run(t: Trainer) -> None:
    """Train ``train.steps`` iterations from ``start_step``; rank 0 logs each as JSON, appending
    one line a step to ``train-log.jsonl`` (:func:`append_train_log`)."""
    if t.cfg.train.steps == 0:
        return
    dp_rank = t.mesh["dp"].get_local_rank()
    pp_group = t.mesh["pp"].get_group()
    log_fd = open_train_log(t.out / "train-log.jsonl", t.log) if t.rank == 0 else None
    try:
        _steps(t, dp_rank, pp_group, log_fd)
    finally:
        if log_fd is not None:
            os.close(log_fd)


def _steps(t: Trainer, dp_rank: int, pp_group, log_fd: int | None) -> None:
    from rankmap.engine.data import global_batch
    from rankmap.engine.optim import lr_at
    from rankmap.engine.step import split_batch, train_step

    spec, tc = t.spec, t.cfg.train
    for step in range(t.start_step + 1, tc.steps + 1):
        t0 = time.perf_counter()
        batch = global_batch(t.corpus, step, tc.seed, spec.rows, spec.seq_len)  # (rows, T+1)
        x, y = split_batch(batch, dp_rank, spec.dp, t.device)
        lr = lr_at(step, tc)
        loss, norm = train_step(t.parts, t.optimizers, x, y, lr, tc.grad_clip, pp_group, t.device, t.timer)
        dt = time.perf_counter() - t0
        if t.timer is not None:
            t.timer.end_step(step)
        record = {"step": step, "loss": loss, "grad_norm": norm, "lr": lr, "tokens": spec.tokens_per_step,
                  "step_time_s": round(dt, 6), "tokens_per_s": round(spec.tokens_per_step / dt, 3)}
        if log_fd is not None:
            t.log.append(record)
            print(json.dumps(record), flush=True)
            append_train_log(log_fd, record)
        ck = t.cfg.checkpoint
        if ck.dir and ck.every and step % ck.every == 0 and step != tc.steps:
            _save(t, step)


def open_train_log(path: Path, kept: list) -> int:
    """Start ``train-log.jsonl``: write the ``kept`` records (a resumed run's steps up to its
    checkpoint; none on a fresh run, which so drops an earlier run's log) atomically, then open
    it for :func:`append_train_log`; returns the file descriptor (the caller closes it).

    Raises
    ------
    RankmapError
        The file cannot be written.
    """
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        raise RankmapError(f"{path}: cannot open the training log: {exc.strerror}") from None


def append_train_log(fd: int, record: dict) -> None:
    """Append one step's record as one JSON line, in one ``write`` on an ``O_APPEND`` descriptor
    (a process killed around it leaves the line whole or absent, never half), then ``fsync``:
    constant work per step, where rewriting the whole log each step grew with the steps.

    Examples
    --------
    >>> import os, tempfile
    >>> path = Path(tempfile.mkdtemp()) / "train-log.jsonl"
    >>> fd = open_train_log(path, [{"step": 1, "loss": 5.5}])
    >>> append_train_log(fd, {"step": 2, "loss": 5.25}); os.close(fd)
    >>> print(path.read_text(), end="")
    {"step": 1, "loss": 5.5}
    {"step": 2, "loss": 5.25}
    """
    data = (json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]
    os.fsync(fd)


def read_train_log(path: Path) -> list[dict]:
    """The records of ``train-log.jsonl``; a last line without its newline (cut short when the
    machine stopped during a write) is left out.

    Raises
    ------
    RankmapError
        A whole line is not a JSON record.
    """
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(lines[:-1], 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise RankmapError(f"{path}:{i}: not a training-log record: {exc}") from None
    return out


def close(t: Trainer | None) -> None:
    """Final checkpoint (when configured) and process-group teardown."""
    import torch.distributed as dist

    if t is not None and t.parts is not None and t.cfg.checkpoint.dir and t.start_step < t.cfg.train.steps:
        _save(t, t.cfg.train.steps)
    if t is not None and t.timer is not None:
        t.timer.hooks.uninstall()
        t.timer.close()
    if dist.is_initialized():
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # FSDP2 warns when a stage returns a view (the TP head's local logits are one): an in-place
    # op on it would skip a hook. Neither this engine nor the pipeline schedule modifies stage
    # outputs in place; the tests match a single-process run step for step.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    # DTensor advises flattening (dp, tp) when a gradient norm is reduced over both dimensions one
    # after the other; for a norm that only changes the order of additions (rounding).
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    trainer = None
    try:
        trainer = build(args)
        run(trainer)
        close(trainer)
        return 0
    except RankmapError as exc:
        _report_error(args.out, exc)
        return 3


def _report_error(out: Path, exc: RankmapError) -> None:
    """Print the error once (rank 0, or any rank when it may be alone in seeing it) and save it."""
    rank = dist_rank()
    if rank == 0 or not isinstance(exc, PlacementMismatch):
        print(f"rankmap-engine: error: [rank {rank}] {exc}", file=sys.stderr, flush=True)
    if rank == 0:
        try:
            atomic_write_text(out / "error.txt", f"{exc}\n")
        except RankmapError:
            pass
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - tearing down after an error; the error is already reported
        pass


def exit_now(code: int) -> None:
    """End a worker process without interpreter teardown: flush, then ``os._exit``.

    After ``destroy_process_group`` the run is over and every output is closed, but torch 2.13's
    gloo backend can still hold a joinable C++ thread that is destroyed during interpreter
    shutdown, which aborts the process ("terminate called without an active exception", exit -6;
    seen about once in ten 8-process runs here) and makes torchrun report a finished run as
    failed. ``os._exit`` skips that teardown (os._exit(2): no atexit handlers, no C++ static
    destructors; https://docs.python.org/3/library/os.html#os._exit).
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    # torchrun's error file (TORCHELASTIC_ERROR_FILE): an exception that ends this worker is
    # written there, and the agent prints it, traceback included, as the run's root cause
    # (PyTorch docs, "Error Propagation": torch.distributed.elastic.multiprocessing.errors.record).
    # Without torchrun it records nothing.
    from torch.distributed.elastic.multiprocessing.errors import record
    exit_now(record(main)() or 0)
