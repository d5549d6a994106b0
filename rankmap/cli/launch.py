"""``rankmap launch``: start a planned job so that every rank runs where the rank map says.

Forms::

    rankmap launch --rankmap MAP --format {torchrun,slurm,mpi,deepspeed} [--out DIR] [--workdir DIR]
                   [-- SCRIPT ARGS...]
    rankmap launch --rankmap MAP --format slurm --plan-in-allocation --cluster CLUSTER.yaml [-- SCRIPT ARGS...]
    rankmap launch --rankmap MAP --local [--max-procs N] [--timeout S] [-- SCRIPT ARGS...]
    rankmap launch --rankmap MAP --flags {megatron,torchtitan,deepspeed,engine}

The first writes launch files (:func:`rankmap.api.launch_files`); everything after ``--`` is
what the launcher runs on every host, argv-exact (``train.py --lr 3e-4`` or ``-m pkg.mod``);
without it, the bundled engine. The second writes an sbatch script that plans on the nodes
Slurm allocated. ``--local`` runs the job on this machine, one torchrun agent per host on
127.0.0.1 (:func:`rankmap.api.launch_local`). ``--flags`` prints a framework's options for the
map's groups. None imports torch in this process.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rankmap.cli.common import (
    add_json_arg,
    hostname_arg,
    non_negative_int,
    out_folder,
    path_arg,
    port,
    positive_float,
    positive_int,
    report_before_commit,
)
from rankmap.errors import EXIT_OK

__all__ = ["add_parser", "run_launch"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``launch`` command to the CLI's subparsers."""
    from rankmap.launch.adapters import FRAMEWORKS
    from rankmap.launch.formats import FORMATS

    p = subparsers.add_parser(
        "launch", help="write launch files for a rank map (torchrun, Slurm, Open MPI, DeepSpeed), or run it here",
        description="Start a planned job so that global rank r runs on the host and GPU the rank map names. "
                    "--format writes launch files; --local trains on this machine, one torchrun agent per host. "
                    "Everything after -- is your own training command (default: the bundled engine).")
    p.add_argument("--rankmap", type=path_arg, required=True, help="rankmap.json written by `rankmap plan`")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--format", choices=FORMATS, help="launch files to write")
    mode.add_argument("--local", action="store_true", help="run the job here, each host emulated on 127.0.0.1")
    mode.add_argument("--flags", choices=FRAMEWORKS, help="print the framework's flags for the map's groups")
    p.add_argument("--out", type=out_folder, help="output folder (default: DIR/launch-FORMAT, or DIR/run with --local)")
    p.add_argument("--workdir", help="directory the generated scripts change to; relative paths in them are "
                                     "relative to it (default: where the job is started, e.g. the sbatch "
                                     "submission directory)")
    p.add_argument("--config", type=path_arg, help="engine.yaml for the bundled training engine")
    p.add_argument("--steps", type=non_negative_int, help="bundled engine: training steps (0: start-up checks only)")
    p.add_argument("--run-dir", help="with --format: the engine's log folder on the hosts (default: rankmap-run)")
    p.add_argument("--master-addr", type=hostname_arg, help="rendezvous address (default: the map's node 0 host)")
    p.add_argument("--master-port", type=port, help="rendezvous port (default 29500; --local: a free port)")
    p.add_argument("--torchrun", help="torchrun command in generated lines (default torchrun)")
    p.add_argument("--no-resolve", action="store_true", help="do not check that hosts resolve on this machine")
    p.add_argument("--plan-in-allocation", action="store_true",
                   help="--format slurm: plan inside the allocation on $SLURM_JOB_NODELIST (needs --cluster)")
    p.add_argument("--cluster", type=path_arg, help="--plan-in-allocation: cluster spec YAML naming the nodes")
    p.add_argument("--timeout", type=positive_float, help="--local: stop the run after this many seconds")
    p.add_argument("--max-procs", type=positive_int,
                   help="--local: most worker processes to start on this machine (default: "
                        "rankmap.launch.local.default_max_procs(), 2 per CPU and at least 8)")
    p.add_argument("--no-python", action="store_true",
                   help="run the command after -- as a program (./train.sh, a binary): torchrun --no-python, "
                        "deepspeed --no_python, mpirun without ${PYTHON:-python3}")
    p.add_argument("command", nargs="*", metavar="-- SCRIPT ARGS",
                   help="your training command, run on every host: SCRIPT.py ARGS or -m MODULE ARGS (the launcher "
                        "starts python: no 'python' in front), or any program with --no-python")
    add_json_arg(p)
    p.set_defaults(func=run_launch)
    return p


