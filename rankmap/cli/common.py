"""What the subcommands share: argparse value types (each refuses a bad value with one line),
the embedded-example options, and the constraint options."""

from __future__ import annotations

import argparse
import errno
import math
import os
import sys
from pathlib import Path

from rankmap.errors import OutputError, UsageError

__all__ = ["MAX_COUNT", "int_in", "positive_int", "non_negative_int", "seed_int", "non_negative_float", "fraction",
           "positive_float", "port", "dp_size", "hostlist_arg", "hostname_arg", "out_folder", "out_file", "out_png",
           "comma_items", "objectives", "objective_names", "tier_weights_arg", "labels", "add_json_arg",
           "add_example_args", "example_inputs", "add_constraint_args", "constraints_from_args", "silence_stdout",
           "stdout_error", "report_before_commit"]


MAX_COUNT = 2**31 - 1  # every count flag fits a C int (CP-SAT and NumPy take them as such)
MAX_WEIGHT = 1e12  # objective and tier weights: rankmap.placement.objectives.MAX_WEIGHT (not imported: a light module)


def _number(text: str, kind, what: str):
    if len(text) > 64:  # int() of 4,300+ digits raises its own ValueError; no count or size needs 64
        raise argparse.ArgumentTypeError(f"expected {what}, got {len(text)} characters")
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def int_in(low: int, high: int, what: str):
    """An argparse type: an integer in ``low .. high``."""
    def parse(text: str) -> int:
        value = _number(text, int, f"{what} ({low}..{high})")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} ({low}..{high}), got {text!r}")
        return value
    parse.__name__ = what
    return parse


def positive_int(text: str) -> int:
    """An integer in 1 .. 2**31 - 1."""
    value = _number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected a positive integer below 2**31, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds, counts)."""
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected an integer below 2**31, got {text!r}")
    return value


def seed_int(text: str) -> int:
    """A seed: an integer in 0 .. 2**31 - 1 (what CP-SAT and NumPy both take)."""
    value = _number(text, int, "a seed (an integer in 0..2**31 - 1)")
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"expected a seed below 2**31, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text, float, "a number >= 0")
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (speeds in Gb/s, time limits)."""
    value = _number(text, float, "a positive number")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = _number(text, float, "a number in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port number, 1..65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 1..65535, got {text!r}")
    return value


def path_arg(text: str) -> Path:
    """A file or folder flag's value: an empty or blank one (``--reserve=``, ``--rankmap "$MAP"`` with
    ``MAP`` unset) names nothing, and is a usage error rather than the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"no file given (got {text!r})")
    return Path(text)


def hostlist_arg(text: str) -> str:
    """A hostlist flag's value (``n[1-4]``, or ``@FILE`` where the flag takes one), checked only
    for being there: an empty or blank value names no host, and a flag given with no host is a
    usage error, not "no restriction" (``--hosts ''`` from an empty shell variable). The hostlist
    itself is expanded (and refused with its key) where it is used."""
    if not text.replace(",", " ").strip():
        raise argparse.ArgumentTypeError(f"no hosts given (got {text!r})")
    if text.strip() == "@":
        raise argparse.ArgumentTypeError("no hosts given: expected @FILE, got '@'")
    if not text.startswith("@"):
        comma_items(text, "hostlists", split=_outer_items)
        from rankmap.errors import SpecError
        from rankmap.topology.hostnames import expand_hostlist
        try:  # its syntax, names and duplicates (n[1-2],n2) are the flag's value: a usage error
            expand_hostlist(text)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None
    return text


def _outer_items(hostlist: str) -> list[str]:
    """The comma-separated hostlists of ``hostlist``: ``n[1,3],m1`` -> ``["n[1,3]", "m1"]``."""
    items, depth, start = [], 0, 0
    for at, char in enumerate(hostlist):
        depth += (char == "[") - (char == "]")
        if char == "," and depth <= 0:
            items.append(hostlist[start:at])
            start = at + 1
    return items + [hostlist[start:]]


def hostname_arg(text: str) -> str:
    """One host name or address (``--host``, ``--master-addr``): an empty value (``--host
    "$NODE_NAME"`` with the variable unset) is refused, not taken as "use the default"."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"no host given (got {text!r})")
    from rankmap.names import host_problem
    why = host_problem(text)  # the grammar launch checks hosts with (rankmap.launch.common.check_host)
    if why:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a valid hostname or IP address: {why}")
    return text


