"""Find stragglers and hung ranks in a run's timing records (MegaScale, NSDI'24 §5).

Stragglers, with robust statistics (median and MAD, which one slow rank cannot drag):

- compute phases (forward, backward, optimizer): a rank's median time per step against
  the ranks that do the same work (same pipeline stage, ``role_of``); CPU seconds where
  the records have them, since a rank waiting for a slow peer inside its own phase (TP
  collectives run inside the forward pass) waits without using CPU;
- collectives: a slow rank makes every peer *wait* inside the collective, so durations
  name the victims, not the culprit; the culprit is the rank that keeps arriving last,
  compared with the ranks of its pipeline stage, step by step
  (:mod:`rankmap.diagnose.lateness`, which says how lateness is measured and when it is
  named). This needs no DP replicas: with dp = 1 a slowed rank is named by its TP peer
  waiting for it.
- links: a P2P send from ``src`` to ``dst`` and its receive form one instance. When the
  receiver was blocked in it (``wait_s`` > 1 ms) and had posted it by the time the send began
  (clocks aligned, within 1 ms), it finished when the data arrived, so ``end_recv -
  start_send`` is the delivery time. A receive posted later says little about the link: the
  data may have been on its way or there already (the receiver still busy, e.g. delayed by a
  slow link of its own, or descheduled on a loaded host), and its wait is only what was left
  of the delivery (a slow link's 0.15 s measured as 1-9 ms in 4 of 9 sends under load);
  such a receive, and one that found its data there, is left out. A sender whose lower
  quartile of delivery times stands out has a slow link (its NIC, rail or host uplink); a
  sender that is merely late starts its sends late, which does not lengthen them.
- per host and per ToR group: the same test on the medians of their ranks, for a slow
  host (all its GPUs) or a ToR group with degraded uplinks.

A duration or a link is flagged when its robust z-score ``(x - median) / (1.4826 MAD)``
exceeds ``z`` and it exceeds the median by both ``min_ratio`` (relative) and ``min_excess_s``
(absolute), so a quiet run flags nothing even when its durations are all nearly equal; a
late arrival, by the rule in :mod:`rankmap.diagnose.lateness`.

Hangs: see :mod:`rankmap.diagnose.hangs`.

The matrix the heat map shows is each rank's *own* excess time per phase: for compute
phases its (CPU) seconds above the median of ranks doing the same work; for operations
its lateness per step above its stage peers' (median over steps) -- not its waiting, which is the culprits' excess seen
from the victims (``waits`` holds those durations apart).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from rankmap.diagnose.clocks import clock_offsets, corrected_start
from rankmap.diagnose.hangs import HangVerdict, hang_verdict
from rankmap.diagnose.lateness import late_per_step, lateness, step_time_s
from rankmap.diagnose.records import COMPUTE, SPAN, RunRecords
from rankmap.topology.hostnames import compress_hostlist

__all__ = ["Flag", "HangVerdict", "Diagnosis", "diagnose", "robust_z", "record_gaps"]

_BLOCKED_S = 1e-3  # a receive blocked longer than this waited for its data


@dataclass(frozen=True)
class Flag:
    """Something slow: ``what`` is "rank", "host" or "tor_group"; ``measure`` is "duration",
    "late arrival" or "slow link"; times in seconds."""

    what: str
    who: str
    phase: str
    measure: str
    value_s: float
    typical_s: float
    z: float
    ranks: tuple


@dataclass(frozen=True)
class Diagnosis:
    """``matrix[R, P]``: median seconds per step of each rank (row, ``ranks``) in each phase
    (column, ``phases``; CPU seconds for compute phases when recorded); NaN where a rank
    never ran a phase. ``excess[R, P]``: the rank's own excess seconds per step (see the
    module docstring). ``offsets``: host -> clock offset removed, seconds, for the hosts
    with records. ``warnings``: record files skipped or cut short, and the ranks and hosts of
    the rank map without records (:func:`record_gaps`), one line each."""

    ranks: tuple
    phases: tuple
    matrix: np.ndarray
    flags: tuple
    hang: HangVerdict | None
    excess: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    offsets: dict = field(default_factory=dict)
    warnings: tuple = ()


def record_gaps(records: RunRecords, host_of: dict) -> list[str]:
    """What the records lack: the rank map's ranks without records (and hosts with none),
    and ranks in the records that the map lacks.

    Examples
    --------
    >>> recs = RunRecords(events=(), hangs=(), ranks=(0, 1, 3))
    >>> record_gaps(recs, {r: f"n{r // 4}" for r in range(8)})
    ['no records from 5 of 8 ranks: 2, 4-7 (hosts without any: n1)']
    """
    have = set(records.ranks)
    missing = sorted(set(host_of) - have)
    if not missing:
        return []
    quiet = sorted({host_of[r] for r in missing} - {host_of[r] for r in have if r in host_of})
    hosts = f" (hosts without any: {compress_hostlist(quiet)})" if quiet else ""
    return [f"no records from {len(missing)} of {len(host_of)} ranks: {_ranges(missing)}{hosts}"]


def _ranges(numbers: list[int]) -> str:
    """``[4, 6, 7]`` -> ``"4, 6-7"`` (sorted input)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


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
             min_ratio: float = 1.5, min_excess_s: float = 0.05, min_step_fraction: float = 0.2,
             warmup_steps: int = 1) -> Diagnosis:
    """Merge per-rank records and flag stragglers, slow links and hangs.

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
    min_step_fraction : float
        A late arrival is named only when it costs its peers this fraction of the median
        step time, or more (:mod:`rankmap.diagnose.lateness`).
    warmup_steps : int
        Leading steps left out (first steps pay for compilation and allocation).
    """
    ranks = tuple(sorted({e.rank for e in records.events} | set(records.ranks)))
    first = min((e.step for e in records.events), default=0)
    warmup_steps += first  # step numbers may start at 0 or 1
    offsets = clock_offsets(records.events, host_of)
    per_step: dict = defaultdict(float)               # (rank, phase, step) -> seconds
    for e in records.events:
        if e.step >= warmup_steps and e.phase != SPAN:
            busy = e.cpu_s if e.cpu_s is not None and e.phase in COMPUTE else e.dur_s
            per_step[e.rank, e.phase, e.step] += busy
    present = {k[1] for k in per_step}
    phases = tuple(p for p in COMPUTE if p in present) + tuple(sorted(present - set(COMPUTE)))
    matrix = np.full((len(ranks), len(phases)), np.nan)
    index = {r: i for i, r in enumerate(ranks)}
    samples: dict = defaultdict(list)
    for (rank, phase, _), secs in per_step.items():
        samples[rank, phase].append(secs)
    for (rank, phase), vals in samples.items():
        matrix[index[rank], phases.index(phase)] = float(np.median(vals))
    role_of = role_of or {}
    flags = []
    excess = np.zeros_like(matrix)
    alone = []                                        # ranks with fewer than 3 doing the same work
    for role in sorted({role_of.get(r, 0) for r in ranks}):
        rows = [i for i, r in enumerate(ranks) if role_of.get(r, 0) == role]
        if len(rows) < 3:
            alone += [ranks[i] for i in rows]
        flags += _duration_flags(tuple(ranks[i] for i in rows), phases, matrix[rows], host_of, tor_of, z,
                                 min_ratio, min_excess_s)
        for j, phase in enumerate(phases):
            if phase in COMPUTE and not np.all(np.isnan(matrix[rows, j])):
                excess[rows, j] = np.maximum(0.0, matrix[rows, j] - np.nanmedian(matrix[rows, j]))
    late, late_warnings = _late_flags(records, warmup_steps, host_of, offsets, role_of, z, min_excess_s,
                                      min_step_fraction)
    for x in late:
        if x.rank in index and x.phase in phases:
            excess[index[x.rank], phases.index(x.phase)] = max(0.0, x.excess_s)
    flags += [Flag("rank", str(x.rank), x.phase, "late arrival", x.value_s, x.typical_s, x.z, (x.rank,))
              for x in late if x.flagged]
    flags += _link_flags(records, warmup_steps, host_of, offsets, z, min_ratio, min_excess_s)
    flags.sort(key=lambda f: (-f.z, f.what, f.who, f.phase))
    compute = [p for p in phases if p in COMPUTE]
    if alone and compute:
        late_warnings.insert(0, f"{', '.join(compute)} of ranks {_ranges(sorted(alone))} not compared: fewer than "
                                f"3 ranks do the same work (pipeline stage); only late arrivals to collectives "
                                f"can name them")
    return Diagnosis(ranks, phases, matrix, tuple(flags), hang_verdict(records, host_of), np.nan_to_num(excess), offsets,
                     records.problems + tuple(record_gaps(records, host_of)) + tuple(late_warnings))


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
            continue  # operations: waiting time names the victims; see _late_flags and _link_flags
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


