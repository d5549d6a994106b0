"""What a placement costs on the network: bytes and ring edges crossing each tier.

Every group's traffic (DP, PP, CP, EP, expert-DP) is laid on rank-to-rank edges (ring
edges in rank order, pipeline hops, all-to-all pairs; see :mod:`rankmap.job.traffic`);
an edge whose two ranks sit in different ToR groups crosses the spine, and its bytes load
the uplinks of both groups. On a deeper fabric an edge whose ranks sit in different
level-``l`` domains (pods, ...) also crosses the tier above level ``l``; the weighted cost
sums each tier's bytes times its weight (:mod:`rankmap.placement.tier_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankmap.job.layout import ParallelLayout
from rankmap.job.traffic import GroupTraffic, weighted_edges
from rankmap.placement.tier_weights import default_tier_weights
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
    tier_bytes : tuple of float
        ``tier_bytes[L]``: bytes per iteration crossing the tier above level ``l`` (level 0:
        leaving ToR groups, equal to ``cross_tor_bytes``; level 1: leaving pods; ...).
    tier_spread : dict of str to tuple of int
        Per group kind (dp, pp), ``[L]``: the most level-``l`` domains any one group spans
        (Arnold's spread, arXiv 2509.15940).
    weighted_bytes : float or None
        ``sum_l w[l] * tier_bytes[l]`` with the planner's tier weights.
    """

    cross_tor_bytes: float
    cross_edges: dict
    max_spread: dict
    uplink_bytes: np.ndarray
    tier_bytes: tuple = ()
    tier_spread: dict = field(default_factory=dict)
    weighted_bytes: float | None = None

    @property
    def cost(self) -> float:
        """The optimised cost: tier-weighted bytes (cross-ToR bytes without tiers)."""
        return self.cross_tor_bytes if self.weighted_bytes is None else self.weighted_bytes

    @property
    def max_uplink_bytes(self) -> float:
        return float(self.uplink_bytes.max()) if self.uplink_bytes.size else 0.0


def evaluate(layout: ParallelLayout, traffic: dict[str, GroupTraffic], rank_tor: np.ndarray,
             n_tor: int, rank_domains: np.ndarray | None = None, weights: tuple | None = None) -> PlacementMetrics:
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
    rank_domains : ndarray, optional
        ``rank_domains[L, W]``: domain index of each rank at levels ``0 .. L-1`` (row 0 the
        ToR group); default: ToR groups only.
    weights : tuple of float, optional
        ``w[L]``: tier weights (default all 1).

    Returns
    -------
    PlacementMetrics
    """
    uplink = np.zeros(n_tor)
    total = 0.0
    cross_edges: dict[str, int] = {}
    spread: dict[str, int] = {}
    kinds = _groups_and_edges(layout, traffic)
    for kind, tr in traffic.items():
        groups, edges = kinds[kind]
        groups_tor = np.sort(rank_tor[groups], axis=1)
        spread[kind] = int(((np.diff(groups_tor, axis=1) != 0).sum(axis=1) + 1).max())
        cross_edges[kind] = 0
        for (src, dst), nbytes in edges:
            cross = rank_tor[src] != rank_tor[dst]
            cross_edges[kind] += int(cross.sum())
            if nbytes and cross.any():
                total += nbytes * int(cross.sum())
                ends = np.concatenate([rank_tor[src[cross]], rank_tor[dst[cross]]])
                uplink += np.bincount(ends, minlength=n_tor) * nbytes
    domains = rank_tor[None, :] if rank_domains is None else rank_domains
    tier_bytes, tier_spread = _tier_figures(kinds, traffic, domains)
    w = weights if weights is not None else (1.0,) * len(tier_bytes)
    weighted = float(sum(a * b for a, b in zip(w, tier_bytes)))
    return PlacementMetrics(total, cross_edges, spread, uplink, tier_bytes, tier_spread, weighted)


# The layout of the latest evaluation and, per kind, its traffic, groups and weighted edges: a
# plan measures its candidates and every baseline on one layout (a cache of one, by identity).
_last_layout: list = [None, {}]


def _groups_and_edges(layout: ParallelLayout, traffic: dict[str, GroupTraffic]) -> dict:
    """``{kind: (groups[n, size], weighted edges)}`` (:meth:`ParallelLayout.groups`,
    :func:`rankmap.job.traffic.weighted_edges`), built once per layout and kind's traffic."""
    if _last_layout[0] is not layout:
        _last_layout[:] = [layout, {}]
    table = _last_layout[1]
    out = {}
    for kind, tr in traffic.items():
        if kind not in table or table[kind][0] is not tr:
            table[kind] = (tr, layout.groups(kind), weighted_edges(layout, tr))
        out[kind] = table[kind][1:]
    return out


def _tier_figures(kinds: dict, traffic: dict[str, GroupTraffic], domains: np.ndarray) -> tuple[tuple, dict]:
    """Bytes crossing each level (``[L]``) and the DP/PP spread per level (``{kind: [L]}``);
    ``kinds`` from :func:`_groups_and_edges`."""
    tier_bytes = np.zeros(domains.shape[0])
    spread = {}
    for kind in traffic:
        groups, edges = kinds[kind]
        if kind in ("dp", "pp"):
            per = np.sort(domains[:, groups], axis=2)                      # (L, groups, n)
            spread[kind] = tuple(int(((np.diff(d, axis=1) != 0).sum(axis=1) + 1).max()) for d in per)
        for (src, dst), nbytes in edges:
            if nbytes:
                tier_bytes += nbytes * (domains[:, src] != domains[:, dst]).sum(axis=1)
    return tuple(float(b) for b in tier_bytes), spread


def measure_order(cluster: Cluster, layout: ParallelLayout, traffic: dict[str, GroupTraffic], hosts: list[str],
                  nprocs: int | list[int], weights: tuple | None = None) -> PlacementMetrics:
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
    weights : tuple of float, optional
        ``w[L]``: tier weights (default :func:`rankmap.placement.tier_weights.default_tier_weights`).

    Returns
    -------
    PlacementMetrics
    """
    K = len(cluster.tor_groups)
    node_tor = np.array(cluster.group_indices(hosts), dtype=np.int64)                   # (N,)
    levels = np.array([cluster.domain_index(level) for level in range(cluster.depth)],
                      dtype=np.int64).reshape(cluster.depth, K)                           # (L, K)
    rank_tor = np.repeat(node_tor, nprocs)                                               # (W,)
    if weights is None:
        weights = default_tier_weights(cluster)
    return evaluate(layout, traffic, rank_tor, K, levels[:, rank_tor], weights)


def human_bytes(n: float) -> str:
    """Decimal units, as network figures are quoted.

    Examples
    --------
    >>> human_bytes(4.3387e12), human_bytes(55.6e9), human_bytes(12), human_bytes(26254e12)
    ('4.34 TB', '55.60 GB', '12 B', '26.25 PB')
    """
    for unit, scale in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"
