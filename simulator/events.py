"""The flow-level event loop: coflows progress at max-min fair rates until each completes.

Coflows start at time 0 unless given release times. Between events the rates are constant
(max-min fair on the coflows in the network, :mod:`rankmap.simulator.maxmin`); an event is
the completion of the coflows that finish first, or the release of the next ones, after
which the rates of the components they touch are recomputed -- the fluid model of
flow-level simulators such as m3's flowSim and Parsimon (Zhao et al., "Scalable Tail
Latency Estimation for Data Center Networks", NSDI'23, §4: flows arrive and depart, rates
are max-min fair between events). Events are ordered by time, then coflow index, so runs
are deterministic; completions within ``merge_rtol`` of each other count as one event. A coflow's latency (its steps x alpha) is added after its last byte
and does not hold bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import FlowSet
from rankmap.simulator.maxmin import FairShare
from rankmap.simulator.network import Network, Routing

__all__ = ["FlowResult", "complete_coflows", "simulate_flows"]


@dataclass(frozen=True, eq=False)
class FlowResult:
    """Outcome of one flow set.

    Attributes
    ----------
    finish_s : ndarray
        ``finish_s[C]``: completion time of each coflow, latency included.
    first_rates_bps : ndarray
        ``first_rates_bps[C]``: each coflow's rate while all were active (bytes/s per flow).
    link_bytes : ndarray
        ``link_bytes[L]``: bytes each link carried.
    routing : Routing
    events : int
        Rate recomputations of the event loop.
    rounds : int
        Progressive-filling rounds over all events.
    """

    finish_s: np.ndarray
    first_rates_bps: np.ndarray
    link_bytes: np.ndarray
    routing: Routing
    events: int
    rounds: int

    @property
    def time_s(self) -> float:
        return float(self.finish_s.max()) if self.finish_s.size else 0.0


def complete_coflows(fair: FairShare, size_bytes: np.ndarray, merge_rtol: float = 1e-6, warm: bool = True,
                     release_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Completion times of coflows that start at time 0, or at their release times.

    Parameters
    ----------
    fair : FairShare
        Progressive filling on the coflows' incidence matrix.
    size_bytes : ndarray
        ``size_bytes[C]``: bytes each flow of the coflow carries.
    merge_rtol : float
        Completions within this relative gap of the earliest count as one event.
    warm : bool
        After an event, keep the rates of the coflows slower than the slowest finished one
        and fill only the rest (see below); False recomputes every affected coflow.
    release_s : ndarray, optional
        ``release_s[C]``: when each coflow enters the network, seconds (>= 0). None, or all
        zero, runs the loop of coflows that start together (the same floats bit for bit).

    Returns
    -------
    finish_s : ndarray
        ``finish_s[C]``: absolute completion times (0 for empty coflows).
    first_rates : ndarray
        ``first_rates[C]``: rates at time 0 (with releases: each coflow's rate on entering).
    events : int

    Raises
    ------
    ValueError
        A release time is negative or not finite, or ``release_s`` is not of shape ``[C]``.

    Notes
    -----
    When coflow ``f`` (rate ``r_f``) leaves, progressive filling on the survivors repeats
    the old one up to level ``r_f``: a link of ``f`` that did not saturate below ``r_f``
    with ``f`` on it saturates no earlier without it (its saturation level, free capacity
    over unfrozen load, only rises when an unfrozen coflow leaves), and every other link
    is untouched. So coflows slower than ``r_f`` keep their rates exactly, and filling
    resumes from them (:meth:`FairShare.rates` with ``kept``). In a long pipeline the
    coflow that finishes first is often the fastest, and then nothing is refilled.

    Examples
    --------
    One 10 B/s link, coflows of 10 and 30 bytes: both run at 5 B/s until the first ends at
    2 s, then the second runs alone at 10 B/s and ends at 4 s.

    >>> from scipy import sparse
    >>> fair = FairShare(sparse.csr_array(np.ones((1, 2))), np.array([10.0]))
    >>> complete_coflows(fair, np.array([10.0, 30.0]))[0].tolist()
    [2.0, 4.0]

    The same with the second released at 0.5 s: the first runs alone at 10 B/s (5 bytes
    left at 0.5 s), then both at 5 B/s, so the first ends at 1.5 s with the second 25 bytes
    short; alone again at 10 B/s it ends at 4 s.

    >>> complete_coflows(fair, np.array([10.0, 30.0]), release_s=np.array([0.0, 0.5]))[0].tolist()
    [1.5, 4.0]
    """
    if release_s is not None:
        release_s = np.asarray(release_s, dtype=float)
        if release_s.shape != np.shape(size_bytes):
            raise ValueError(f"release_s has shape {release_s.shape}, expected {np.shape(size_bytes)}")
        if not np.all(np.isfinite(release_s)) or (release_s < 0).any():
            raise ValueError("release times must be finite and >= 0")
        if (release_s > 0).any():
            return _complete_released(fair, size_bytes, release_s, merge_rtol, warm)
    remaining = np.asarray(size_bytes, dtype=float).copy()
    finish = np.zeros(remaining.size)
    active = remaining > 0
    rate = fair.rates(active)
    first = rate.copy()
    now, events = 0.0, 1
    while active.any():
        idx = np.flatnonzero(active)
        with np.errstate(divide="ignore"):
            left = remaining[idx] / rate[idx]          # (A,) seconds to finish at current rates
        step = float(left.min())
        now, done = _retire(idx, left, step, now, remaining, finish, active, rate, merge_rtol)
        if not active.any():
            break
        component = fair.components()                  # labelled once, on the first event with survivors
        events += _refill(fair, component, done, active, rate, warm)
    return finish, first, events


