"""Every exception rankmap raises on purpose, and the command line's exit codes.

A user's mistake (a bad file, flag or value) or a request that cannot be met raises a
subclass of :class:`RankmapError`; the command line prints its message on one line and
exits with the class's :attr:`~RankmapError.exit_code`, showing a traceback only with
``--debug``. Anything else that escapes is a bug (exit 70). The tree, as networkx keeps
``networkx/exception.py``::

    RankmapError                    exit 3
    +-- UsageError                  exit 2: a flag's value is bad (found after argparse ran)
    +-- SpecError                   a file, key or value is bad (FILE:LINE: key: message)
    |   +-- RankMapFileError        a rank map file is malformed or made for another cluster
    |   +-- InfeasibleError         exit 4: constraints leave too few hosts
    |   +-- PlacementError          exit 4: the job cannot be placed as asked
    +-- TopologyError               a cluster model is inconsistent
    +-- OutputError                 exit 74: standard output cannot be written (disk full)
    +-- LaunchError                 a launch file cannot be written or read, a local run failed
    |   +-- RunTimedOut             exit 124: ``launch --local --timeout`` passed (as timeout(1))
    |   +-- RunTerminated           exit 143: ``launch --local`` got SIGTERM (128 + 15, as shells say)
    +-- EngineError                 the trainer cannot run as configured
        +-- PlacementMismatch       processes did not start where the rank map puts them
"""

from __future__ import annotations

__all__ = [
    "one_line", "EXIT_OK", "EXIT_USAGE", "EXIT_INPUT", "EXIT_INFEASIBLE", "EXIT_STRAGGLERS", "EXIT_HANG",
    "EXIT_INTERNAL", "EXIT_OUTPUT", "EXIT_TIMEOUT", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
    "RankmapError", "UsageError", "SpecError", "RankMapFileError", "InfeasibleError", "PlacementError", "TopologyError",
    "OutputError",
    "LaunchError", "RunTimedOut", "RunTerminated", "EngineError", "PlacementMismatch",
]

EXIT_OK = 0
EXIT_USAGE = 2          # argparse's own code for a bad command line
EXIT_INPUT = 3          # bad input: file, key, value or flag
EXIT_INFEASIBLE = 4     # the job cannot be placed as asked
EXIT_STRAGGLERS = 5     # rankmap diagnose: stragglers or slow links flagged
EXIT_HANG = 6           # rankmap diagnose: a hang was recorded (culprits named)
EXIT_INTERNAL = 70      # a bug (EX_SOFTWARE of sysexits.h)
EXIT_OUTPUT = 74        # standard output cannot be written (EX_IOERR of sysexits.h)
EXIT_TIMEOUT = 124      # rankmap launch --local: --timeout passed (GNU timeout(1)'s code)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143   # rankmap launch --local: stopped by SIGTERM (128 + SIGTERM, as a shell reports it)


def one_line(text: str) -> str:
    r"""``text`` with line breaks, tabs and other control characters (and terminal escapes)
    written as Python escapes, so that a message is one line however hostile its input.

    >>> print(one_line("bad name 'n1\nid'\t\x1b[31m"))
    bad name 'n1\nid'\t\x1b[31m
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class RankmapError(Exception):
    """Base class of every error caused by input or by an infeasible request; its message is
    always one line (:func:`one_line`)."""

    exit_code = EXIT_INPUT

    def __str__(self) -> str:
        return one_line(super().__str__())


class UsageError(RankmapError):
    """A command-line flag's value is bad, found once argparse has run (e.g. a weight of
    ``--objective``); exits 2 like argparse's own errors. The message names the flag."""

    exit_code = EXIT_USAGE


class SpecError(RankmapError):
    """A specification file (or mapping) holds a bad key or value.

    Parameters
    ----------
    message : str
        What is wrong, in words.
    source : str, optional
        File name (or ``"<inline>"``) the value came from.
    line : int, optional
        1-based line of the offending key or value.
    key : str, optional
        Dotted key path, e.g. ``"links.tor_uplinks"``.

    Examples
    --------
    >>> str(SpecError("must be positive, got -1", source="c.yaml", line=4, key="links.nic_gbps"))
    'c.yaml:4: links.nic_gbps: must be positive, got -1'
    """

    def __init__(self, message: str, *, source: str | None = None,
                 line: int | None = None, key: str | None = None):
        self.message = message
        self.source = source
        self.line = line
        self.key = key
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.source:
            where = self.source + (f":{self.line}" if self.line else "") + ": "
        key = f"{self.key}: " if self.key else ""
        return one_line(f"{where}{key}{self.message}")


class RankMapFileError(SpecError):
    """A rank map file is malformed, inconsistent, or made for another cluster."""


class InfeasibleError(SpecError):
    """The request cannot be met: the message names the constraint, the ToR groups and the shortfall."""

    exit_code = EXIT_INFEASIBLE


class PlacementError(SpecError):
    """The job cannot be placed as asked (not rail-aligned, unsupported shape, too few hosts);
    ``source`` and ``key`` name the job file and the parallel setting at fault."""

    exit_code = EXIT_INFEASIBLE


class TopologyError(RankmapError):
    """A cluster model is inconsistent (duplicate host, host in two ToR groups, ...)."""


class OutputError(RankmapError):
    """Standard output cannot be written (``> /dev/full``, a full disk): the report is lost,
    so the run's files are not committed either."""

    exit_code = EXIT_OUTPUT


class LaunchError(RankmapError):
    """A launch file cannot be generated or read (bad or unresolvable host, bad line), or a local run failed."""


class RunTimedOut(LaunchError):
    """A local run passed its ``--timeout`` and was stopped: exit 124, the code GNU ``timeout``
    returns, so a wrapper tells a slow or hung run from bad input."""

    exit_code = EXIT_TIMEOUT


class RunTerminated(LaunchError):
    """A local run was stopped by SIGTERM (``kill``, a scheduler's preemption): exit 143, what a
    shell reports for a command killed by SIGTERM (128 + 15), after its processes are stopped."""

    exit_code = EXIT_TERMINATED


class EngineError(RankmapError):
    """The engine cannot run as configured (bad config, unsupported layout, ...)."""


class PlacementMismatch(EngineError):
    """The processes did not start where the rank map puts them (raised on every rank alike)."""
