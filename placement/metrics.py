"""What a placement costs on the network: bytes and ring edges crossing ToR groups.

Every group's traffic is laid on rank-to-rank edges (ring edges in rank order, pipeline
hops, all-to-all pairs; see :mod:`rankmap.job.traffic`); an edge whose two ranks sit in
different ToR groups crosses the spine, and its bytes load the uplinks of both groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.job.layout import ParallelLayout
from rankmap.job.traffic import GroupTraffic, weighted_edges
from rankmap.topology.model import Cluster

__all__ = ["PlacementMetrics", "evaluate", "measure_order", "human_bytes"]


@dataclass(frozen=True)
class PlacementMetrics:
    """Network cost of one placement for one iteration.

    Attributes
    ----------
    cross_tor_bytes : float
        Bytes per iteration on edges whose ends are in different ToR groups.
    cross_edges : dict of str to int
        Per group kind, rank-level edges crossing ToR groups.
    max_spread : dict of str to int
        Per group kind, the most ToR groups any one group spans.
    uplink_bytes : ndarray
        ``uplink_bytes[K]``: bytes per iteration through each ToR group's uplinks
        (a crossing edge counts at both ends).
    """

    cross_tor_bytes: float
    cross_edges: dict
    max_spread: dict
    uplink_bytes: np.ndarray

    @property
    def max_uplink_bytes(self) -> float:
        return float(self.uplink_bytes.max()) if self.uplink_bytes.size else 0.0


def evaluate(layout: ParallelLayout, traffic: dict[str, GroupTraffic], rank_tor: np.ndarray,
             n_tor: int) -> PlacementMetrics:
    """Cost of a placement.

    Parameters
    ----------
    layout : ParallelLayout
    traffic : dict of str to GroupTraffic
        From :func:`rankmap.job.traffic.job_traffic`.
    rank_tor : ndarray
        ``rank_tor[W]``: ToR group index of each global rank.
    n_tor : int
        Number of ToR groups in the cluster (K).

    Returns
    -------
    PlacementMetrics
    """
    uplink = np.zeros(n_tor)
    total = 0.0
    cross_edges: dict[str, int] = {}
    spread: dict[str, int] = {}
    for kind, tr in traffic.items():
        groups_tor = np.sort(rank_tor[layout.groups(kind)], axis=1)
        spread[kind] = int(((np.diff(groups_tor, axis=1) != 0).sum(axis=1) + 1).max())
        cross_edges[kind] = 0
        for (src, dst), nbytes in weighted_edges(layout, tr):
            cross = rank_tor[src] != rank_tor[dst]
            cross_edges[kind] += int(cross.sum())
            if nbytes and cross.any():
                total += nbytes * int(cross.sum())
                ends = np.concatenate([rank_tor[src[cross]], rank_tor[dst[cross]]])
                uplink += np.bincount(ends, minlength=n_tor) * nbytes
    return PlacementMetrics(total, cross_edges, spread, uplink)


def measure_order(cluster: Cluster, layout: ParallelLayout, traffic: dict[str, GroupTraffic], hosts: list[str],
                  nprocs: int | list[int]) -> PlacementMetrics:
    """Cost of launching a host order: host ``i`` gets node rank ``i`` and the next ``nprocs``
    (or ``nprocs[i]``) global ranks, as launchers number them.

    The one place a host order is measured: the planner's candidates and baselines, plans on
    hosts of different GPU counts, and re-plans all call it.

    Parameters
    ----------
    cluster : Cluster
        Gives each host's ToR group.
    layout : ParallelLayout
    traffic : dict of str to GroupTraffic
        From :func:`rankmap.job.traffic.job_traffic`.
    hosts : list of str
        ``hosts[N]``: the host of each node rank.
    nprocs : int or list of int
        Ranks per host, the same for all or ``nprocs[N]``; they sum to the world size W.

    Returns
    -------
    PlacementMetrics
    """
    tor_index = {g.name: g.index for g in cluster.tor_groups}
    node_tor = np.array([tor_index[cluster.host(h).tor_group] for h in hosts])  # (N,)
    return evaluate(layout, traffic, np.repeat(node_tor, nprocs), len(tor_index))


def human_bytes(n: float) -> str:
    """Decimal units, as network figures are quoted.

    Examples
    --------
    >>> human_bytes(4.3387e12), human_bytes(55.6e9), human_bytes(12)
    ('4.34 TB', '55.60 GB', '12 B')
    """
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"
