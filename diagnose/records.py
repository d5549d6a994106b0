"""Per-rank timing records and hang records: the files ranks write and ``rankmap diagnose`` reads.

Layout of a run folder::

    RUN_DIR/events/rank-00017.jsonl      one JSON object per timed event of rank 17
    RUN_DIR/events/hang-rank-00017.json  what rank 17 was waiting in when its watchdog fired

An event record::

    {"rank": 17, "host": "node03", "local_rank": 1, "step": 4, "phase": "forward",
     "group": null, "peers": [], "seq": 0, "start_s": 12.031, "dur_s": 0.184, "cpu_s": 0.181}

``phase`` is one of :data:`PHASES`; collectives carry their ``group`` kind (tp, pp, dp,
...), the global ranks of their ``peers`` and a per-group sequence number ``seq`` (the
n-th collective of that group on this rank). ``start_s`` is seconds on the rank's
wall clock since the epoch (``time.time()``), so ranks of one host share a clock;
``cpu_s`` (CPU runs; null on CUDA) is the thread's CPU time in the segment.
A hang record adds ``"since_s"`` (when the event began) and ``"timeout_s"``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rankmap.errors import RankmapError

__all__ = ["PHASES", "Event", "Hang", "event_path", "hang_path", "read_run", "RunRecords"]

# Phases timed by the engine (MegaScale, NSDI'24 §5: forward, backward, each collective by
# group, optimizer step). Compute phases first; the rest are communication.
COMPUTE = ("forward", "backward", "optimizer")
COMMS = ("tp-collective", "pp-send", "pp-recv", "dp-reduce-scatter", "dp-all-gather", "dp-all-reduce",
         "cp-collective", "ep-all-to-all", "loss-all-reduce")
PHASES = COMPUTE + COMMS


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

    def to_json(self) -> str:
        d = asdict(self)
        d["peers"] = list(self.peers)
        return json.dumps(d, sort_keys=True)


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


def event_path(run_dir: str | Path, rank: int) -> Path:
    return Path(run_dir) / "events" / f"rank-{rank:05d}.jsonl"


def hang_path(run_dir: str | Path, rank: int) -> Path:
    return Path(run_dir) / "events" / f"hang-rank-{rank:05d}.json"


@dataclass(frozen=True)
class RunRecords:
    """Everything the ranks of a run wrote."""

    events: tuple          # Event, in file order per rank, ranks ascending
    hangs: tuple           # Hang, ranks ascending
    ranks: tuple           # ranks that wrote anything


_EVENT_KEYS = {"rank", "host", "local_rank", "step", "phase", "start_s", "dur_s", "group", "peers", "seq"}
_OPTIONAL_KEYS = {"cpu_s"}


def read_run(run_dir: str | Path) -> RunRecords:
    """Read every rank's event and hang files of ``run_dir``.

    A last line cut short (a rank killed mid-write) is skipped; any other malformed line
    is an error.

    Raises
    ------
    RankmapError
        No events folder, or a malformed record (names the file and line).
    """
    folder = Path(run_dir) / "events"
    if not folder.is_dir():
        raise RankmapError(f"{run_dir}: no events/ folder (run the engine with timing on)")
    events: list[Event] = []
    ranks: set[int] = set()
    for path in sorted(folder.glob("rank-*.jsonl")):
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if (not isinstance(rec, dict) or not _EVENT_KEYS <= set(rec) <= _EVENT_KEYS | _OPTIONAL_KEYS
                        or rec["phase"] not in PHASES):
                    raise ValueError("not an event record")
                events.append(Event(**{**rec, "peers": tuple(rec["peers"])}))
                ranks.add(rec["rank"])
            except (ValueError, TypeError) as exc:
                if i >= len(lines) - 1 and not line.endswith("}"):
                    continue  # the rank died while writing its last line
                raise RankmapError(f"{path}:{i}: bad event record: {exc}") from None
    hangs = []
    for path in sorted(folder.glob("hang-rank-*.json")):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
            hangs.append(Hang(**{**rec, "peers": tuple(rec["peers"])}))
            ranks.add(rec["rank"])
        except (ValueError, TypeError, KeyError) as exc:
            raise RankmapError(f"{path}: bad hang record: {exc}") from None
    return RunRecords(tuple(events), tuple(hangs), tuple(sorted(ranks)))
