"""``rankmap diagnose RUN_DIR --rankmap rankmap.json``: stragglers, hangs, heat map, timeline.

Writes into ``--out`` (default ``RUN_DIR/diagnosis``), all or nothing: ``diagnosis.json``,
``heatmap.png``, ``trace.json`` (open in Perfetto or chrome://tracing) and
``constraints.yaml``, an exclusion list (flagged hosts; ToR groups whose ranks are slow
together get a quota of 0) that ``rankmap plan --constraints`` accepts.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["add_diagnose_parser", "run_diagnose"]


def add_diagnose_parser(sub) -> None:
    p = sub.add_parser("diagnose", help="find stragglers and hung ranks in a run's timing records",
                       description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="run folder holding events/ (written by the engine)")
    p.add_argument("--rankmap", type=Path, required=True, help="the run's rankmap.json")
    p.add_argument("--out", type=Path, help="output folder (default RUN_DIR/diagnosis)")
    p.add_argument("--z", type=float, default=5.0, help="robust z-score to flag (default 5)")
    p.add_argument("--min-ratio", type=float, default=1.5, help="flag only at this many times the median (1.5)")
    p.add_argument("--min-excess", type=float, default=0.05, help="and this many seconds above it (0.05)")


def run_diagnose(args) -> int:
    from engine.diagnose import diagnose
    from engine.heatmap import heatmap_png
    from engine.records import read_run
    from engine.trace import chrome_trace
    from placement.rankmap import read_rankmap
    from topology.fileio import atomic_write_files
    from topology.hostnames import compress_hostlist

    from .report_diagnose import print_diagnosis

    rm = read_rankmap(args.rankmap)
    records = read_run(args.run_dir)
    host_of = {r: rm.hosts[int(rm.rank_node[r])] for r in range(rm.world_size)}
    node_of = {r: int(rm.rank_node[r]) for r in range(rm.world_size)}
    tor_of = dict(zip(rm.hosts, rm.tor_groups))
    stage = rm.layout.coord_table[:, 4]
    role_of = {r: int(stage[r]) for r in range(rm.world_size)}
    d = diagnose(records, host_of, tor_of, role_of=role_of, z=args.z, min_ratio=args.min_ratio,
                 min_excess_s=args.min_excess)
    bad_hosts = sorted({host_of[int(f.who)] for f in d.flags if f.what == "rank"} |
                       {f.who for f in d.flags if f.what == "host"} | set(d.hang.culprit_hosts if d.hang else ()))
    bad_groups = sorted({f.who for f in d.flags if f.what == "tor_group"})
    constraints = "# written by rankmap diagnose: use with rankmap plan --constraints\n"
    if bad_hosts:
        constraints += f"exclude: {json.dumps(compress_hostlist(bad_hosts))}\n"
    if bad_groups:
        constraints += "quotas: {" + ", ".join(f"{g}: 0" for g in bad_groups) + "}\n"
    summary = {
        "ranks": len(d.ranks), "phases": list(d.phases),
        "flags": [{"what": f.what, "who": f.who, "phase": f.phase, "measure": f.measure, "value_s": f.value_s,
                   "typical_s": f.typical_s, "z": round(f.z, 3), "ranks": list(f.ranks)} for f in d.flags],
        "hang": None if d.hang is None else {
            "group": d.hang.group, "seq": d.hang.seq, "phase": d.hang.phase, "waiting": list(d.hang.waiting),
            "culprits": list(d.hang.culprits), "culprit_hosts": list(d.hang.culprit_hosts),
            "culprit_state": list(d.hang.culprit_state)},
        "exclude_hosts": bad_hosts, "exclude_tor_groups": bad_groups,
    }
    out = args.out or args.run_dir / "diagnosis"
    written = atomic_write_files(out, {
        "diagnosis.json": json.dumps(summary, indent=1, sort_keys=True) + "\n",
        "heatmap.png": heatmap_png(d, host_of, tor_of),
        "trace.json": chrome_trace(records, host_of, node_of),
        "constraints.yaml": constraints,
    })
    print_diagnosis(d, host_of, tor_of, written)
    return 0


