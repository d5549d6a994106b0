"""The ``rankmap`` command: the only place that reads argv.

One parser; each command module adds its subcommand and binds it to a function with
``set_defaults(func=...)``. Commands parse, call the library (:mod:`rankmap.api`) and print
(:mod:`rankmap.cli.report`). Exit codes (:mod:`rankmap.errors`): 0 success; 2 usage error;
3 invalid input (bad spec, rank map or file); 4 infeasible (the job cannot be placed as
asked); 70 internal error (a bug: rerun with ``--debug`` for the traceback); 130 interrupted
(Ctrl-C); 124 and 143 ``launch --local`` stopped by its ``--timeout`` or by SIGTERM; 74 standard output cannot be written (``> /dev/full``: commands that write files
print their report before committing them, so then no file is written). A closed standard
output (``rankmap plan | head -1``) is not an error: the rest of the text is dropped, the
outputs are written and the exit is 0.
``rankmap`` alone prints this help.
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback
from importlib.metadata import PackageNotFoundError, version

from rankmap.cli import completion, diagnose, launch, noderank, plan, simulate, topo
from rankmap.cli.common import silence_stdout, stdout_error
from rankmap.errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, RankmapError

__all__ = ["build_parser", "main"]


def _version() -> str:
    try:
        return version("rankmap")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, saying a bad command line in one line and where the help is, instead of
    the usage text above the error (10+ lines for ``plan``). Subcommands get the same class
    (``add_subparsers`` makes its parsers of the parent's type)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def _print_message(self, message: str, file=None) -> None:
        """Write as argparse does, but let a failed write raise (argparse drops OSError, so
        ``rankmap --help > /dev/full`` exited 0): :func:`main` reports it as exit 74."""
        if message:
            (file or sys.stderr).write(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``rankmap`` parser with every subcommand; ``--debug`` is taken before or after the command."""
    parser = _Parser(prog="rankmap", description="Plan rank placement for 3D-parallel LLM training.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"rankmap {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    plan.add_parsers(sub)
    topo.add_parser(sub)
    simulate.add_parser(sub)
    diagnose.add_parser(sub)
    launch.add_parser(sub)
    noderank.add_parser(sub)
    plan.add_verify_parser(sub)
    plan.add_show_parser(sub)
    completion.add_parser(sub)
    parser.set_defaults(root_parser=parser)
    for command in sub.choices.values():
        _add_debug(command)
    return parser


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after a command too (SUPPRESS keeps a value given before the command)."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    for action in parser._actions:  # topo's verbs
        if isinstance(action, argparse._SubParsersAction):
            for verb in action.choices.values():
                _add_debug(verb)


_interrupted = False


def _on_sigint(signum, frame) -> None:
    """Ctrl-C: remember it (an extension module whose initialisation it stops reports ImportError
    "initialization failed", not KeyboardInterrupt) and raise KeyboardInterrupt as Python does."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``. ``--help``, ``--version`` and ``rankmap`` alone print and raise SystemExit(0),
    usage errors SystemExit(2); a standard output that cannot
    take the help or version text (``> /dev/full``) is SystemExit(74), as for every other output,
    and a closed one (``| head -1``) is no error."""
    try:
        try:
            args = parser.parse_args(argv)
            if args.command is None:  # `rankmap` alone, or global options only: say what there is
                parser.print_help()
                args = None
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
            args = None
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        raise SystemExit(0) from None
    except OSError as exc:
        error = stdout_error(exc)
        if error is None:
            raise
        print(f"rankmap: error: {error}", file=sys.stderr)
        raise SystemExit(error.exit_code) from None
    if args is None:
        raise SystemExit(0)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run ``rankmap`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = _parse(parser, argv)
    try:
        # From here Ctrl-C raises KeyboardInterrupt again (rankmap/__init__.py leaves at once
        # while modules load): output commits clean up on it and the line below reports it.
        if getattr(signal.getsignal(signal.SIGINT), "__module__", None) == "rankmap":  # the start-up handler
            signal.signal(signal.SIGINT, _on_sigint)
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:  # the reader went away (`| head`): outputs are written, drop the rest
        silence_stdout()
        return 0
    except RankmapError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"rankmap: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_INPUT)
    except KeyboardInterrupt:
        print("rankmap: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug, not the user's mistake
        if _interrupted:  # Ctrl-C inside a module's initialisation comes out as ImportError: still Ctrl-C
            print("rankmap: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        stdout = stdout_error(exc) if isinstance(exc, OSError) else None
        if stdout is not None:
            print(f"rankmap: error: {stdout}", file=sys.stderr)
            return stdout.exit_code
        if args.debug:
            traceback.print_exc()
        print(f"rankmap: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
