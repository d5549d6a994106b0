"""Late arrivals to collectives: which rank keeps its peers waiting (MegaScale, NSDI'24 §5).

A slow rank makes every peer *wait* inside the collective, so durations name the victims,
not the culprit. Instead, each collective instance (same group, peers and sequence number)
gives every member a lateness = its start - the earliest start, on clocks aligned by
:func:`rankmap.diagnose.clocks.clock_offsets`, less the time it spent blocked in other
operations since the group's previous instance (lateness inherited from a slow peer
elsewhere is not its own). Lateness is summed over a step: a rank slowed once per forward
pass is late to one collective of many (the first after the slow code), which a median over
instances would miss. This needs no DP replicas: with dp = 1 a slowed rank is named by its
TP peer waiting for it.

Who is compared with whom: only ranks doing the same work (the same pipeline stage,
``role_of``) within one operation (phase). Ranks at different stages arrive apart by design
(the last stage computes the loss, the first runs the last backward), so a rank without
another of its stage in an operation is not compared, and a warning says so.

The rule. Summed over a step, every rank collects the scheduling noise of tens of
instances: on a host whose CPUs are shared, a rank descheduled for 10-150 ms arrives that
much late to some instance, and rank 0, which also writes the training log (with an fsync)
between steps, arrives a few ms late to its first collective of every step. A rank's median
over a handful of steps can then stand 50 ms above its peers' while the spread of those
medians across ranks is a few ms, so a z-score against that spread names noise (a quiet
tp 2 pp 2 dp 2 run flagged rank 0: 78 ms per step against 27 ms, z 5.2). So, per step, a
rank's *excess* is its lateness less the median of its peers' (same stage, same step: what
the whole group suffered that step cancels), and a rank is named only when

- its excess is large in at least three steps of four (its lower quartile over steps,
  ``steady``: a persistent straggler is late every step, noise in some),
- ``steady`` exceeds both ``min_excess_s`` and ``min_step_fraction`` of the median step time
  (what a rank costs its peers is worth a host only when it is a material part of the step,
  as a compute phase is named only at ``min_ratio`` = 1.5 times its peers'; and scheduling
  noise grows with the step on a loaded host: with 16 ranks on 2 shared cores, a quiet run's
  rank 0 was late 0.27-0.42 s in four steps of 2.4 s, 14% of the step, while injected
  stragglers cost 44-75% of theirs; the default, 0.2, lies between), and
- ``steady`` stands ``z`` spreads above its stage peers' (above 0 for a pair, whose excess is
  over its partner), where the spread is the largest of: the robust spread of the peers'
  ``steady`` (1.4826 MAD, with 3 or more ranks of the stage), the step-to-step noise of the
  excesses (1.4826 x the median deviation of each rank's per-step excess from its own
  median, pooled over the operation's ranks: a rank late by the same amount every step adds
  nothing to it) and ``min_excess_s / z``. The step-to-step noise is what a TP pair
  (dp = 1) is measured against, having no peers' spread.

References
----------
.. [1] Z. Jiang et al., "MegaScale: Scaling Large Language Model Training to More Than 10,000
   GPUs", NSDI 2024, section 5. https://www.usenix.org/conference/nsdi24/presentation/jiang-ziheng
.. [2] P. J. Rousseeuw and C. Croux, "Alternatives to the Median Absolute Deviation",
   J. Amer. Statist. Assoc. 88 (1993) 1273-1283 (the MAD and its 1.4826 consistency factor).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rankmap.diagnose.clocks import collective_instances, corrected_start
from rankmap.diagnose.records import is_comm_phase

__all__ = ["Lateness", "late_per_step", "step_time_s", "lateness"]


@dataclass(frozen=True)
class Lateness:
    """One rank's late arrivals to one operation, seconds per step (over the steps after warm-up).

    ``value_s``: its median lateness; ``typical_s``: the median of its peers' (same stage);
    ``excess_s``: the median of its per-step excess over them; ``steady_s``: the lower quartile
    of that excess (late by at least this in three steps of four); ``z``: ``steady_s`` above its
    stage peers' in spreads; ``flagged``: whether it passes the rule (both: module docstring)."""

    rank: int
    phase: str
    value_s: float
    typical_s: float
    excess_s: float
    steady_s: float
    z: float
    flagged: bool


