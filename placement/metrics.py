"""What a placement costs on the network: bytes and ring edges crossing ToR groups.

Every group's traffic is laid on rank-to-rank edges (ring edges in rank order, pipeline
hops, all-to-all pairs; see :mod:`placement.traffic`); an edge whose two ranks sit in
different ToR groups crosses the spine, and its bytes load the uplinks of both groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layout import ParallelLayout
from .traffic import GroupTraffic

__all__ = ["PlacementMetrics", "group_edges", "evaluate", "alignment_problems", "human_bytes"]


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


def group_edges(layout: ParallelLayout, traffic: GroupTraffic) -> tuple[np.ndarray, np.ndarray]:
    """Rank-level edges ``(src[E], dst[E])`` of every group of one kind.

    Ring: ``r_i -> r_(i+1 mod n)`` (n edges per group when n > 1); chain: ``r_i - r_(i+1)``
    (n - 1 hops); all-to-all: every ordered pair (n(n-1)).
    """
    groups = layout.groups(traffic.kind)
    n = groups.shape[1]
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if traffic.pattern == "ring":
        return groups.ravel(), np.roll(groups, -1, axis=1).ravel()
    if traffic.pattern == "chain":
        return groups[:, :-1].ravel(), groups[:, 1:].ravel()
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    return groups[:, i].ravel(), groups[:, j].ravel()


def _weighted_edges(layout: ParallelLayout, tr: GroupTraffic) -> list:
    """``[((src, dst), bytes per edge)]``: a kind's edges, plus interleaved wrap hops."""
    out = [(group_edges(layout, tr), tr.edge_bytes)]
    if tr.wrap_bytes:
        groups = layout.groups(tr.kind)
        out.append(((groups[:, -1], groups[:, 0]), tr.wrap_bytes))
    return out


def evaluate(layout: ParallelLayout, traffic: dict[str, GroupTraffic], rank_tor: np.ndarray,
             n_tor: int) -> PlacementMetrics:
    """Cost of a placement.

    Parameters
    ----------
    layout : ParallelLayout
    traffic : dict of str to GroupTraffic
        From :func:`placement.traffic.job_traffic`.
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
        for (src, dst), nbytes in _weighted_edges(layout, tr):
            cross = rank_tor[src] != rank_tor[dst]
            cross_edges[kind] += int(cross.sum())
            if nbytes and cross.any():
                total += nbytes * int(cross.sum())
                ends = np.concatenate([rank_tor[src[cross]], rank_tor[dst[cross]]])
                uplink += np.bincount(ends, minlength=n_tor) * nbytes
    return PlacementMetrics(total, cross_edges, spread, uplink)


def alignment_problems(layout: ParallelLayout, traffic: dict[str, GroupTraffic],
                       rank_host: np.ndarray, rank_local: np.ndarray, limit: int = 3) -> list[str]:
    """Why a placement breaks the rules: a TP group leaving a host, or an inter-host edge
    between different local ranks (not rail-aligned: its traffic would change rails).

    Returns
    -------
    list of str
        Up to ``limit`` messages per kind; empty when the placement is aligned.
    """
    problems: list[str] = []
    tp_hosts = rank_host[layout.groups("tp")]
    bad = np.nonzero((tp_hosts != tp_hosts[:, :1]).any(axis=1))[0]
    if bad.size:
        ranks = layout.groups("tp")[bad[0]].tolist()
        problems.append(f"TP group {ranks} spans {len(set(tp_hosts[bad[0]].tolist()))} hosts")
    for kind, tr in traffic.items():
        src, dst = (np.concatenate(parts) for parts in zip(*(e for e, _ in _weighted_edges(layout, tr))))
        inter = rank_host[src] != rank_host[dst]
        off_rail = np.nonzero(inter & (rank_local[src] != rank_local[dst]))[0]
        for e in off_rail[:limit]:
            a, b = int(src[e]), int(dst[e])
            problems.append(f"{kind.upper()} edge rank {a} -> rank {b} joins local rank {rank_local[a]} "
                            f"to local rank {rank_local[b]} on another host (not rail-aligned)")
    return problems


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
