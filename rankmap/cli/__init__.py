"""The ``rankmap`` command: the only place that reads argv.

One parser; each command module adds its subcommand and binds it to a function with
``set_defaults(func=...)``. Commands parse, call the library (:mod:`rankmap.api`) and print
(:mod:`rankmap.cli.report`). Exit codes (:mod:`rankmap.errors`): 0 success; 2 usage error;
3 invalid input (bad spec, rank map or file); 4 infeasible (the job cannot be placed as
asked); 70 internal error (a bug: rerun with ``--debug`` for the traceback).
"""

from __future__ import annotations

import argparse
import sys
import traceback

from rankmap.cli import diagnose, launch, noderank, plan, simulate, topo
from rankmap.errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, RankmapError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rankmap`` parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="rankmap", description="Plan rank placement for 3D-parallel LLM training.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    plan.add_parsers(sub)
    topo.add_parser(sub)
    simulate.add_parser(sub)
    diagnose.add_parser(sub)
    launch.add_parser(sub)
    noderank.add_parser(sub)
    plan.add_verify_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``rankmap`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv or ["plan"])
    if args.command is None:  # global options only (e.g. --debug): the default command
        args = parser.parse_args(argv + ["plan"])
    try:
        return args.func(args)
    except RankmapError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"rankmap: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_INPUT)
    except KeyboardInterrupt:
        print("rankmap: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug, not the user's mistake
        if args.debug:
            traceback.print_exc()
        print(f"rankmap: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
