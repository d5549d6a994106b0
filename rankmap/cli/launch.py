"""``rankmap launch``: start a planned job so that every rank runs where the rank map says.

Two forms::

    rankmap launch --rankmap DIR/rankmap.json --format {torchrun,slurm,mpi,deepspeed} --out DIR
    rankmap launch --local --rankmap DIR/rankmap.json [--steps N] [--config engine.yaml] [--out RUN]

The first writes launch files (:func:`rankmap.api.launch_files`); the second trains on this
machine, one torchrun agent per host of the map on 127.0.0.1 (:func:`rankmap.api.launch_local`).
Neither imports torch in this process: ``--local`` needs it only in the agents it starts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rankmap.cli.common import non_negative_int, port, positive_float
from rankmap.errors import EXIT_OK

__all__ = ["add_parser", "run_launch"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``launch`` command to the CLI's subparsers."""
    from rankmap.launch.formats import FORMATS

    p = subparsers.add_parser(
        "launch", help="write launch files for a rank map (torchrun, Slurm, Open MPI, DeepSpeed), or run it here",
        description="Start a planned job so that global rank r runs on the host and GPU the rank map names. "
                    "--format writes launch files; --local trains on this machine, one torchrun agent per host.")
    p.add_argument("--rankmap", type=Path, required=True, help="rankmap.json written by `rankmap plan`")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--format", choices=FORMATS, help="launch files to write")
    mode.add_argument("--local", action="store_true", help="run the job here, each host emulated on 127.0.0.1")
    p.add_argument("--out", type=Path, help="output folder (default: DIR/launch-FORMAT, or DIR/run with --local)")
    p.add_argument("--config", type=Path, help="engine.yaml for the training engine")
    p.add_argument("--steps", type=non_negative_int, help="training steps (overrides train.steps; 0: start-up checks only)")
    p.add_argument("--run-dir", help="with --format: the engine's log folder on the hosts (default: rankmap-run)")
    p.add_argument("--master-addr", help="rendezvous address (default: the map's node 0 host)")
    p.add_argument("--master-port", type=port, help="rendezvous port (default 29500; --local: a free port)")
    p.add_argument("--torchrun", default="torchrun", help="torchrun command in generated lines (default torchrun)")
    p.add_argument("--no-resolve", action="store_true", help="do not check that hosts resolve on this machine")
    p.add_argument("--timeout", type=positive_float, help="--local: stop the run after this many seconds")
    p.set_defaults(func=run_launch)
    return p


def run_launch(args: argparse.Namespace) -> int:
    """Run ``rankmap launch``; errors are RankmapError (one line, exit code 3)."""
    from rankmap import api

    rm = api.read_rankmap(args.rankmap)
    api.check_engine_run(rm, args.config, args.steps)  # fail here, before anything starts, on a bad config
    if args.local:
        return _local(args, rm)
    return _files(args, rm)


def _files(args: argparse.Namespace, rm) -> int:
    from rankmap import api
    from rankmap.fileio import atomic_write_files
    from rankmap.launch.common import LaunchOptions

    out = args.out or args.rankmap.resolve().parent / f"launch-{args.format}"
    opts = LaunchOptions(rankmap_path=str(args.rankmap.resolve()),
                         config_path=str(args.config.resolve()) if args.config else None,
                         out_dir=args.run_dir, master_addr=args.master_addr, master_port=args.master_port or 29500,
                         torchrun=args.torchrun, resolve=not args.no_resolve, steps=args.steps)
    files = api.launch_files(rm, args.format, opts, out)
    written = atomic_write_files(out, files)
    for path in written:
        if path.suffix in (".sh", ".sbatch"):
            path.chmod(path.stat().st_mode | 0o111)
    print(f"rankmap launch: {args.format} files for {rm.world_size} ranks on {len(rm.hosts)} hosts "
          f"(node 0: {rm.hosts[0]}):")
    for path in written:
        print(f"  {path}")
    return EXIT_OK


def _local(args: argparse.Namespace, rm) -> int:
    from rankmap import api
    from rankmap.errors import LaunchError
    from rankmap.fileio import read_text

    run_dir = (args.out or args.rankmap.resolve().parent / "run").resolve()
    print(f"rankmap launch --local: {rm.world_size} ranks, {len(rm.hosts)} torchrun agents on 127.0.0.1 "
          f"(hosts {', '.join(rm.hosts[:4])}{', ...' if len(rm.hosts) > 4 else ''}); logs in {run_dir}", flush=True)
    api.launch_local(args.rankmap, run_dir, config_path=args.config, steps=args.steps,
                     master_port=args.master_port, timeout_s=args.timeout)
    log = run_dir / "train-log.jsonl"
    if log.is_file():
        try:
            records = [json.loads(line) for line in read_text(log).splitlines() if line.strip()]
        except ValueError as exc:
            raise LaunchError(f"{log}: the run finished but its log is unreadable: {exc}") from None
        if records:
            first, last = records[0], records[-1]
            print(f"rankmap launch --local: {len(records)} steps, loss {first['loss']:.4f} -> {last['loss']:.4f}, "
                  f"{last['tokens_per_s']:.0f} tokens/s at the last step")
    else:
        print(f"rankmap launch --local: start-up checks passed; placement report in {run_dir / 'placement.json'}")
    return EXIT_OK
