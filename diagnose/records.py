"""Per-rank timing records and hang records: the files ranks write and ``rankmap diagnose`` reads.

Layout of a run folder (each run of the engine gets its own ``RUN_ID``, a UTC time stamp
and a random suffix, so no run appends to an earlier run's files)::

    RUN_DIR/events/RUN_ID/rank-00017.jsonl       one JSON object per timed event of rank 17
    RUN_DIR/events/RUN_ID/hang-rank-00017.json   what rank 17 was in when its watchdog fired
    RUN_DIR/events/RUN_ID/stacks-rank-00017.txt  its Python stacks then (faulthandler)
    RUN_DIR/events/RUN_ID/fr-rank-00017.json     its c10d flight recorder then (when enabled)

:func:`read_run` reads the newest run (or a given one); a flat ``RUN_DIR/events/`` holding
the files directly is read as one run.

An event record::

    {"rank": 17, "host": "node03", "local_rank": 1, "step": 4, "phase": "forward",
     "group": null, "peers": [], "seq": 0, "start_s": 12.031, "dur_s": 0.184, "cpu_s": 0.181}

``phase`` is a compute phase (:data:`COMPUTE`), the forward-backward span of a step
(``"forward-backward"``, the parent of its forwards in the timeline; not analysed), or an
operation ``KIND-OP`` (:func:`is_comm_phase`): ``KIND`` the process group's kind (tp, cp,
ep, dp, pp, world, other) or the engine's label (loss, grad-norm), ``OP`` one of
:data:`OPS`. Operations carry their ``group`` kind, ``peers`` -- the group's global ranks,
or ``[src, dst]`` for a P2P send or receive -- and ``seq``: the n-th operation of this rank
on that group (for P2P: the n-th from ``src`` to ``dst``). ``start_s`` is seconds on the rank's
wall clock since the epoch (``time.time()``), so ranks of one host share a clock;
``cpu_s`` (CPU runs; null on CUDA) is the thread's CPU time in the segment; an operation
may add ``wait_s``, the seconds the rank was blocked in it (issue and wait; less than
``dur_s`` for an asynchronous operation waited for later).
A hang record adds ``"since_s"`` (when the rank last made progress, or began the
operation it is blocked in), ``"timeout_s"`` and ``"state"``: ``collective`` (blocked in
the operation named by phase, group, peers and seq), ``compute`` (inside that phase) or
``idle`` (between phases).

Writing (the engine's phase timer, :mod:`rankmap.engine.timing`, calls these; no torch here):
:func:`new_event` and :func:`new_hang` round times to the microsecond,
:func:`events_dir` names a run's folder, :func:`open_event_log` creates a rank's event file
(line-buffered: each record reaches the file as it is written), :func:`append_event` adds
one line, :func:`write_hang` writes a hang record atomically. Reading: :func:`read_run`.

References
----------
.. [1] Z. Jiang et al., "MegaScale: Scaling Large Language Model Training to More Than 10,000
   GPUs", NSDI 2024, section 5 (per-rank timing of forward, backward, collectives and
   optimizer; hang localisation). https://www.usenix.org/conference/nsdi24/presentation/jiang-ziheng
.. [2] JSON Lines. https://jsonlines.org/
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from rankmap.errors import RankmapError
from rankmap.fileio import atomic_write_text

__all__ = ["COMPUTE", "COMMS", "PHASES", "OPS", "SPAN", "is_comm_phase", "Event", "Hang", "events_dir", "event_path",
           "hang_path", "new_event", "new_hang", "open_event_log", "append_event", "write_hang", "read_run",
           "run_ids", "RunRecords"]

# Phases timed by the engine (MegaScale, NSDI'24 §5: forward, backward, each collective by
# group, optimizer step). Compute phases first; the rest are communication.
COMPUTE = ("forward", "backward", "optimizer")
COMMS = ("tp-collective", "pp-send", "pp-recv", "dp-reduce-scatter", "dp-all-gather", "dp-all-reduce",
         "cp-collective", "ep-all-to-all", "loss-all-reduce")
PHASES = COMPUTE + COMMS
SPAN = "forward-backward"
OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "barrier", "send", "recv")
_COMM_RE = re.compile(r"^(tp|cp|ep|dp|pp|world|other|loss|grad-norm)-(" + "|".join(OPS) + r")$")


def is_comm_phase(phase: str) -> bool:
    """True for an operation's phase name (``KIND-OP``, or one of :data:`COMMS`).

    Examples
    --------
    >>> is_comm_phase("tp-all-gather"), is_comm_phase("pp-send"), is_comm_phase("forward")
    (True, True, False)
    """
    return phase in COMMS or _COMM_RE.match(phase) is not None


def _known_phase(phase: str) -> bool:
    return phase in COMPUTE or phase == SPAN or is_comm_phase(phase)


@dataclass(frozen=True)
class Event:
    """One timed code segment of one rank (durations in seconds)."""

    rank: int
    host: str
    local_rank: int
    step: int
    phase: str
    start_s: float
    dur_s: float
    group: str | None = None
    peers: tuple = field(default_factory=tuple)
    seq: int = 0
    cpu_s: float | None = None
    wait_s: float | None = None

    def to_json(self) -> str:
        # A literal, not dataclasses.asdict (which deep-copies): this runs for every record.
        d = {"rank": self.rank, "host": self.host, "local_rank": self.local_rank, "step": self.step,
             "phase": self.phase, "start_s": self.start_s, "dur_s": self.dur_s, "group": self.group,
             "peers": list(self.peers), "seq": self.seq, "cpu_s": self.cpu_s}
        if self.wait_s is not None:
            d["wait_s"] = self.wait_s
        return _ENCODE(d)


@dataclass(frozen=True)
class Hang:
    """The event a rank was stuck in when its watchdog fired."""

    rank: int
    host: str
    local_rank: int
    step: int
    phase: str
    group: str | None
    peers: tuple
    seq: int
    since_s: float
    timeout_s: float
    state: str = "collective"

    def to_json(self) -> str:
        d = asdict(self)
        d["peers"] = list(self.peers)
        return json.dumps(d, sort_keys=True)


def events_dir(run_dir: str | Path, run_id: str) -> Path:
    """``RUN_DIR/events/RUN_ID``: the folder of one run's records."""
    return Path(run_dir) / "events" / run_id


