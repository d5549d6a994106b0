"""``rankmap diagnose RUN_DIR --rankmap rankmap.json``: stragglers, slow links, hangs, heat map, timeline.

Reads the newest run under ``RUN_DIR/events/`` (or ``--run-id``), refuses records whose
hosts the rank map contradicts, and writes into ``--out`` (default ``RUN_DIR/diagnosis``),
all or nothing: ``diagnosis.json``, ``heatmap.png``, ``trace.json`` (open in Perfetto or
chrome://tracing) and ``constraints.yaml``, an exclusion list (flagged hosts; ToR groups
whose ranks are slow together get a quota of 0) that ``rankmap plan --constraints``
accepts. The work is :func:`rankmap.api.diagnose`.

Exit status: 0 nothing found; 5 stragglers or slow links flagged; 6 a hang was recorded
(the culprits are named); 3 bad input (missing or malformed records, a rank map that does
not match them); 2 a bad flag.
"""

from __future__ import annotations

import argparse
import math
import sys

from rankmap.cli.common import (
    add_json_arg,
    non_negative_float,
    out_folder,
    path_arg,
    positive_float,
    report_before_commit,
)
from rankmap.errors import EXIT_HANG, EXIT_OK, EXIT_STRAGGLERS

__all__ = ["add_parser", "run_diagnose", "step_fraction", "EXIT_STRAGGLERS", "EXIT_HANG"]


def add_parser(sub) -> None:
    """Add the ``diagnose`` command to the subparsers."""
    p = sub.add_parser("diagnose", help="find stragglers and hung ranks in a run's timing records",
                       description=__doc__.splitlines()[0],
                       epilog="exit status: 0 nothing found, 5 stragglers or slow links, 6 a hang, 3 bad input")
    p.add_argument("run_dir", type=path_arg, help="run folder holding events/ (written by the engine)")
    p.add_argument("--rankmap", type=path_arg, required=True, help="the run's rankmap.json")
    p.add_argument("--run-id", help="which run under RUN_DIR/events/ (default: the newest)")
    p.add_argument("--out", type=out_folder, help="output folder (default RUN_DIR/diagnosis)")
    p.add_argument("--z", type=positive_float, default=5.0, help="robust z-score to flag (default 5)")
    p.add_argument("--min-ratio", type=positive_float, default=1.5,
                   help="flag only at this many times the median (1.5)")
    p.add_argument("--min-excess", type=non_negative_float, default=0.05, help="and this many seconds above it (0.05)")
    p.add_argument("--min-step-fraction", type=step_fraction, default=0.2,
                   help="name a rank late to collectives only when it is late by this share of the median step "
                        "time or more, in three steps of four (0..1, default 0.2)")
    add_json_arg(p)
    p.set_defaults(func=run_diagnose)


def step_fraction(text: str) -> float:
    """``--min-step-fraction``: a number in [0, 1] (argparse names the flag in its one-line error)."""
    try:
        value = float(text) if len(text) <= 64 else math.nan
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text[:64]!r}")
    return value


def run_diagnose(args: argparse.Namespace) -> int:
    from rankmap import api
    from rankmap.fileio import atomic_write_files

    rm = api.read_rankmap(args.rankmap)
    run = api.diagnose(args.run_dir, rm, z=args.z, min_ratio=args.min_ratio, min_excess_s=args.min_excess,
                       min_step_fraction=args.min_step_fraction, run_id=args.run_id)
    s = run.summary
    code = EXIT_HANG if s["hang"] is not None else EXIT_STRAGGLERS if s["flags"] else EXIT_OK
    atomic_write_files(args.out or args.run_dir / "diagnosis", run.files,
                       before_commit=report_before_commit(lambda written: _report(args, run, written, code)))
    return code


def _report(args: argparse.Namespace, run, written, code: int) -> None:
    """Print the diagnosis (or its JSON) for the files about to be ``written``."""
    from rankmap.cli.report import print_diagnosis

    s = run.summary
    for warning in s["warnings"]:
        print(f"rankmap: warning: {warning}", file=sys.stderr)
    if args.json:
        from rankmap.cli.report import print_json
        print_json({**s, "outputs": [str(p) for p in written], "exit_status": code})
        return
    offsets = ", ".join(f"{h} {1e3 * v:+.1f} ms" for h, v in s["clock_offsets_s"].items())
    print(f"run {s['run_id'] or '(flat events/)'}; clock offsets removed (from collective completion times): "
          f"{offsets or 'none'}")
    print_diagnosis(run.diagnosis, run.host_of, run.tor_of, written)
    for f in s["flags"]:
        if f["measure"] == "slow link":
            print(f"slow link: rank {f['who']} on {f['host']} (rail {f['rail']}, ToR group "
                  f"{run.tor_of.get(f['host'], '?')}): its {f['phase']} deliveries take "
                  f"{1e3 * f['value_s']:.1f} ms (lower quartile; typical sender {1e3 * f['typical_s']:.1f} ms)")
    if s["hang"] is not None:
        h = s["hang"]
        for c, host, rail, tor, state in zip(h["culprits"], h["culprit_hosts"], h["culprit_rails"],
                                             h["culprit_tor_groups"], h["culprit_state"]):
            print(f"culprit: rank {c} on {host}, rail {rail}, ToR group {tor}: {state}")
        print(f"victims ({len(h['waiting'])} ranks blocked): {', '.join(map(str, h['waiting'])) or 'none'}")