def _retire(idx: np.ndarray, left: np.ndarray, step: float, now: float, remaining: np.ndarray, finish: np.ndarray,
            active: np.ndarray, rate: np.ndarray, merge_rtol: float) -> tuple[float, np.ndarray]:
    """Advance every active coflow ``idx`` by ``step`` seconds at its rate and retire those whose
    ``left`` (seconds to finish) is within ``merge_rtol`` of it; returns the new time and them."""
    done = idx[left <= step * (1 + merge_rtol)]
    now += step
    remaining[idx] -= rate[idx] * step
    finish[done] = now
    remaining[done] = 0.0
    active[done] = False
    return now, done


def _refill(fair: FairShare, component: np.ndarray, done: np.ndarray, active: np.ndarray, rate: np.ndarray,
            warm: bool) -> int:
    """Recompute the rates of the components that lost a coflow (max-min on a disjoint union is
    the union of max-min on the parts); 1 if any did (an event), else 0."""
    redo = active & np.isin(component, np.unique(component[done]))
    if not redo.any():
        return 0
    kept = redo & (rate < rate[done].min()) if warm else None
    rate[redo] = fair.rates(redo, kept, rate)[redo]
    return 1


def _complete_released(fair: FairShare, size_bytes: np.ndarray, release_s: np.ndarray, merge_rtol: float,
                       warm: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`complete_coflows` with release times: a release is an event like a completion.

    On a release the components the new coflows join are refilled from scratch (a coflow
    that arrives lowers rates, so the warm start of a departure does not apply); on a
    completion, as without releases.
    """
    remaining = np.asarray(size_bytes, dtype=float).copy()
    finish = np.zeros(remaining.size)
    pending = remaining > 0
    active = np.zeros(remaining.size, dtype=bool)
    rate, first = np.zeros(remaining.size), np.zeros(remaining.size)
    component = fair.components()
    now, events = 0.0, 0
    while pending.any() or active.any():
        idx = np.flatnonzero(active)
        with np.errstate(divide="ignore"):
            left = remaining[idx] / rate[idx]          # (A,) seconds to finish at current rates
        step = float(left.min()) if idx.size else np.inf
        arrival = float(release_s[pending].min()) if pending.any() else np.inf
        if now + step <= arrival:                      # completions first when they tie with a release
            now, done = _retire(idx, left, step, now, remaining, finish, active, rate, merge_rtol)
            events += _refill(fair, component, done, active, rate, warm)
            continue
        remaining[idx] -= rate[idx] * (arrival - now)
        now = arrival
        new = pending & (release_s <= now)
        pending &= ~new
        active |= new
        redo = active & np.isin(component, np.unique(component[new]))
        rate[redo] = fair.rates(redo)[redo]
        first[new] = rate[new]
        events += 1
    return finish, first, events


def simulate_flows(network: Network, flows: FlowSet, routing: EcmpConfig, efficiency: float = 1.0,
                   route: Routing | None = None, release_s: np.ndarray | None = None) -> FlowResult:
    """Route a flow set and run it to completion.

    Parameters
    ----------
    network : Network
    flows : FlowSet
    routing : EcmpConfig
    efficiency : float
        Fraction of every link's line rate a transfer attains (0 < e <= 1).
    route : Routing, optional
        A routing of ``flows`` computed earlier (skips :meth:`Network.route`).
    release_s : ndarray, optional
        ``release_s[C]``: when each coflow enters the network (default: all at 0).

    Returns
    -------
    FlowResult
    """
    route = route if route is not None else network.route(flows, routing)
    fair = FairShare(route.matrix, network.capacity_bps * efficiency)
    finish, first, events = complete_coflows(fair, flows.coflow_bytes, release_s=release_s)
    finish = np.where(flows.coflow_bytes > 0, finish + flows.coflow_latency_s, 0.0)
    link_bytes = route.matrix @ flows.coflow_bytes
    return FlowResult(finish, first, link_bytes, route, events, fair.rounds)
