"""ECMP over many hash seeds: distributions of collisions and of what they cost.

One seed is one draw of queue-pair source ports and switch salts; the statistics of a
flow set over many seeds show how a placement fares under ECMP in general, not in one
lucky or unlucky draw. Per seed, over the uplinks of the rail ToRs that send traffic to
the spine:

- flows per used uplink (mean) and on the most loaded uplink;
- the fraction of those uplinks left idle;
- the slowest coflow's slowdown: its max-min rate under packet spraying (the ideal) over
  its rate under ECMP, at time 0;
- the bandwidth lost to collisions: 1 - (sum of ECMP rates) / (sum of sprayed rates) over
  the coflows that cross the spine, each rate weighted by the coflow's flows.

:func:`balls_into_bins` gives the closed forms these reproduce for m flows hashed onto
k uplinks: the occupancy of the balls-into-bins model (Mitzenmacher and Upfal,
*Probability and Computing*, 2005, §5.2).

On a fabric of several tiers the same figures are also kept per tier of uplinks (rail
ToR uplinks, then each tier's up cables): idle fraction and most flows on one cable over
the switches that send traffic up, and the bandwidth lost over the coflows that climb
above that tier. One salt everywhere shows here as idle uplinks at the second tier
(hash polarisation) that per-switch salts do not leave.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rankmap.simulator.collectives import CollectiveConfig
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import FlowSet, RankPlacement
from rankmap.simulator.iteration import PHASES, IterationResult, simulate_phase
from rankmap.simulator.maxmin import FairShare
from rankmap.simulator.network import Network

TIER_STATS = ("idle_uplink_fraction", "max_flows_per_uplink", "bandwidth_lost")

__all__ = ["TIER_STATS", "EcmpStats", "IterationSweep", "balls_into_bins", "cables_by_load", "ecmp_stats", "summarize",
           "sweep_iteration"]


@dataclass(frozen=True, eq=False)
class EcmpStats:
    """Per-seed ECMP statistics of one flow set (arrays of shape ``[S]``, one entry per seed)."""

    seeds: tuple
    flows_per_used_uplink: np.ndarray
    max_flows_per_uplink: np.ndarray
    busiest_uplink_mean: np.ndarray
    idle_uplink_fraction: np.ndarray
    slowest_slowdown: np.ndarray
    bandwidth_lost: np.ndarray
    tiers: np.ndarray | None = None

    def tier_summary(self) -> list[dict]:
        """Per tier of uplinks (``tiers[S, T, 3]``): summaries of idle fraction, most flows
        on one uplink, and bandwidth lost; empty on a one-tier fabric."""
        if self.tiers is None:
            return []
        return [{name: summarize(self.tiers[:, t, i]) for i, name in enumerate(TIER_STATS)}
                for t in range(self.tiers.shape[1])]

    def summary(self) -> dict:
        """``{statistic: {"mean", "min", "p50", "p95", "max"}}`` over seeds."""
        names = ("flows_per_used_uplink", "max_flows_per_uplink", "busiest_uplink_mean", "idle_uplink_fraction",
                 "slowest_slowdown", "bandwidth_lost")
        return {name: summarize(getattr(self, name)) for name in names}


def summarize(values: np.ndarray) -> dict:
    """Mean, minimum, median, 95th percentile and maximum of a sample (empty sample: zeros).

    Examples
    --------
    >>> {k: round(v, 3) for k, v in summarize(np.array([1.0, 2.0, 3.0, 4.0])).items()}
    {'mean': 2.5, 'min': 1.0, 'p50': 2.5, 'p95': 3.85, 'max': 4.0}
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return {"mean": 0.0, "min": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    return {"mean": float(values.mean()), "min": float(values.min()), "p50": float(np.percentile(values, 50)),
            "p95": float(np.percentile(values, 95)), "max": float(values.max())}


def balls_into_bins(m: int, k: int) -> dict:
    """Closed forms for ``m`` flows hashed uniformly onto ``k`` equal uplinks.

    Returns
    -------
    dict
        ``idle_fraction`` = (1 - 1/k)^m, ``share_probability`` (a given flow shares its
        uplink) = 1 - (1 - 1/k)^(m-1), and ``throughput`` = (1 - (1 - 1/k)^m) k / m: the
        aggregate, as a fraction of ideal, when every flow runs at one uplink's line rate.

    Examples
    --------
    >>> round(balls_into_bins(32, 32)["throughput"], 3)
    0.638
    """
    idle = (1 - 1 / k) ** m
    return {"idle_fraction": idle, "share_probability": 1 - (1 - 1 / k) ** (m - 1),
            "throughput": (1 - idle) * k / m}


def cables_by_load(flows_per_switch: np.ndarray, k: int, max_flows: int) -> np.ndarray:
    """Expected number of uplink cables carrying ``j = 0..max_flows`` flows.

    Switch ``t`` hashes ``m_t`` flows uniformly and independently onto its ``k`` uplinks,
    so the flows on one cable follow Binomial(m_t, 1/k) (the balls-into-bins model,
    Mitzenmacher and Upfal, *Probability and Computing*, 2005, §5.2) and the expected
    count of cables with ``j`` flows is ``sum_t k * C(m_t, j) k^-j (1 - 1/k)^(m_t - j)``.

    Parameters
    ----------
    flows_per_switch : ndarray
        ``m[T]``: flows each switch hashes.
    k : int
        Uplinks per switch.
    max_flows : int

    Returns
    -------
    ndarray
        ``expected[max_flows + 1]``; sums to ``k * T`` when ``max_flows >= max(m)``.

    Examples
    --------
    Two flows on two uplinks: both on one cable with probability 1/2.

    >>> cables_by_load(np.array([2]), 2, 2).round(12).tolist()
    [0.5, 1.0, 0.5]
    """
    from scipy.stats import binom

    j = np.arange(max_flows + 1)
    m = np.asarray(flows_per_switch, dtype=np.int64)
    return k * binom.pmf(j[None, :], m[:, None], 1.0 / k).sum(axis=0) if m.size else np.zeros(j.size)


def _seed_row(network: Network, route, rate: np.ndarray, ideal: np.ndarray, per_coflow: np.ndarray) -> tuple:
    """(flows per used uplink, max, mean busiest per ToR, idle fraction, slowest slowdown, lost) of one seed."""
    if route.uplink.size == 0:
        return 0.0, 0.0, 0.0, 0.0, 1.0, 0.0
    up = network.link_range("tor-up")
    counts = np.bincount(route.uplink - up.start, minlength=len(up)).reshape(-1, network.uplinks)
    counts = counts[np.unique((route.uplink - up.start) // network.uplinks)]   # (active ToRs, uplinks)
    cross = np.unique(route.uplink_coflow)
    weight = per_coflow[cross]
    lost = 1.0 - float((weight * rate[cross]).sum() / (weight * ideal[cross]).sum())
    return (float(counts[counts > 0].mean()), float(counts.max()), float(counts.max(axis=1).mean()),
            float((counts == 0).mean()), float((ideal[cross] / rate[cross]).max()), lost)


def _tier_row(network: Network, route, rate: np.ndarray, ideal: np.ndarray, per_coflow: np.ndarray) -> list:
    """Per tier of uplinks ``t = 0..depth-1``: (idle fraction, most flows on one, bandwidth lost)."""
    out = []
    for t in range(network.depth):
        if t == 0:
            links, coflows, kind, k = route.uplink, route.uplink_coflow, "tor-up", network.uplinks
        else:
            (links, coflows), kind = route.tier_uplinks[t - 1], f"tier{t}-up"
            k = network.fabric.levels[t - 1].up_ports
        if links.size == 0:
            out.append((0.0, 0.0, 0.0))
            continue
        counts = np.bincount(links - network.link_range(kind).start, minlength=len(network.link_range(kind)))
        counts = counts.reshape(-1, k)
        counts = counts[counts.sum(axis=1) > 0]                  # (sending switches, k)
        cross = np.unique(coflows)
        weight = per_coflow[cross]
        lost = 1.0 - float((weight * rate[cross]).sum() / (weight * ideal[cross]).sum())
        out.append((float((counts == 0).mean()), float(counts.max()), lost))
    return out


def _stats(seeds: tuple, rows: list, tiers: list | None = None) -> EcmpStats:
    cols = np.array(rows, dtype=float).reshape(len(seeds), 6).T
    return EcmpStats(seeds, *cols, tiers=np.array(tiers, dtype=float) if tiers else None)


def ecmp_stats(network: Network, flows: FlowSet, seeds, routing: EcmpConfig | None = None,
               efficiency: float = 1.0) -> EcmpStats:
    """ECMP statistics of ``flows`` for every seed in ``seeds`` (rates at time 0).

    Parameters
    ----------
    network : Network
    flows : FlowSet
    seeds : iterable of int
    routing : EcmpConfig, optional
        Queue pairs and salting; its ``seed`` is replaced by each seed in turn.
    efficiency : float

    Returns
    -------
    EcmpStats
    """
    routing = routing or EcmpConfig()
    seeds = tuple(int(s) for s in seeds)
    capacity = network.capacity_bps * efficiency
    ideal = FairShare(network.route(flows, dataclasses.replace(routing, mode="spray")).matrix, capacity).rates()
    per_coflow = np.bincount(flows.coflow, minlength=flows.n_coflows)
    rows, tiers = [], []
    for seed in seeds:
        route = network.route(flows, dataclasses.replace(routing, mode="ecmp", seed=seed))
        rate = FairShare(route.matrix, capacity).rates()
        rows.append(_seed_row(network, route, rate, ideal, per_coflow))
        if network.depth > 1:
            tiers.append(_tier_row(network, route, rate, ideal, per_coflow))
    return _stats(seeds, rows, tiers)


@dataclass(frozen=True, eq=False)
class IterationSweep:
    """One placement's iteration under many ECMP seeds.

    Attributes
    ----------
    seeds : tuple of int
    first : IterationResult
        The iteration under the first seed (per-group times, link loads).
    ideal : IterationResult
        The iteration under packet spraying (no collisions).
    comm_time_s : ndarray
        ``comm_time_s[S]`` per seed.
    phase_time_s : dict of str to ndarray
        ``{phase: times[S]}``.
    ecmp : dict of str to EcmpStats
        Per phase.
    runs : tuple of IterationResult
        The iteration under each seed (``runs[0]`` is ``first``).
    """

    seeds: tuple
    first: IterationResult
    ideal: IterationResult
    comm_time_s: np.ndarray
    phase_time_s: dict
    ecmp: dict
    runs: tuple = ()


def sweep_iteration(network: Network, placement: RankPlacement, layout, ops, seeds,
                    config: CollectiveConfig | None = None, routing: EcmpConfig | None = None) -> IterationSweep:
    """Simulate an iteration under each seed, under spraying, and gather ECMP statistics per phase.

    Parameters
    ----------
    network, placement, layout, ops, config
        As for :func:`rankmap.simulator.iteration.simulate_iteration`.
    seeds : iterable of int
        At least one.
    routing : EcmpConfig, optional
        Mode, queue pairs and salting; its seed is replaced by each seed in turn.

    Returns
    -------
    IterationSweep
    """
    config = config or CollectiveConfig()
    routing = routing or EcmpConfig()
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("sweep_iteration needs at least one seed")
    spray = dataclasses.replace(routing, mode="spray")
    ideal_phases, times, stats = [], {}, {}
    per_seed: list[list] = [[] for _ in seeds]
    for name in PHASES:
        got = simulate_phase(network, placement, layout, ops, name, config, spray)
        if got is None:
            continue
        ideal_phase, flows, ideal_result = got
        ideal_phases.append(ideal_phase)
        per_coflow = np.bincount(flows.coflow, minlength=flows.n_coflows)
        rows, phase_times, tiers = [], [], []
        for i, seed in enumerate(seeds):
            phase, _, result = simulate_phase(network, placement, layout, ops, name, config,
                                              dataclasses.replace(routing, seed=seed))
            per_seed[i].append(phase)
            phase_times.append(phase.time_s)
            rows.append(_seed_row(network, result.routing, result.first_rates_bps, ideal_result.first_rates_bps,
                                  per_coflow))
            if network.depth > 1 and routing.mode == "ecmp":
                tiers.append(_tier_row(network, result.routing, result.first_rates_bps,
                                       ideal_result.first_rates_bps, per_coflow))
        times[name] = np.array(phase_times)
        stats[name] = _stats(seeds, rows, tiers)
    total = np.sum([t for t in times.values()], axis=0) if times else np.zeros(len(seeds))
    runs = tuple(IterationResult(tuple(ph), float(sum(p.time_s for p in ph))) for ph in per_seed)
    ideal = IterationResult(tuple(ideal_phases), float(sum(p.time_s for p in ideal_phases)))
    return IterationSweep(seeds, runs[0], ideal, np.asarray(total, dtype=float), times, stats, runs)