def _some_path(text: str) -> Path:
    """Refuse an empty or blank path: ``Path('')`` is ``.``, so ``--out ''`` from an unset shell
    variable would otherwise write into the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"no path given (got {text!r})")
    return Path(text)


def out_file(text: str) -> Path:
    """An output file path (``topo import/export --out``: ``-`` is standard output): not empty,
    and not ending in ``/``, which names a folder (``Path('x.yaml/')`` is ``x.yaml``, so the
    file would be written where the user asked for a folder)."""
    path = _some_path(text)
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text!r} ends in '/', which names a folder: --out names the file to "
                                         "write (drop the '/')")
    return path


def out_folder(text: str) -> Path:
    """An output folder path: not empty (see :func:`out_file`), and not ``-``, which elsewhere
    (``topo export --out -``) means standard output, while a command writing several files
    would make a folder named ``-``; ``./-`` still names that folder."""
    if text == "-":
        raise argparse.ArgumentTypeError("'-' is not standard output here: --out names a folder (this command "
                                         "writes several files); give a folder, or ./- for a folder named '-'")
    return _some_path(text)


def out_png(text: str) -> Path:
    """A PNG file to write (``show --out``): the picture is PNG, so the name must end in ``.png``
    (a ``.jpg`` name holding PNG data misleads every viewer that trusts suffixes)."""
    path = out_file(text)
    if text == "-":
        raise argparse.ArgumentTypeError("'-' is not supported: --out names the PNG file to write")
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"the picture is PNG: give a file name ending in .png (got {text!r})")
    return path


def dp_size(text: str):
    """A dp size, or ``auto`` (fill the free GPUs)."""
    return "auto" if text == "auto" else positive_int(text)


def comma_items(text: str, what: str, name=lambda item: item, split=lambda text: text.split(",")) -> tuple[str, ...]:
    """The items of a comma-separated flag value, stripped (every comma-list flag reads its value
    through this). ``name(item)`` is what two items must not share (the tier of ``spine=1``);
    ``split`` cuts the value at its separating commas (not those inside a hostlist's brackets).

    Raises
    ------
    argparse.ArgumentTypeError
        An empty value, an empty item (``A,,B``, ``A,``: a shell variable that was unset) or an
        item given twice (``tiers,tiers``; ``spine=1,spine=2``): argparse prefixes the flag (exit 2).

    Examples
    --------
    >>> comma_items(" tiers, uplink", "objectives")
    ('tiers', 'uplink')
    """
    items = tuple(item.strip() for item in split(text))
    if items == ("",):
        raise argparse.ArgumentTypeError(f"no {what} given (got {text!r})")
    seen: dict = {}
    for number, item in enumerate(items, 1):
        if not item:
            raise argparse.ArgumentTypeError(f"item {number} of {text!r} is empty (expected {what} separated by "
                                             f"single commas)")
        key = name(item)
        if key in seen:
            raise argparse.ArgumentTypeError(f"{key!r} is given twice in {text!r} (items {seen[key]} and {number})")
        seen[key] = number
    return items


def _term_name(item: str) -> str:
    return item.partition("=")[0].strip()


def _weighted(item: str, what: str) -> tuple[str, float]:
    """``NAME=WEIGHT`` -> ``(NAME, WEIGHT)``; ArgumentTypeError unless 0 <= WEIGHT <= :data:`MAX_WEIGHT`."""
    name, _, weight = item.partition("=")
    try:
        value = float(weight) if len(weight) <= 64 else math.nan
    except ValueError:
        value = math.nan
    # weights are relative, and 1e308 x bytes overflows to inf: at most MAX_WEIGHT
    if not (math.isfinite(value) and 0 <= value <= MAX_WEIGHT) or not name.strip():
        raise argparse.ArgumentTypeError(f"bad {what} {item!r} (want NAME=WEIGHT with a finite weight >= 0 and "
                                         f"<= {MAX_WEIGHT:g})")
    return name.strip(), value


def objectives(text: str) -> tuple:
    """``--objective``: ``bytes,uplink`` (lexicographic) or ``bytes=1,uplink=0.5`` (weighted sum),
    as the planner takes them: ``("bytes", "uplink")``, ``(("bytes", 1.0), ("uplink", 0.5))``.
    An argparse type: a bad value is an ArgumentTypeError (exit 2), so is a weighted sum the
    planner refuses (:func:`rankmap.placement.objectives.weighting_problem`: ``top-first=1``,
    bytes added to counts as in ``moved=10,tiers=1``, a weight above 1e12)."""
    out = [_weighted(item, "term") if "=" in item else item for item in comma_items(text, "objectives", _term_name)]
    from rankmap.placement.objectives import weighting_problem

    weights = [term[1] for term in out if isinstance(term, tuple)]
    if weights and not any(weights):  # the weighted sum is 0 for every placement: those terms do nothing
        raise argparse.ArgumentTypeError(f"every weight of {text!r} is 0, so the weighted terms score every "
                                         "placement the same; give at least one weight > 0")
    problem = weighting_problem(tuple(out))  # top-first=W, bytes + counts, a weight that can overflow
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return tuple(out)


def objective_names(goals: tuple) -> list[str]:
    """The objective names of :func:`objectives`' value, in order."""
    return [g[0] if isinstance(g, tuple) else g for g in goals]


def tier_weights_arg(text: str) -> dict:
    """``--tier-weights``: ``spine=1,core=3`` -> ``{"spine": 1.0, "core": 3.0}`` (an argparse type).

    The names are checked against the cluster's tiers where it is loaded
    (:func:`rankmap.placement.tier_weights.tier_weights`)."""
    return dict(_weighted(item, "tier weight") for item in comma_items(text, "tier weights", _term_name))


def labels(text: str) -> tuple[str, ...]:
    """``--levels``: label keys separated by commas, top level first (an argparse type)."""
    return comma_items(text, "label keys")


def add_json_arg(p: argparse.ArgumentParser) -> None:
    """``--json``: the result as one JSON document on stdout instead of tables (warnings stay on stderr)."""
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON document on stdout instead of tables")


def add_example_args(p: argparse.ArgumentParser, cluster_help: str, job_help: str) -> None:
    """``--cluster``, ``--job`` and ``--example`` (the embedded example for whichever is missing)."""
    p.add_argument("--cluster", type=path_arg, help=cluster_help)
    p.add_argument("--job", type=path_arg, help=job_help)
    from rankmap.examples import DEFAULT_EXAMPLE, example_names

    names = example_names()
    example = p.add_argument("--example", default=None, metavar="NAME",
                             help=f"use an embedded example's cluster and job: {', '.join(names)} "
                                  f"(default {DEFAULT_EXAMPLE}, for whichever of --cluster and --job is not given; "
                                  f"not combined with them)")
    example.completions = names  # offered by `rankmap completion bash`; a wrong name gets the one-line error


def example_inputs(args: argparse.Namespace, job_from: str | None = None) -> tuple[Path, Path]:
    """Cluster and job spec paths from ``--cluster``/``--job``, else the embedded example's
    (``--example``, or the default example for whichever of the two is missing).

    ``job_from`` names another flag that gives the job instead (``--rankmap`` of simulate: with
    ``--example`` alone, the map's job on the example's cluster). Raises UsageError (exit 2) when
    ``--example`` is given beside ``--cluster`` or ``--job``: an example is a cluster and its job together, and half of one silently mixed
    with another file (``--cluster tree.yaml --example racks`` planning racks' job on tree) is
    rarely what was meant.
    """
    from rankmap.examples import example_inputs as _inputs

    given = ["--cluster"] if args.cluster is not None else []
    if args.job is not None or (given and job_from):  # --example NAME --rankmap M: the map's job on NAME's cluster
        given.append("--job" if args.job is not None else job_from)
    if args.example is not None and given:
        raise UsageError(f"--example {args.example} conflicts with {' and '.join(given)}: an example is a cluster "
                         f"and its job together; give --example alone, or the files (--cluster CLUSTER.yaml "
                         f"--job JOB.yaml)")
    return _inputs(args.example, args.cluster, args.job)


def add_constraint_args(p: argparse.ArgumentParser) -> None:
    """``--exclude``, ``--reserve`` (repeatable) and ``--constraints``."""
    p.add_argument("--exclude", type=hostlist_arg, help="hostlist of hosts not to use")
    p.add_argument("--reserve", type=path_arg, action="append", default=[],
                   help="rankmap.json of a running job whose hosts are taken (repeatable)")
    p.add_argument("--constraints", type=path_arg, help="constraints YAML: exclude, reserve, quotas, pins")


def constraints_from_args(args: argparse.Namespace, cluster):
    """Constraints from --constraints, --exclude and --reserve, combined (:func:`rankmap.api.combine_constraints`)."""
    from rankmap.api import combine_constraints, load_constraints

    base = load_constraints(args.constraints, cluster) if args.constraints else None
    allocation = getattr(args, "allocation", None)
    return combine_constraints(cluster, base, args.exclude, tuple(args.reserve),
                               allocation or getattr(args, "hosts", None), allocated=bool(allocation))


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (e.g. captured in a test)
        pass


def stdout_error(exc: OSError) -> OutputError | None:
    """The :class:`OutputError` for ``exc`` when it came from writing standard output
    (``> /dev/full``, a full disk, an I/O error), else None; stdout is silenced then.

    Files rankmap writes go through :mod:`rankmap.fileio`, which names them; an unnamed
    ENOSPC/EDQUOT/EFBIG/EIO can only come from the standard streams.
    """
    if exc.filename is not None or exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
        return None
    silence_stdout()
    return OutputError(f"standard output: cannot write: {exc.strerror or exc}")


def report_before_commit(report):
    """A ``before_commit`` callback for :func:`rankmap.fileio.atomic_write_files`: print the
    report (``report(paths)``) and flush stdout while the files are staged, so a report that
    cannot be written (``> /dev/full``) leaves no outputs, as any failed run. A closed pipe
    (``| head -1``) is no error: the rest of the text is dropped and the files are written."""
    def before_commit(paths) -> None:
        try:
            report(paths)
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
        except OSError as exc:
            silence_stdout()
            raise OutputError(f"standard output: cannot write the report: {exc.strerror or exc}; "
                              f"no output file was written") from None
    return before_commit