def late_per_step(records, warmup_steps: int, host_of: dict, offsets: dict) -> dict:
    """``{(rank, phase, step): seconds}``: each rank's lateness summed over the step's instances
    of that operation, for the steps from ``warmup_steps`` on (``offsets``: host -> seconds,
    :func:`rankmap.diagnose.clocks.clock_offsets`)."""
    instances = collective_instances(records.events)
    blocked = _Blocked(records.events)
    late: dict = defaultdict(float)
    for (group, members, seq), evs in instances.items():
        if len(evs) < 2 or min(e.step for e in evs) < warmup_steps:
            continue
        before = {e.rank: e.start_s for e in instances.get((group, members, seq - 1), ())}
        starts = [corrected_start(e, host_of, offsets) - blocked.between(e.rank, before.get(e.rank, -np.inf), e.start_s)
                  for e in evs]
        first = min(starts)
        for e, s in zip(evs, starts):
            late[e.rank, e.phase, e.step] += s - first
    return late


def step_time_s(events, warmup_steps: int) -> float:
    """Median over ranks and steps (from ``warmup_steps`` on) of a rank's step: from its first
    event's start to its last event's end; 0.0 without events.

    Examples
    --------
    >>> from rankmap.diagnose.records import Event
    >>> evs = [Event(rank=r, host="a", local_rank=r, step=s, phase=p, start_s=10.0 * s + t, dur_s=d)
    ...        for r in (0, 1) for s in (1, 2) for p, t, d in (("forward", 0.0, 0.5), ("optimizer", 1.0, 0.25))]
    >>> step_time_s(evs, 1)
    1.25
    """
    span: dict = {}
    for e in events:
        if e.step >= warmup_steps:
            lo, hi = span.get((e.rank, e.step), (np.inf, -np.inf))
            span[e.rank, e.step] = (min(lo, e.start_s), max(hi, e.start_s + e.dur_s))
    return float(np.median([hi - lo for lo, hi in span.values()])) if span else 0.0


