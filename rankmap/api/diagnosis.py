"""The ``diagnose`` command: stragglers and hangs from a run's timing records, and what to exclude next."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rankmap.errors import RankmapError
from rankmap.job.rank_map import RankMap
from rankmap.placement.constraints import PlacementConstraints

__all__ = ["DiagnosisRun", "diagnose"]


@dataclass(frozen=True)
class DiagnosisRun:
    """What :func:`diagnose` returns.

    Attributes
    ----------
    diagnosis : Diagnosis
        Flags and the hang, as :func:`rankmap.diagnose.analysis.diagnose` finds them.
    summary : dict
        The ``diagnosis.json`` document.
    constraints : PlacementConstraints
        Flagged hosts excluded, slow ToR groups given a quota of 0: for the next ``plan``.
    files : dict of str to str or bytes
        ``diagnosis.json``, ``heatmap.png``, ``trace.json``, ``constraints.yaml``.
    host_of, tor_of : dict
        Rank -> host and host -> ToR group, from the rank map.
    """

    diagnosis: object
    summary: dict
    constraints: PlacementConstraints
    files: dict
    host_of: dict
    tor_of: dict


def diagnose(run_dir: str | Path, rankmap: RankMap, *, z: float = 5.0, min_ratio: float = 1.5,
             min_excess_s: float = 0.05, min_step_fraction: float = 0.2, run_id: str | None = None) -> DiagnosisRun:
    """Stragglers and hangs from a run's timing records (``RUN_DIR/events``), with what to exclude next.

    Parameters
    ----------
    run_dir : path
        Run folder the engine wrote.
    rankmap : RankMap
        The run's rank map (ranks -> hosts, ToR groups, pipeline stages).
    z, min_ratio, min_excess_s : float
        Flag a duration at this robust z-score, and only at ``min_ratio`` times the median and
        ``min_excess_s`` seconds above it.
    min_step_fraction : float
        Name a rank late to collectives only when its steady lateness is at least this share of
        the median step time (0..1; :mod:`rankmap.diagnose.lateness`).
    run_id : str, optional
        Which run of ``RUN_DIR/events/`` (default: the newest).

    Returns
    -------
    DiagnosisRun

    Raises
    ------
    RankmapError
        Missing or malformed records, or records whose ranks or hosts the rank map contradicts.
    """
    import json

    from rankmap.diagnose.analysis import diagnose as _diagnose
    from rankmap.diagnose.heatmap import heatmap_png
    from rankmap.diagnose.records import read_run
    from rankmap.diagnose.trace import chrome_trace
    from rankmap.placement.constraints import constraints_to_yaml

    records = read_run(run_dir, run_id)
    host_of = {r: rankmap.hosts[int(rankmap.rank_node[r])] for r in range(rankmap.world_size)}
    _check_records_hosts(records, host_of, run_dir)
    node_of = {r: int(rankmap.rank_node[r]) for r in range(rankmap.world_size)}
    tor_of = dict(zip(rankmap.hosts, rankmap.tor_groups))
    stage = rankmap.layout.column("pp")
    role_of = {r: int(stage[r]) for r in range(rankmap.world_size)}
    d = _diagnose(records, host_of, tor_of, role_of=role_of, z=z, min_ratio=min_ratio, min_excess_s=min_excess_s,
                  min_step_fraction=min_step_fraction)
    bad_hosts = sorted({host_of[int(f.who)] for f in d.flags if f.what == "rank"} |
                       {f.who for f in d.flags if f.what == "host"} | set(d.hang.culprit_hosts if d.hang else ()))
    bad_groups = sorted({f.who for f in d.flags if f.what == "tor_group"})
    constraints = PlacementConstraints(exclude=tuple(bad_hosts), quotas={g: 0 for g in bad_groups},
                                       source="diagnosis")
    summary = {
        "run_id": records.run_id, "ranks": len(d.ranks), "phases": list(d.phases),
        "clock_offsets_s": {h: round(v, 6) for h, v in sorted(d.offsets.items())},
        "flags": [{"what": f.what, "who": f.who, "phase": f.phase, "measure": f.measure, "value_s": f.value_s,
                   "typical_s": f.typical_s, "z": round(f.z, 3), "ranks": list(f.ranks),
                   **({"host": host_of.get(int(f.who), "?"), "rail": _rail(rankmap, int(f.who))}
                      if f.what == "rank" else {})} for f in d.flags],
        "hang": None if d.hang is None else {
            "group": d.hang.group, "seq": d.hang.seq, "phase": d.hang.phase, "waiting": list(d.hang.waiting),
            "culprits": list(d.hang.culprits), "culprit_hosts": list(d.hang.culprit_hosts),
            "culprit_rails": [_rail(rankmap, c) for c in d.hang.culprits],
            "culprit_tor_groups": [tor_of[host_of[c]] if c in host_of else "?" for c in d.hang.culprits],
            "culprit_state": list(d.hang.culprit_state),
            "blocked_in": [{"phase": ph, "group": g, "members": list(m), "seq": q, "entered": list(e),
                            "never_entered": list(n)} for ph, g, m, q, e, n in d.hang.instances]},
        "exclude_hosts": bad_hosts, "exclude_tor_groups": bad_groups,
        "warnings": list(d.warnings),
    }
    files = {
        "diagnosis.json": json.dumps(summary, indent=1, sort_keys=True) + "\n",
        "heatmap.png": heatmap_png(d, host_of, tor_of),
        "trace.json": chrome_trace(records, host_of, node_of, d.offsets),
        "constraints.yaml": constraints_to_yaml(
            constraints, "written by rankmap diagnose: use with rankmap plan --constraints"),
    }
    return DiagnosisRun(d, summary, constraints, files, host_of, tor_of)


def _rail(rankmap: RankMap, rank: int):
    """The rail (NIC index) of a rank, from the rank map (None when unknown)."""
    if not 0 <= rank < rankmap.world_size:
        return None
    entry = rankmap.entry(rank)
    rails = rankmap.rails[int(rankmap.rank_node[rank])]
    return int(rails[entry["local_rank"]]) if entry["local_rank"] < len(rails) else None


def _check_records_hosts(records, host_of: dict, run_dir) -> None:
    """Refuse records the rank map contradicts (another run's map): ranks it lacks, other hosts."""
    bad = sorted({(e.rank, e.host) for e in records.events + records.hangs if host_of.get(e.rank) != e.host})
    if bad:
        rank, host = bad[0]
        where = f"puts rank {rank} on {host_of[rank]!r}" if rank in host_of else f"has no rank {rank}"
        raise RankmapError(f"{run_dir}: the records say rank {rank} ran on {host!r} but the rank map {where} "
                           f"({len(bad)} rank/host pairs differ): give the rank map this run was launched with")