def run_launch(args: argparse.Namespace) -> int:
    """Run ``rankmap launch``; errors are RankmapError (one line, exit code 3)."""
    from rankmap import api

    _check_mode_flags(args)
    rm = api.read_rankmap(args.rankmap)
    if args.flags:
        text = api.framework_flags(rm, args.flags)
        if args.flags == "engine":  # it builds its groups from the map: the map's path is its one flag
            import shlex
            import sys
            text = f"--rankmap {shlex.quote(str(args.rankmap))}"
            print("rankmap launch: the bundled engine (python -m rankmap.engine.train) reads tp/pp/dp/cp/ep and the "
                  "order from the rank map itself: --rankmap is the only placement flag it takes", file=sys.stderr)
        if args.json:
            from rankmap.cli.report import print_json
            print_json({"framework": args.flags, "flags": text})
        else:
            print(text)
        return EXIT_OK
    if not args.command:  # fail here, before anything starts, on a bad engine config
        api.check_engine_run(rm, args.config, args.steps)
    if args.local:
        return _local(args, rm)
    return _files(args, rm)


# Flags that only one mode reads (dest -> (flag, modes)); --rankmap, --json and --debug go with every mode.
_MODE_FLAGS = {"out": ("--out", ("format", "local")), "workdir": ("--workdir", ("format", "local")),
               "config": ("--config", ("format", "local")), "steps": ("--steps", ("format", "local")),
               "master_port": ("--master-port", ("format", "local")), "command": ("-- SCRIPT", ("format", "local")),
               "run_dir": ("--run-dir", ("format",)), "master_addr": ("--master-addr", ("format",)),
               "torchrun": ("--torchrun", ("format",)), "no_resolve": ("--no-resolve", ("format",)),
               "plan_in_allocation": ("--plan-in-allocation", ("format",)), "cluster": ("--cluster", ("format",)),
               "timeout": ("--timeout", ("local",)), "max_procs": ("--max-procs", ("local",)),
               "no_python": ("--no-python", ("format", "local"))}


def _check_mode_flags(args: argparse.Namespace) -> None:
    """UsageError (exit 2) for a flag the chosen mode does not read (``--timeout`` without
    ``--local``): a flag that does nothing is a mistake the user should hear about."""
    from rankmap.errors import UsageError

    mode = "flags" if args.flags else "local" if args.local else "format"
    for dest, (flag, modes) in _MODE_FLAGS.items():
        if mode not in modes and getattr(args, dest) not in (None, False, []):
            goes = " or ".join(f"--{m}" for m in modes)
            raise UsageError(f"{flag} goes with {goes}, not --{mode}: it would do nothing here")
    if mode == "format" and (args.plan_in_allocation or args.cluster) and args.format != "slurm":
        raise UsageError(f"--plan-in-allocation and --cluster go with --format slurm, not --format {args.format}")
    if mode == "format" and args.plan_in_allocation and not args.cluster:
        raise UsageError("--plan-in-allocation needs --cluster CLUSTER.yaml (the spec naming the nodes)")
    if mode == "format" and args.cluster and not args.plan_in_allocation:
        raise UsageError("--cluster goes with --plan-in-allocation: it would do nothing here")
    _check_command(args)


def _check_command(args: argparse.Namespace) -> None:
    """UsageError (exit 2) for a command after ``--`` that no launcher can run as given
    (``python train.py``, ``./train.sh`` without ``--no-python``; :func:`rankmap.launch.common.entry_problem`)."""
    from rankmap.errors import UsageError
    from rankmap.launch.common import entry_problem

    if args.no_python and not args.command:
        raise UsageError("--no-python goes with your own command after --: the bundled engine is a Python module")
    why = entry_problem(tuple(args.command), args.no_python) if args.command else None
    if why:
        raise UsageError(why)