def _late_flags(records, warmup_steps, host_of, offsets, role_of, z, min_excess_s, min_step_fraction):
    """Each rank's late arrivals per operation (:func:`rankmap.diagnose.lateness.lateness`), and
    a warning per operation whose ranks have no other of their pipeline stage to compare with."""
    late = late_per_step(records, warmup_steps, host_of, offsets)
    out, alone = lateness(late, role_of, step_time_s(records.events, warmup_steps), z=z, min_excess_s=min_excess_s,
                          min_step_fraction=min_step_fraction)
    by_phase: dict = defaultdict(list)
    for phase, rank in alone:
        by_phase[phase].append(rank)
    return out, [f"late arrivals in {phase} of ranks {_ranges(sorted(ranks))} not compared: no other rank of "
                 f"their pipeline stage takes part" for phase, ranks in sorted(by_phase.items())]


def _link_flags(records: RunRecords, warmup_steps: int, host_of: dict, offsets: dict, z: float, min_ratio: float,
                min_excess_s: float) -> list[Flag]:
    """Senders whose P2P sends keep leaving their receivers blocked (see the module docstring)."""
    sends: dict = {}
    for e in records.events:
        if e.step >= warmup_steps and e.phase.endswith("-send") and len(e.peers) == 2:
            sends[e.peers[0], e.peers[1], e.seq] = e
    link: dict = defaultdict(list)           # (sender, phase) -> seconds per send
    for e in records.events:
        if e.step < warmup_steps or not e.phase.endswith("-recv") or len(e.peers) != 2:
            continue
        send = sends.get((e.peers[0], e.peers[1], e.seq))
        if send is None:
            continue
        if e.wait_s is not None and e.wait_s <= _BLOCKED_S:
            continue  # the data was there before the receiver waited
        recv_start, send_start = corrected_start(e, host_of, offsets), corrected_start(send, host_of, offsets)
        if recv_start > send_start + _BLOCKED_S:
            continue  # posted after the send began: its wait is only the rest of the delivery
        link[send.rank, send.phase].append(max(0.0, recv_start + e.dur_s - max(recv_start, send_start)))
    per_phase: dict = defaultdict(dict)
    for (rank, phase), vals in link.items():
        per_phase[phase][rank] = float(np.percentile(vals, 25))
    flags: list[Flag] = []
    for phase, per_rank in sorted(per_phase.items()):
        keys = sorted(per_rank)
        vals = np.array([per_rank[k] for k in keys])
        if len(vals) < 3:
            continue
        med = float(np.median(vals))
        scale = max(float(np.median(np.abs(vals - med))) * 1.4826, min_excess_s / z)
        for rank, v in zip(keys, vals):
            s = (v - med) / scale
            if s > z and v - med > min_excess_s and v > med * min_ratio:
                flags.append(Flag("rank", str(rank), phase, "slow link", float(v), med, float(s), (rank,)))
    return flags
