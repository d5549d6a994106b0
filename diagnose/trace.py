"""Chrome trace / Perfetto timeline of a run: one process per host, one thread per rank.

Format: the Trace Event Format's JSON object form (``{"traceEvents": [...]}``; Google,
"Trace Event Format", https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):

- complete events (``"ph": "X"``, ``ts`` and ``dur`` in microseconds) for the compute
  phases, the step's forward-backward span (its forwards nested inside; the backward time,
  which the timer derives as the span minus its forwards, is in its ``args``) and every
  collective and P2P operation. Slices of one thread must nest; an operation that
  overlaps a slice without nesting in it (an asynchronous all-gather waited for later)
  goes to the rank's next "async" thread;
- flow events (``"ph": "s"``, ``"t"``, ``"f"`` with one ``id`` per flow, ``"bp": "e"`` on
  the last) linking the members of each collective in order of arrival, and each P2P send
  to its receive -- MegaScale's "select an event, see its dependencies" (NSDI'24 §5.2);
- instant events (``"ph": "i"``) where a rank's watchdog found it stuck;
- ``process_name`` / ``thread_name`` metadata events.

Times are on the reference host's clock (:func:`rankmap.diagnose.clocks.clock_offsets`
removed), so flows run forward in time.
"""

from __future__ import annotations

import json
from collections import defaultdict

from rankmap.diagnose.clocks import corrected_start
from rankmap.diagnose.records import SPAN, RunRecords

__all__ = ["chrome_trace", "ASYNC_TID"]

ASYNC_TID = 100_000  # thread id of a rank's k-th async track: rank + k * ASYNC_TID
_CLAMP_US = 50.0     # a child ending this little after its parent (clock rounding) is clamped


def chrome_trace(records: RunRecords, host_of: dict, node_of: dict, offsets: dict | None = None) -> str:
    """The run's events as trace JSON text (stable key order, so byte-identical for equal input).

    Parameters
    ----------
    records : RunRecords
    host_of : dict
        Rank -> host name.
    node_of : dict
        Rank -> node rank (the trace's process id).
    offsets : dict, optional
        Host -> clock offset in seconds, removed from every time.
    """
    offsets = offsets or {}
    if not records.events:
        return json.dumps({"traceEvents": [], "displayTimeUnit": "ms"}) + "\n"
    starts = {id(e): corrected_start(e, host_of, offsets) for e in records.events}
    t0 = min(starts.values())
    backward = {(e.rank, e.step): e.dur_s for e in records.events if e.phase == "backward"}
    has_span = {(e.rank, e.step) for e in records.events if e.phase == SPAN}
    slices = []
    for e in records.events:
        if e.phase == "backward" and (e.rank, e.step) in has_span:
            continue  # derived: the span minus its forwards, shown in the span's args
        args = {"rank": e.rank, "step": e.step}
        if e.group is not None:
            args.update(group=e.group, seq=e.seq, peers=list(e.peers))
            if e.wait_s is not None:
                args["wait_ms"] = round(e.wait_s * 1e3, 3)
        if e.phase == SPAN:
            args["backward_ms"] = round(backward.get((e.rank, e.step), 0.0) * 1e3, 3)
        slices.append({"name": e.phase, "cat": e.group or "compute", "ph": "X", "pid": node_of.get(e.rank, 0),
                       "tid": e.rank, "ts": round((starts[id(e)] - t0) * 1e6, 3), "dur": round(e.dur_s * 1e6, 3),
                       "args": args, "_event": e})
    _nest(slices)
    out = _metadata(slices, host_of, node_of)
    out += [{k: v for k, v in s.items() if k != "_event"} for s in slices]
    out += _flows(slices)
    for h in records.hangs:
        out.append({"name": f"STUCK in {h.phase}", "cat": "hang", "ph": "i", "s": "t", "pid": node_of.get(h.rank, 0),
                    "tid": h.rank, "ts": round(max(0.0, h.since_s - offsets.get(host_of.get(h.rank), 0.0) - t0) * 1e6, 3),
                    "args": {"group": h.group, "seq": h.seq, "peers": list(h.peers), "state": h.state,
                             "timeout_s": h.timeout_s}})
    return json.dumps({"traceEvents": out, "displayTimeUnit": "ms"}, sort_keys=True) + "\n"


def _nest(slices: list) -> None:
    """Move slices that do not nest on their thread to the rank's async tracks (in place)."""
    by_tid: dict = defaultdict(list)
    for s in slices:
        by_tid[s["pid"], s["tid"]].append(s)
    level = 0
    while by_tid:
        moved: dict = defaultdict(list)
        for key, items in sorted(by_tid.items()):
            stack: list = []
            for s in sorted(items, key=lambda s: (s["ts"], -s["dur"], s["name"])):
                while stack and stack[-1]["ts"] + stack[-1]["dur"] <= s["ts"]:
                    stack.pop()
                if stack:
                    parent_end = stack[-1]["ts"] + stack[-1]["dur"]
                    if s["ts"] + s["dur"] > parent_end:
                        if s["ts"] + s["dur"] - parent_end <= _CLAMP_US:
                            s["dur"] = round(parent_end - s["ts"], 3)
                            while s["ts"] + s["dur"] > parent_end:  # the sum of rounded floats, as readers add them
                                s["dur"] = round(s["dur"] - 0.001, 3)
                        else:
                            s["tid"] = s["_event"].rank + (level + 1) * ASYNC_TID
                            moved[s["pid"], s["tid"]].append(s)
                            continue
                stack.append(s)
        by_tid, level = moved, level + 1


def _metadata(slices: list, host_of: dict, node_of: dict) -> list:
    out, pids = [], set()
    for pid, tid, rank in sorted({(s["pid"], s["tid"], s["_event"].rank) for s in slices}):
        if pid not in pids:
            pids.add(pid)
            out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": f"{host_of.get(rank, '?')} (node {pid})"}})
        name = f"rank {rank}" if tid == rank else f"rank {rank} async {tid // ASYNC_TID}"
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return out


def _flows(slices: list) -> list:
    """One flow per collective instance (members in order of arrival) and per P2P send/receive."""
    groups: dict = defaultdict(list)
    for s in slices:
        e = s["_event"]
        if e.group is None:
            continue
        if e.phase.endswith(("-send", "-recv")) and len(e.peers) == 2:
            groups["p2p", e.peers[0], e.peers[1], e.seq].append(s)
        else:
            groups[e.group, tuple(sorted(set(e.peers) | {e.rank})), e.seq].append(s)
    out, flow_id = [], 0
    for key in sorted(groups, key=repr):
        members = groups[key]
        if len(members) < 2:
            continue
        if key[0] == "p2p":  # the send first
            members = sorted(members, key=lambda s: not s["name"].endswith("-send"))
        else:
            members = sorted(members, key=lambda s: (s["ts"], s["_event"].rank))
        points, ts = [], members[0]["ts"]
        for s in members:  # forward in time and inside the member's slice, or the member is left out
            ts = max(ts, s["ts"])
            if ts <= round(s["ts"] + s["dur"], 3):
                points.append((s, ts))
        if len(points) < 2:
            continue
        flow_id += 1
        name = "p2p" if key[0] == "p2p" else members[0]["name"]
        for i, (s, ts) in enumerate(points):
            ph = "s" if i == 0 else ("f" if i == len(points) - 1 else "t")
            ev = {"name": name, "cat": "flow", "ph": ph, "id": flow_id, "pid": s["pid"], "tid": s["tid"], "ts": ts}
            if ph == "f":
                ev["bp"] = "e"
            out.append(ev)
    return out