def lateness(late: dict, role_of: dict, step_s: float, *, z: float, min_excess_s: float,
             min_step_fraction: float) -> tuple[list[Lateness], list[tuple[str, int]]]:
    """Each rank's :class:`Lateness` per operation, and the ``(phase, rank)`` pairs not compared
    (no other rank of its stage in that operation).

    Parameters
    ----------
    late : dict
        ``{(rank, phase, step): seconds}`` (:func:`late_per_step`).
    role_of : dict
        Rank -> pipeline stage (ranks of one stage do the same work); default 0.
    step_s : float
        Median step time, seconds (:func:`step_time_s`).
    z, min_excess_s, min_step_fraction : float
        The rule's thresholds (module docstring).

    Examples
    --------
    Two TP pairs (stages 0 and 1) in 1 s steps: rank 1 keeps rank 0 waiting 0.3 s every step;
    rank 3 is late 0.2 s in one step of four (noise):

    >>> late = {(r, "tp-all-gather", s): v for s in range(4) for r, v in ((0, 0.01), (1, 0.31))}
    >>> late |= {(r, "tp-all-gather", s): v for s in range(4) for r, v in ((2, 0.02), (3, 0.2 if s == 1 else 0.03))}
    >>> out, alone = lateness(late, {0: 0, 1: 0, 2: 1, 3: 1}, 1.0, z=5.0, min_excess_s=0.05, min_step_fraction=0.2)
    >>> [(x.rank, round(x.steady_s, 3), round(x.z, 1)) for x in out if x.flagged], alone
    ([(1, 0.3, 30.0)], [])
    >>> [(x.rank, round(x.excess_s, 3), round(x.steady_s, 3)) for x in out if x.rank == 3]
    [(3, 0.01, 0.01)]
    """
    per: dict = defaultdict(lambda: defaultdict(dict))      # (phase, role) -> rank -> step -> seconds
    for (rank, phase, step), secs in late.items():
        per[phase, role_of.get(rank, 0)][rank][step] = secs
    groups: dict = defaultdict(list)                        # phase -> [(rank, excess, own, peers) per rank] per role
    alone: list[tuple[str, int]] = []
    for (phase, _), by_rank in sorted(per.items()):
        if len(by_rank) < 2:
            alone += [(phase, r) for r in by_rank]
        else:
            groups[phase].append([row for row in ((r, *_excess(r, by_rank)) for r in sorted(by_rank)) if row[1]])
    need = max(min_excess_s, min_step_fraction * step_s)
    out: list[Lateness] = []
    for phase, per_role in groups.items():
        noise = _step_noise([row[1] for rows in per_role for row in rows])
        for rows in per_role:
            steady = np.array([float(np.percentile(row[1], 25)) for row in rows])
            med, spread = 0.0, 0.0              # a pair: the excess over the partner is the test
            if len(rows) >= 3:
                med = float(np.median(steady))
                spread = 1.4826 * float(np.median(np.abs(steady - med)))
            scores = (steady - med) / max(spread, noise, min_excess_s / z)
            for (rank, ex, own, base), q, sc in zip(rows, steady, scores):
                out.append(Lateness(rank, phase, float(np.median(own)), float(np.median(base)), float(np.median(ex)),
                                    float(q), float(sc), bool(sc > z and q > need)))
    out.sort(key=lambda x: (x.phase, x.rank))
    return out, alone


def _step_noise(excesses: list) -> float:
    """1.4826 x the median absolute deviation of per-step excesses from each rank's own median:
    how much a rank's excess varies from step to step, pooled over the ranks of an operation
    (a rank late by the same amount every step adds nothing to it)."""
    if not excesses:
        return 0.0
    dev = np.concatenate([np.abs(np.asarray(ex) - np.median(ex)) for ex in excesses])
    return 1.4826 * float(np.median(dev))


def _excess(rank: int, by_rank: dict) -> tuple[list, list, list]:
    """``(excess, own, peers)`` over the steps where the rank and a peer both have lateness:
    ``own - peers``, its lateness, the median of its peers'."""
    own, peers = [], []
    for step, secs in sorted(by_rank[rank].items()):
        others = [v[step] for r, v in by_rank.items() if r != rank and step in v]
        if others:
            own.append(secs)
            peers.append(float(np.median(others)))
    return [a - b for a, b in zip(own, peers)], own, peers


class _Blocked:
    """Seconds each rank was blocked in operations (``wait_s``, else ``dur_s``) between two
    of its own times (one rank's clock: no offsets needed)."""

    def __init__(self, events):
        per_rank: dict = defaultdict(list)
        for e in events:
            if is_comm_phase(e.phase):
                per_rank[e.rank].append((e.start_s, e.wait_s if e.wait_s is not None else e.dur_s))
        self._starts, self._cum = {}, {}
        for rank, items in per_rank.items():
            items.sort()
            self._starts[rank] = np.array([t for t, _ in items])
            self._cum[rank] = np.concatenate(([0.0], np.cumsum([w for _, w in items])))

    def between(self, rank: int, after_s: float, before_s: float) -> float:
        """Blocked seconds in the rank's operations that started in ``(after_s, before_s)``."""
        starts = self._starts.get(rank)
        if starts is None:
            return 0.0
        lo, hi = np.searchsorted(starts, after_s, "right"), np.searchsorted(starts, before_s, "left")
        return float(self._cum[rank][hi] - self._cum[rank][lo]) if hi > lo else 0.0