def event_path(folder: str | Path, rank: int) -> Path:
    """A rank's event file in a run's records folder (:func:`events_dir`)."""
    return Path(folder) / f"rank-{rank:05d}.jsonl"


def hang_path(folder: str | Path, rank: int) -> Path:
    """A rank's hang record in a run's records folder (:func:`events_dir`)."""
    return Path(folder) / f"hang-rank-{rank:05d}.json"


_ENCODE = json.JSONEncoder(sort_keys=True).encode


def _us(seconds: float) -> float:
    """Seconds rounded to the microsecond, as the record files hold them."""
    return round(seconds, 6)


def new_event(*, rank: int, host: str, local_rank: int, step: int, phase: str, start_s: float, dur_s: float,
              group: str | None = None, peers=(), seq: int = 0, cpu_s: float | None = None,
              wait_s: float | None = None) -> Event:
    """An event as it is written: ``start_s``, ``dur_s`` and ``cpu_s`` rounded to the microsecond.

    Examples
    --------
    >>> e = new_event(rank=3, host="n1", local_rank=1, step=2, phase="dp-all-reduce", start_s=12.0312341,
    ...               dur_s=0.1844444, group="dp", peers=[1, 3], seq=5)
    >>> e.start_s, e.dur_s, e.peers, e.cpu_s
    (12.031234, 0.184444, (1, 3), None)
    """
    return Event(rank=rank, host=host, local_rank=local_rank, step=step, phase=phase, start_s=_us(start_s),
                 dur_s=_us(dur_s), group=group, peers=tuple(peers), seq=seq,
                 cpu_s=None if cpu_s is None else _us(cpu_s), wait_s=None if wait_s is None else _us(wait_s))


def new_hang(*, rank: int, host: str, local_rank: int, step: int, phase: str, group: str | None, peers, seq: int,
             since_s: float, timeout_s: float, state: str = "collective") -> Hang:
    """A hang record as it is written: ``since_s`` rounded to the microsecond, ``timeout_s`` as given."""
    return Hang(rank=rank, host=host, local_rank=local_rank, step=step, phase=phase, group=group,
                peers=tuple(peers), seq=seq, since_s=_us(since_s), timeout_s=timeout_s, state=state)


