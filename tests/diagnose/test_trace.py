"""The timeline against the Trace Event Format's rules (Google, "Trace Event Format"): required
fields per phase type, slices of one thread nesting, and flow events (one start and one finish
per id, in time order, each inside a slice of its thread)."""

from __future__ import annotations

import json
from collections import defaultdict

from rankmap.diagnose.records import Event, Hang, RunRecords
from rankmap.diagnose.trace import ASYNC_TID, chrome_trace

_REQUIRED = {"X": {"name", "ph", "pid", "tid", "ts", "dur"}, "M": {"name", "ph", "pid", "args"},
             "i": {"name", "ph", "pid", "tid", "ts", "s"}, "s": {"name", "cat", "ph", "id", "pid", "tid", "ts"},
             "t": {"name", "cat", "ph", "id", "pid", "tid", "ts"}, "f": {"name", "cat", "ph", "id", "pid", "tid", "ts"}}


def trace_problems(doc: dict) -> list[str]:
    """Every rule the trace breaks (empty: valid)."""
    problems = []
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return ["no traceEvents list"]
    slices = defaultdict(list)
    flows = defaultdict(list)
    for i, e in enumerate(events):
        ph = e.get("ph")
        if ph not in _REQUIRED:
            problems.append(f"event {i}: unknown ph {ph!r}")
            continue
        if not _REQUIRED[ph] <= set(e):
            problems.append(f"event {i}: {ph} lacks {sorted(_REQUIRED[ph] - set(e))}")
            continue
        if ph == "M" and e["name"] in ("process_name", "thread_name") and not isinstance(e["args"].get("name"), str):
            problems.append(f"event {i}: metadata without args.name")
        if ph == "X":
            if e["ts"] < 0 or e["dur"] < 0:
                problems.append(f"event {i}: negative ts or dur")
            slices[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"], i))
        if ph in "stf":
            flows[e["cat"], e["id"]].append(e)
    for key, items in slices.items():  # proper nesting on every thread
        stack = []
        for start, end, i in sorted(items, key=lambda x: (x[0], -(x[1] - x[0]))):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"thread {key}: slice {i} [{start}, {end}] overlaps slice {stack[-1][2]} without nesting")
            stack.append((start, end, i))
    for key, items in flows.items():
        phs = [e["ph"] for e in items]
        if phs.count("s") != 1 or phs.count("f") != 1 or phs[0] != "s" or phs[-1] != "f":
            problems.append(f"flow {key}: phases {phs} (want s, t..., f)")
        if len({e["name"] for e in items}) != 1:
            problems.append(f"flow {key}: names differ")
        if [e["ts"] for e in items] != sorted(e["ts"] for e in items):
            problems.append(f"flow {key}: runs backwards in time")
        for e in items:
            if not any(s <= e["ts"] <= t for s, t, _ in slices.get((e["pid"], e["tid"]), ())):
                problems.append(f"flow {key}: {e['ph']} at {e['ts']} is in no slice of thread {(e['pid'], e['tid'])}")
    return problems


def ev(rank, phase, start, dur, step=1, group=None, peers=(), seq=0, host=None):
    return Event(rank=rank, host=host or f"h{rank // 2}", local_rank=rank % 2, step=step, phase=phase, start_s=start,
                 dur_s=dur, group=group, peers=peers, seq=seq)