def _options(args: argparse.Namespace):
    """LaunchOptions from the command line: paths as the user typed them (relative to --workdir)."""
    from rankmap.launch.common import ENGINE_ENTRY, LaunchOptions

    return LaunchOptions(rankmap_path=str(args.rankmap), config_path=str(args.config) if args.config else None,
                         out_dir=args.run_dir, master_addr=args.master_addr, master_port=args.master_port or 29500,
                         torchrun=args.torchrun or "torchrun", resolve=not args.no_resolve, steps=args.steps,
                         entry=tuple(args.command) or ENGINE_ENTRY, workdir=args.workdir, no_python=args.no_python)


def _files(args: argparse.Namespace, rm) -> int:
    from rankmap import api
    from rankmap.errors import LaunchError
    from rankmap.fileio import atomic_write_files
    from rankmap.launch.formats import MANIFEST, PLAN_FILES, manifest_text

    out = args.out or args.rankmap.parent / f"launch-{args.format}"
    opts = _options(args)
    if args.plan_in_allocation:
        files = api.allocation_files(rm, opts, str(args.cluster), str(out))
    else:
        files = api.launch_files(rm, args.format, opts, out)
    what = "sbatch script planning inside the allocation" if args.plan_in_allocation else f"{args.format} files"
    clash = sorted(set(files) & set(PLAN_FILES))
    if clash:  # no format writes these names; a new one must not replace the plan's own files in --out
        raise LaunchError(f"{out}: the {args.format} files would replace {', '.join(clash)}, which plan writes")
    files[MANIFEST] = manifest_text(files, _old_manifest(out / MANIFEST))   # what a new map in `out` removes

    def report(written):
        written = [p for p in written if p.name != MANIFEST]
        if args.json:
            from rankmap.cli.report import print_json
            print_json({"format": "slurm-plan-in-allocation" if args.plan_in_allocation else args.format,
                        "world_size": rm.world_size, "hosts": len(rm.hosts), "node0": rm.hosts[0],
                        "outputs": [str(p) for p in written]})
            return
        print(f"rankmap launch: {what} for {rm.world_size} ranks on {len(rm.hosts)} hosts (node 0: {rm.hosts[0]}):")
        for path in written:
            print(f"  {path}")

    written = atomic_write_files(out, files, before_commit=report_before_commit(report))
    for path in written:
        if path.suffix in (".sh", ".sbatch"):
            path.chmod(path.stat().st_mode | 0o111)
    return EXIT_OK


def _old_manifest(path: Path) -> str | None:
    """The text of the launch files' record already in the folder (other formats written there), if any."""
    from rankmap.fileio import read_text

    return read_text(path) if path.is_file() and not path.is_symlink() else None


def _local(args: argparse.Namespace, rm) -> int:
    from rankmap import api
    from rankmap.errors import LaunchError
    from rankmap.fileio import read_text
    from rankmap.launch.local import check_local_size

    if args.workdir is not None and not Path(args.workdir).is_dir():
        from rankmap.errors import SpecError
        what = "does not exist" if not Path(args.workdir).exists() else "is not a folder"
        raise SpecError(f"{args.workdir} {what}: the workers start in it", key="--workdir")
    check_local_size(rm, args.max_procs)
    run_dir = (args.out or args.rankmap.resolve().parent / "run").resolve()
    where = f"running {' '.join(args.command)}" if args.command else f"logs in {run_dir}"
    print(f"rankmap launch --local: {rm.world_size} ranks, {len(rm.hosts)} torchrun agents on 127.0.0.1 "
          f"(hosts {', '.join(rm.hosts[:4])}{', ...' if len(rm.hosts) > 4 else ''}); {where}", flush=True)
    from rankmap.cli.report import progress
    with progress(f"{len(rm.hosts)} torchrun agents starting {rm.world_size} ranks (rendezvous, then the job)"):
        api.launch_local(args.rankmap, run_dir, config_path=args.config, steps=args.steps,
                         master_port=args.master_port, timeout_s=args.timeout,
                         max_procs=args.max_procs, cwd=args.workdir,
                         entry=(("--no-python",) if args.no_python else ()) + tuple(args.command) or None)
    if args.command:
        print(f"rankmap launch --local: {' '.join(args.command)} finished on all {rm.world_size} ranks")
        return EXIT_OK
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
