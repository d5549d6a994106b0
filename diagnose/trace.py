"""Chrome trace / Perfetto timeline of a run: one process per host, one thread per GPU.

Format: the Trace Event Format's JSON object form (``{"traceEvents": [...]}``) with
complete events (``"ph": "X"``, ``ts`` and ``dur`` in microseconds) and ``process_name`` /
``thread_name`` metadata events, which Perfetto and chrome://tracing open
(Trace Event Format, Google, "Complete Events" and "Metadata Events").
"""

from __future__ import annotations

import json

from rankmap.diagnose.records import RunRecords

__all__ = ["chrome_trace"]


def chrome_trace(records: RunRecords, host_of: dict, node_of: dict) -> str:
    """The run's events as trace JSON text (stable key order, so byte-identical for equal input).

    Parameters
    ----------
    records : RunRecords
    host_of : dict
        Rank -> host name.
    node_of : dict
        Rank -> node rank (the trace's process id).
    """
    if not records.events:
        return json.dumps({"traceEvents": [], "displayTimeUnit": "ms"}) + "\n"
    t0 = min(e.start_s for e in records.events)
    out = []
    for rank in sorted({e.rank for e in records.events}):
        pid = node_of.get(rank, 0)
        out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"name": f"{host_of.get(rank, '?')} (node {pid})"}})
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": rank, "args": {"name": f"rank {rank}"}})
    for e in records.events:
        args = {"rank": e.rank, "step": e.step}
        if e.group is not None:
            args.update(group=e.group, seq=e.seq, peers=list(e.peers))
        out.append({"name": e.phase, "cat": e.group or "compute", "ph": "X", "pid": node_of.get(e.rank, 0),
                    "tid": e.rank, "ts": round((e.start_s - t0) * 1e6, 3), "dur": round(e.dur_s * 1e6, 3),
                    "args": args})
    for h in records.hangs:
        out.append({"name": f"HANG in {h.phase}", "cat": "hang", "ph": "i", "s": "t", "pid": node_of.get(h.rank, 0),
                    "tid": h.rank, "ts": round((h.since_s - t0) * 1e6, 3),
                    "args": {"group": h.group, "seq": h.seq, "peers": list(h.peers), "timeout_s": h.timeout_s}})
    return json.dumps({"traceEvents": out, "displayTimeUnit": "ms"}, sort_keys=True) + "\n"
