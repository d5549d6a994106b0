"""The flow-level event loop: coflows progress at max-min fair rates until each completes.

All coflows of a set start together. Between events the rates are constant (max-min fair
on the remaining coflows, :mod:`rankmap.simulator.maxmin`); an event is the completion of the
coflows that finish first, after which the rates are recomputed -- the fluid model of
flow-level simulators such as m3's flowSim and Parsimon. Events are ordered by time, then
coflow index, so runs are deterministic; completions within ``merge_rtol`` of each other
count as one event. A coflow's latency (its steps x alpha) is added after its last byte
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


def complete_coflows(fair: FairShare, size_bytes: np.ndarray, merge_rtol: float = 1e-6, warm: bool = True
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """Completion times of coflows that all start at time 0.

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

    Returns
    -------
    finish_s : ndarray
        ``finish_s[C]`` (0 for empty coflows).
    first_rates : ndarray
        ``first_rates[C]``: rates at time 0.
    events : int

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
    """
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
        done = idx[left <= step * (1 + merge_rtol)]
        now += step
        remaining[idx] -= rate[idx] * step
        finish[done] = now
        remaining[done] = 0.0
        active[done] = False
        # Only the components that lost a coflow change rates (max-min on a disjoint union
        # is the union of max-min on the parts).
        if not active.any():
            break
        component = fair.components()                  # labelled once, on the first event with survivors
        redo = active & np.isin(component, np.unique(component[done]))
        if redo.any():
            kept = redo & (rate < rate[done].min()) if warm else None
            rate[redo] = fair.rates(redo, kept, rate)[redo]
            events += 1
    return finish, first, events


def simulate_flows(network: Network, flows: FlowSet, routing: EcmpConfig, efficiency: float = 1.0,
                   route: Routing | None = None) -> FlowResult:
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

    Returns
    -------
    FlowResult
    """
    route = route if route is not None else network.route(flows, routing)
    fair = FairShare(route.matrix, network.capacity_bps * efficiency)
    finish, first, events = complete_coflows(fair, flows.coflow_bytes)
    finish = np.where(flows.coflow_bytes > 0, finish + flows.coflow_latency_s, 0.0)
    link_bytes = route.matrix @ flows.coflow_bytes
    return FlowResult(finish, first, link_bytes, route, events, fair.rounds)
