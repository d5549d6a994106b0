"""Clock offsets between hosts, estimated from collective completion times.

The members of a collective finish it together: none can leave an all-reduce, all-gather
or reduce-scatter before the last member's data arrived, so their end times
(``start_s + dur_s``) differ by the network's last hop, microseconds to milliseconds,
while wall clocks of different hosts may differ by 0.1 s or more (NTP; MegaScale, NSDI'24
§5 aligns its timeline the same way). Model ``end[r] = T[instance] + offset[host(r)] +
noise`` and solve it robustly by alternating medians: each instance's time is the median
of its members' corrected ends, each host's offset the median of its ranks' residuals;
offsets are relative to a reference host (the host of the lowest rank) and converge in a
few rounds when the hosts are linked by shared collectives. Point-to-point operations are
left out (a send may complete before its receive).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

__all__ = ["collective_instances", "clock_offsets", "corrected_start"]


def collective_instances(events) -> dict:
    """``{(group, members, seq): [event, ...]}`` of the collectives (not P2P) in ``events``."""
    out: dict = defaultdict(list)
    for e in events:
        if e.group is not None and not e.phase.endswith(("-send", "-recv")):
            out[e.group, tuple(sorted(set(e.peers) | {e.rank})), e.seq].append(e)
    return out


def clock_offsets(events, host_of: dict, rounds: int = 8) -> dict:
    """``{host: seconds}`` to subtract from that host's wall-clock times (reference host: 0.0),
    for the hosts that have events (a host without records has no clock to correct).

    Parameters
    ----------
    events : iterable of Event
    host_of : dict
        Rank -> host.

    Examples
    --------
    >>> from rankmap.diagnose.records import Event
    >>> evs = [Event(rank=r, host="ab"[r], local_rank=0, step=1, phase="dp-all-reduce", start_s=10.0 * k + 0.3 * r,
    ...              dur_s=0.5, group="dp", peers=(0, 1), seq=k) for k in range(3) for r in (0, 1)]
    >>> {h: round(v, 6) for h, v in clock_offsets(evs, {0: "a", 1: "b"}).items()}
    {'a': 0.0, 'b': 0.3}
    """
    events = list(events)
    hosts = sorted({host_of.get(e.rank, "?") for e in events})
    offsets = {h: 0.0 for h in hosts}
    instances = [evs for evs in collective_instances(events).values()
                 if len({host_of.get(e.rank, "?") for e in evs}) > 1]
    if not instances:
        return offsets
    ref = host_of.get(min(e.rank for evs in instances for e in evs), hosts[0])  # hosts: non-empty here
    for _ in range(rounds):
        residuals: dict = defaultdict(list)
        for evs in instances:
            ends = np.array([e.start_s + e.dur_s for e in evs])
            own = np.array([offsets.get(host_of.get(e.rank, "?"), 0.0) for e in evs])
            centre = float(np.median(ends - own))
            for e, end in zip(evs, ends):
                residuals[host_of.get(e.rank, "?")].append(end - centre)
        new = {h: float(np.median(v)) for h, v in residuals.items()}
        base = new.get(ref, 0.0)
        offsets = {h: new.get(h, 0.0) - base for h in hosts}
    return offsets


def corrected_start(e, host_of: dict, offsets: dict) -> float:
    """An event's start on the reference host's clock."""
    return e.start_s - offsets.get(host_of.get(e.rank, "?"), 0.0)