def open_event_log(folder: str | Path, rank: int) -> TextIO:
    """Create a rank's event file in ``folder`` (made if missing), line-buffered.

    Raises
    ------
    RankmapError
        The file exists already (records of an earlier run are never appended to), or it
        cannot be made.
    """
    path = event_path(folder, rank)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "x", encoding="utf-8", buffering=1)
    except FileExistsError:
        raise RankmapError(f"{path}: exists already; every run writes a new run folder") from None
    except OSError as exc:
        raise RankmapError(f"{path}: cannot create the event file: {exc.strerror}") from None


def append_event(log: TextIO, event: Event) -> None:
    """Append one event line to an open event log.

    Examples
    --------
    >>> import io
    >>> log = io.StringIO()
    >>> append_event(log, new_event(rank=0, host="h", local_rank=0, step=1, phase="forward", start_s=1.0,
    ...                             dur_s=0.5))
    >>> print(log.getvalue(), end="")
    {"cpu_s": null, "dur_s": 0.5, "group": null, "host": "h", "local_rank": 0, "peers": [], "phase": "forward", "rank": 0, "seq": 0, "start_s": 1.0, "step": 1}
    """
    log.write(event.to_json() + "\n")


def write_hang(folder: str | Path, hang: Hang) -> Path:
    """Write ``hang-rank-NNNNN.json`` into a run's records folder atomically; returns its path.

    Raises
    ------
    RankmapError
        The file cannot be written.
    """
    path = hang_path(folder, hang.rank)
    atomic_write_text(path, hang.to_json() + "\n")
    return path


@dataclass(frozen=True)
class RunRecords:
    """Everything the ranks of a run wrote."""

    events: tuple          # Event, in file order per rank, ranks ascending
    hangs: tuple           # Hang, ranks ascending
    ranks: tuple           # ranks that wrote anything
    run_id: str = ""       # the run folder's name ("" for a flat events/ folder)
    problems: tuple = ()   # str: record files that could not be read, or were cut short, each named


_EVENT_KEYS = {"rank", "host", "local_rank", "step", "phase", "start_s", "dur_s", "group", "peers", "seq"}
_OPTIONAL_KEYS = {"cpu_s", "wait_s"}


def run_ids(run_dir: str | Path) -> list[str]:
    """The run ids under ``RUN_DIR/events/``, oldest first (ids begin with a UTC time stamp)."""
    folder = Path(run_dir) / "events"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def read_run(run_dir: str | Path, run_id: str | None = None) -> RunRecords:
    """Read every rank's event and hang files of one run of ``run_dir`` (default: the newest).

    A last line cut short (a rank killed mid-write) is skipped; any other malformed line
    is an error.

    Raises
    ------
    RankmapError
        No events folder, no such run, or a malformed record (names the file and line).
    """
    top = Path(run_dir) / "events"
    if not top.is_dir():
        raise RankmapError(f"{run_dir}: no events/ folder (run the engine with timing on)")
    ids = run_ids(run_dir)
    if run_id is not None and run_id not in ids:
        raise RankmapError(f"{run_dir}: no run {run_id!r} in events/ (runs: {', '.join(ids) or 'none'})")
    run_id = run_id or (ids[-1] if ids and not any(top.glob("rank-*.jsonl")) else "")
    return _read_folder(top / run_id if run_id else top, run_id)


# A record file, or a look-alike of one: a name beginning (in any letter case) with "rank" or
# "hang-rank". Each is refused unless it bears the recorder's exact name, so that no renamed,
# copied or backed-up record (rank1.jsonl, Rank-00001.jsonl, rank-00001.jsonl.bak, ...~) is
# silently read twice or left out. Other files (stacks-rank-*, fr-rank-*, notes) are not records;
# hidden ones are atomic writes' temporaries.
_LOOKALIKE = re.compile(r"^(hang[-_]?)?rank", re.IGNORECASE)
_RANK = re.compile(r"^(?:hang[-_]?)?rank[-_]?(\d+)(?=\.|~|$)", re.IGNORECASE)


