"""``rankmap diagnose RUN_DIR --rankmap rankmap.json``: stragglers, hangs, heat map, timeline.

Writes into ``--out`` (default ``RUN_DIR/diagnosis``), all or nothing: ``diagnosis.json``,
``heatmap.png``, ``trace.json`` (open in Perfetto or chrome://tracing) and
``constraints.yaml``, an exclusion list (flagged hosts; ToR groups whose ranks are slow
together get a quota of 0) that ``rankmap plan --constraints`` accepts. The work is
:func:`rankmap.api.diagnose`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankmap.cli.common import non_negative_float, positive_float
from rankmap.errors import EXIT_OK

__all__ = ["add_parser", "run_diagnose"]


def add_parser(sub) -> None:
    """Add the ``diagnose`` command to the subparsers."""
    p = sub.add_parser("diagnose", help="find stragglers and hung ranks in a run's timing records",
                       description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="run folder holding events/ (written by the engine)")
    p.add_argument("--rankmap", type=Path, required=True, help="the run's rankmap.json")
    p.add_argument("--out", type=Path, help="output folder (default RUN_DIR/diagnosis)")
    p.add_argument("--z", type=positive_float, default=5.0, help="robust z-score to flag (default 5)")
    p.add_argument("--min-ratio", type=positive_float, default=1.5,
                   help="flag only at this many times the median (1.5)")
    p.add_argument("--min-excess", type=non_negative_float, default=0.05, help="and this many seconds above it (0.05)")
    p.set_defaults(func=run_diagnose)


def run_diagnose(args: argparse.Namespace) -> int:
    from rankmap import api
    from rankmap.cli.report import print_diagnosis
    from rankmap.fileio import atomic_write_files

    rm = api.read_rankmap(args.rankmap)
    run = api.diagnose(args.run_dir, rm, z=args.z, min_ratio=args.min_ratio, min_excess_s=args.min_excess)
    written = atomic_write_files(args.out or args.run_dir / "diagnosis", run.files)
    print_diagnosis(run.diagnosis, run.host_of, run.tor_of, written)
    return EXIT_OK