def records(shift_s=0.0):
    """Two ranks per host, host h1's clock ``shift_s`` ahead: a span with forwards, a TP all-reduce
    inside a forward, an async all-gather overlapping the forward's end, a send 0 -> 2 and its receive."""
    out = []
    for r in range(4):
        d = shift_s if r >= 2 else 0.0
        out += [ev(r, "forward-backward", 10.0 + d, 1.0), ev(r, "forward", 10.1 + d, 0.2),
                ev(r, "backward", 10.0 + d, 0.8),
                ev(r, "tp-all-reduce", 10.15 + d + 0.01 * (r % 2), 0.05 - 0.01 * (r % 2), group="tp",
                   peers=(2 * (r // 2), 2 * (r // 2) + 1)),
                ev(r, "dp-all-gather", 10.25 + d, 0.2, group="dp", peers=(r % 2, r % 2 + 2))]
    out += [ev(0, "pp-send", 10.5, 0.01, group="pp", peers=(0, 2)),
            ev(2, "pp-recv", 10.45 + shift_s, 0.1, group="pp", peers=(0, 2))]
    hang = Hang(rank=3, host="h1", local_rank=1, step=1, phase="forward", group=None, peers=(), seq=0, since_s=10.9,
                timeout_s=5.0, state="compute")
    return RunRecords(tuple(out), (hang,), (0, 1, 2, 3))


HOST_OF = {r: f"h{r // 2}" for r in range(4)}
NODE_OF = {r: r // 2 for r in range(4)}


def test_trace_follows_the_format_rules_with_nesting_and_flows():
    doc = json.loads(chrome_trace(records(), HOST_OF, NODE_OF))
    assert trace_problems(doc) == []
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    # backward is derived (span minus forwards): shown in the span's args, not as an overlapping slice
    assert "backward" not in {e["name"] for e in x}
    assert {e["args"]["backward_ms"] for e in x if e["name"] == "forward-backward"} == {800.0}
    # the async all-gather overlaps the forward's end: moved to the rank's async track
    assert {e["tid"] for e in x if e["name"] == "dp-all-gather"} == {r + ASYNC_TID for r in range(4)}
    flows = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] in "stf":
            flows[e["id"]].append(e)
    links = sorted(tuple((e["ph"], e["tid"] % ASYNC_TID) for e in f) for f in flows.values())
    # TP pairs (0, 1) and (2, 3) in order of arrival, DP pairs (0, 2) and (1, 3), the send 0 -> 2 to its receive
    assert links == [(("s", 0), ("f", 1)), (("s", 0), ("f", 2)), (("s", 0), ("f", 2)), (("s", 1), ("f", 3)),
                     (("s", 2), ("f", 3))]
    hang = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [(h["tid"], h["ts"]) for h in hang] == [(3, 900000.0)]


def test_a_shifted_clock_is_removed_from_the_trace():
    shifted = json.loads(chrome_trace(records(0.3), HOST_OF, NODE_OF, {"h0": 0.0, "h1": 0.3}))
    plain = json.loads(chrome_trace(records(), HOST_OF, NODE_OF))
    assert trace_problems(shifted) == []
    key = lambda doc: sorted((e["tid"], e["name"], round(e["ts"], 1)) for e in doc["traceEvents"] if e["ph"] == "X")
    assert key(shifted) == key(plain)


def test_the_validator_catches_broken_traces():
    bad = {"traceEvents": [
        {"name": "a", "ph": "X", "pid": 0, "tid": 0, "ts": 0, "dur": 10},
        {"name": "b", "ph": "X", "pid": 0, "tid": 0, "ts": 5, "dur": 10},          # overlaps a
        {"name": "x", "cat": "flow", "ph": "s", "id": 1, "pid": 0, "tid": 0, "ts": 8},
        {"name": "x", "cat": "flow", "ph": "f", "id": 1, "pid": 0, "tid": 1, "ts": 3},   # backwards, no slice
    ]}
    problems = trace_problems(bad)
    assert any("without nesting" in p for p in problems)
    assert any("backwards" in p for p in problems) and any("in no slice" in p for p in problems)


def test_a_child_ending_a_rounding_error_after_its_parent_is_clamped_into_it():
    out = [ev(0, "forward", 4.347493172, 0.034917), ev(0, "tp-all-gather", 4.347493172, 0.034917000001, group="tp",
                                                        peers=(0, 1)),
           ev(1, "forward", 4.0, 1.0)]
    doc = json.loads(chrome_trace(RunRecords(tuple(out), (), (0, 1)), HOST_OF, NODE_OF))
    assert trace_problems(doc) == []
    assert {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"} == {0, 1}