def _record_files(folder: Path, hang: bool, path_of) -> list[tuple[int, Path]]:
    """``(rank, path)`` of the event files (``hang``: hang records) in ``folder``, by rank.

    Every file whose name begins with ``rank`` (``hang-rank`` for hang records), in any letter
    case, must bear the name the recorder writes for its rank (``path_of(folder, rank)``:
    :func:`event_path`, :func:`hang_path`). A file renamed, copied or backed up by hand
    (``rank-1.jsonl``, ``Rank-00001.jsonl``, ``rank-00001.JSONL``, ``rank-00001.jsonl.bak``,
    ``rank-00001.jsonl~``, ``rank-00001.json``) would add a rank's events twice, or be left out
    unseen: it is an error naming it, and two files for one rank are an error naming both.

    Raises
    ------
    RankmapError
        Two files for one rank, or a record-like file whose name is not the recorder's.
    """
    by_rank: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        m = _LOOKALIKE.match(path.name)
        if m is None or path.name.startswith(".") or bool(m.group(1)) != hang:
            continue
        m = _RANK.match(path.name)
        if m is None:
            raise RankmapError(f"{path}: not a record file name (the recorder writes rank-NNNNN.jsonl and "
                               f"hang-rank-NNNNN.json, the rank in at least 5 digits): rename or remove it")
        rank = int(m.group(1))
        if rank in by_rank:
            raise RankmapError(f"{by_rank[rank]} and {path}: two files for rank {rank} (the recorder writes "
                               f"{path_of(folder, rank).name} only): remove the copy")
        by_rank[rank] = path
    for rank, path in by_rank.items():
        if path != path_of(folder, rank):
            raise RankmapError(f"{path}: not the name the recorder writes for rank {rank} "
                               f"({path_of(folder, rank).name}): renamed by hand? rename or remove it")
    return sorted(by_rank.items())


def _check_rank(path: Path, line: int, rec: dict, rank: int) -> None:
    """Refuse a record whose rank is not the one its file is named for (a renamed or copied
    file would otherwise add another rank's events to this one, or count a rank twice)."""
    if rec["rank"] != rank:
        raise RankmapError(f"{path}:{line}: holds a record of rank {rec['rank']!r} but the file name says rank "
                           f"{rank}: each rank writes only its own file (renamed or copied by hand?)")


def _read_folder(folder: Path, run_id: str) -> RunRecords:
    events: list[Event] = []
    ranks: set[int] = set()
    problems: list[str] = []
    for rank, path in _record_files(folder, False, event_path):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        except OSError as exc:
            problems.append(f"{path}: cannot read: {exc.strerror}: rank {rank} left out")
            continue
        found = 0
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if (not isinstance(rec, dict) or not _EVENT_KEYS <= set(rec) <= _EVENT_KEYS | _OPTIONAL_KEYS
                        or not _known_phase(rec["phase"])):
                    raise ValueError("not an event record")
                event = Event(**{**rec, "peers": tuple(rec["peers"])})
            except (ValueError, TypeError) as exc:
                if i >= len(lines) - 1 and not line.endswith("}"):  # the rank died while writing its last line
                    problems.append(f"{path}:{i}: last line cut short after {len(line)} bytes: skipped"
                                    + ("" if found else f"; no complete record: rank {rank} left out"))
                    continue
                raise RankmapError(f"{path}:{i}: bad event record: {exc}") from None
            _check_rank(path, i, rec, rank)
            events.append(event)
            ranks.add(rank)
            found += 1
        if not any(line.strip() for line in lines):
            problems.append(f"{path}: empty: rank {rank} left out")
    hangs = []
    for rank, path in _record_files(folder, True, hang_path):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
            hang = Hang(**{**rec, "peers": tuple(rec["peers"])})
        except OSError as exc:
            raise RankmapError(f"{path}: cannot read hang record: {exc.strerror}") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise RankmapError(f"{path}: bad hang record: {exc}") from None
        _check_rank(path, 1, rec, rank)
        hangs.append(hang)
        ranks.add(rank)
    return RunRecords(tuple(events), tuple(hangs), tuple(sorted(ranks)), run_id, tuple(problems))
