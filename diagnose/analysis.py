"""Find stragglers and hung ranks in a run's timing records (MegaScale, NSDI'24 §5).

Stragglers, with robust statistics (median and MAD, which one slow rank cannot drag):

- compute phases (forward, backward, optimizer): a rank's median time per step against
  the ranks that do the same work (same pipeline stage, ``role_of``); CPU seconds where
  the records have them, since a rank waiting for a slow peer inside its own phase (TP
  collectives run inside the forward pass) waits without using CPU;
- collectives: a slow rank makes every peer *wait* inside the collective, so durations
  name the victims, not the culprit. Instead, each collective instance (same group,
  peers and sequence number) gives every member a lateness = its start - the earliest
  start; the straggler is the rank that keeps arriving last.
- per host and per ToR group: the same test on the medians of their ranks, for a slow
  host (all its GPUs) or a ToR group with degraded uplinks.

A value is flagged when its robust z-score ``(x - median) / (1.4826 MAD)`` exceeds ``z``
and it exceeds the median by both ``min_ratio`` (relative) and ``min_excess_s`` (absolute),
so a quiet run flags nothing even when its durations are all nearly equal.

Hangs: every rank whose watchdog fired wrote the collective it was waiting in. The ranks
it waits on are its peers that are not waiting in that same collective; following those
waits ends at the ranks that never arrived -- the culprits.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rankmap.diagnose.records import COMPUTE, PHASES, RunRecords

__all__ = ["Flag", "HangVerdict", "Diagnosis", "diagnose", "robust_z"]


@dataclass(frozen=True)
class Flag:
    """Something slow: ``what`` is "rank", "host" or "tor_group"; ``measure`` is "duration"
    or "late arrival"; times in seconds."""

    what: str
    who: str
    phase: str
    measure: str
    value_s: float
    typical_s: float
    z: float
    ranks: tuple


@dataclass(frozen=True)
class HangVerdict:
    """The collective the others wait in and the ranks (and hosts) they wait for."""

    group: str
    seq: int
    phase: str
    waiting: tuple
    culprits: tuple
    culprit_hosts: tuple
    culprit_state: tuple   # per culprit: what its own watchdog recorded, or "no record"


@dataclass(frozen=True)
class Diagnosis:
    """``matrix[R, P]``: median seconds per step of each rank (row, ``ranks``) in each phase
    (column, ``phases``; CPU seconds for compute phases when recorded); NaN where a rank
    never ran a phase."""

    ranks: tuple
    phases: tuple
    matrix: np.ndarray
    flags: tuple
    hang: HangVerdict | None


def robust_z(values: np.ndarray) -> tuple[np.ndarray, float]:
    """``(z[N], median)``: robust z-scores with a MAD floor of 1% of the median.

    Examples
    --------
    >>> z, m = robust_z(np.array([1.0, 1.1, 0.9, 1.0, 5.0]))
    >>> m, bool(z[-1] > 5), bool(abs(z[0]) < 1)
    (1.0, True, True)
    """
    med = float(np.median(values))
    mad = float(np.median(np.abs(values - med)))
    scale = 1.4826 * max(mad, 0.01 * abs(med), 1e-12)
    return (values - med) / scale, med


def diagnose(records: RunRecords, host_of: dict, tor_of: dict, *, role_of: dict | None = None, z: float = 5.0,
             min_ratio: float = 1.5, min_excess_s: float = 0.05, warmup_steps: int = 1) -> Diagnosis:
    """Merge per-rank records and flag stragglers and hangs.

    Parameters
    ----------
    records : RunRecords
    host_of, tor_of : dict
        Rank -> host and host -> ToR group, from the rank map.
    role_of : dict, optional
        Rank -> what work it does (its pipeline stage): compute phases are compared among
        ranks of one role. Default: all ranks alike.
    z, min_ratio, min_excess_s : float
        Flag thresholds (see the module docstring).
    warmup_steps : int
        Leading steps left out (first steps pay for compilation and allocation).
    """
    ranks = tuple(sorted({e.rank for e in records.events} | set(records.ranks)))
    first = min((e.step for e in records.events), default=0)
    warmup_steps += first  # step numbers may start at 0 or 1
    per_step: dict = defaultdict(float)               # (rank, phase, step) -> seconds
    for e in records.events:
        if e.step >= warmup_steps:
            busy = e.cpu_s if e.cpu_s is not None and e.phase in COMPUTE else e.dur_s
            per_step[e.rank, e.phase, e.step] += busy
    phases = tuple(p for p in PHASES if any(k[1] == p for k in per_step))
    matrix = np.full((len(ranks), len(phases)), np.nan)
    index = {r: i for i, r in enumerate(ranks)}
    samples: dict = defaultdict(list)
    for (rank, phase, _), secs in per_step.items():
        samples[rank, phase].append(secs)
    for (rank, phase), vals in samples.items():
        matrix[index[rank], phases.index(phase)] = float(np.median(vals))
    role_of = role_of or {}
    flags = []
    for role in sorted({role_of.get(r, 0) for r in ranks}):
        rows = [i for i, r in enumerate(ranks) if role_of.get(r, 0) == role]
        flags += _duration_flags(tuple(ranks[i] for i in rows), phases, matrix[rows], host_of, tor_of, z,
                                 min_ratio, min_excess_s)
    flags += _lateness_flags(records, warmup_steps, host_of, z, min_excess_s)
    flags.sort(key=lambda f: (-f.z, f.what, f.who, f.phase))
    return Diagnosis(ranks, phases, matrix, tuple(flags), _hang(records, host_of))


def _flag_rows(keys: list, values: np.ndarray, z: float, min_ratio: float, min_excess_s: float):
    if len(values) < 3:
        return []
    scores, med = robust_z(values)
    out = []
    for key, v, s in zip(keys, values, scores):
        if s > z and v > med * min_ratio and v - med > min_excess_s:
            out.append((key, float(v), med, float(s)))
    return out


def _duration_flags(ranks, phases, matrix, host_of, tor_of, z, min_ratio, min_excess_s) -> list[Flag]:
    flags: list[Flag] = []
    for j, phase in enumerate(phases):
        if phase not in COMPUTE:
            continue  # collectives: waiting time names the victims; see _lateness_flags
        col = matrix[:, j]
        ok = ~np.isnan(col)
        rows = [r for r, k in zip(ranks, ok) if k]
        for rank, v, med, s in _flag_rows(rows, col[ok], z, min_ratio, min_excess_s):
            flags.append(Flag("rank", str(rank), phase, "duration", v, med, s, (rank,)))
        for what, key_of in (("host", lambda r: host_of.get(r, "?")),
                             ("tor_group", lambda r: tor_of.get(host_of.get(r, "?"), "?"))):
            members: dict = defaultdict(list)
            for r, v in zip(rows, col[ok]):
                members[key_of(r)].append((r, v))
            keys = sorted(members)
            vals = np.array([np.median([v for _, v in members[k]]) for k in keys])
            for key, v, med, s in _flag_rows(keys, vals, z, min_ratio, min_excess_s):
                flags.append(Flag(what, key, phase, "duration", v, med, s, tuple(r for r, _ in members[key])))
    return flags


def _lateness_flags(records: RunRecords, warmup_steps: int, host_of: dict, z: float,
                    min_excess_s: float) -> list[Flag]:
    """Ranks that keep arriving last to their collectives."""
    instances: dict = defaultdict(list)
    for e in records.events:
        if e.group is not None and e.step >= warmup_steps:
            members = tuple(sorted(set(e.peers) | {e.rank}))
            instances[e.phase, e.group, members, e.seq, e.step].append(e)
    late: dict = defaultdict(list)          # (rank, phase) -> lateness per instance
    for (phase, _, members, _, _), evs in instances.items():
        if len(evs) < 2:
            continue
        first = min(e.start_s for e in evs)
        for e in evs:
            late[e.rank, phase].append(e.start_s - first)
    flags: list[Flag] = []
    by_phase: dict = defaultdict(dict)
    for (rank, phase), vals in late.items():
        by_phase[phase][rank] = float(np.median(vals))
    for phase, per_rank in sorted(by_phase.items()):
        keys = sorted(per_rank)
        vals = np.array([per_rank[k] for k in keys])
        if len(vals) < 3:
            continue
        med = float(np.median(vals))  # lateness uses its own floor: most ranks arrive within noise of 0
        scale = max(float(np.median(np.abs(vals - med))) * 1.4826, min_excess_s / z)
        for rank, v in zip(keys, vals):
            s = (v - med) / scale
            if s > z and v - med > min_excess_s:
                flags.append(Flag("rank", str(rank), phase, "late arrival", float(v), med, float(s), (rank,)))
    return flags


def _hang(records: RunRecords, host_of: dict) -> HangVerdict | None:
    if not records.hangs:
        return None
    waiting_in = {h.rank: (h.group, h.seq, tuple(sorted(set(h.peers) | {h.rank}))) for h in records.hangs
                  if h.group is not None}
    by_rank = {h.rank: h for h in records.hangs}
    waits_on: dict = {}
    for h in records.hangs:
        if h.group is None:
            continue
        key = waiting_in[h.rank]
        waits_on[h.rank] = sorted(p for p in h.peers if p != h.rank and waiting_in.get(p) != key)
    # Follow the waits: the culprits are waited on and wait on nobody themselves.
    culprits = sorted({p for targets in waits_on.values() for p in targets if not waits_on.get(p)})
    counts: dict = defaultdict(list)
    for r, key in waiting_in.items():
        counts[key].append(r)
    (group, seq, _), waiting = max(counts.items(), key=lambda kv: (len(kv[1]), kv[0]))
    phase = by_rank[waiting[0]].phase
    state = tuple(f"waiting in {by_rank[c].phase} ({by_rank[c].group} #{by_rank[c].seq})" if c in by_rank
                  else "no record (stuck outside a collective, or dead)" for c in culprits)
    return HangVerdict(group, seq, phase, tuple(sorted(waiting)), tuple(culprits),
                       tuple(host_of.get(c, "?") for c in culprits), state)
