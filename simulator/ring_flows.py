"""Ring decomposition of a collective into flows, and the flow-building helpers it shares with the trees.

NCCL runs a ring collective as ``channels`` rings, each entering a host at one rank (so on
that rank's rail) and crossing the host over NVLink; between hosts the ring follows rank
order (NCCL's ring search, ``src/graph/rings.cc``). Used by :mod:`rankmap.simulator.collectives`.
"""

from __future__ import annotations

import numpy as np

from rankmap.simulator.ecmp import mix64
from rankmap.simulator.flows import FlowSet, RankPlacement

__all__ = ["connection_key", "make_flows", "host_segments", "ring_flows"]


def connection_key(comm: str, channel) -> np.ndarray:
    """Connection key of a communicator's channel (uint64)."""
    name = int.from_bytes(comm.encode()[:8].ljust(8, b"\0"), "little")
    return mix64(np.uint64(name) ^ mix64(np.asarray(channel, dtype=np.uint64) + np.uint64(1)))


def make_flows(pl: RankPlacement, src: np.ndarray, dst: np.ndarray, coflow: np.ndarray, conn: np.ndarray,
           coflow_bytes, coflow_latency_s, coflow_group, label: str, src_nic: np.ndarray | None = None,
           local_latency_s=None, conns: int = 1) -> FlowSet:
    """Flows from rank ``src[F]`` to rank ``dst[F]``; the sender's NIC is its own unless given.

    ``coflow_latency_s`` is the latency of a coflow with a flow between hosts; a coflow
    all on NVLink gets ``local_latency_s`` instead when given. ``conns``: connections
    each flow is split over (for the rate cap).
    """
    conn = np.broadcast_to(conn, np.shape(src)).ravel().astype(np.uint64)
    src, dst = src.ravel(), dst.ravel()
    snic = pl.nic[src] if src_nic is None else src_nic.ravel()
    c = np.asarray(coflow_group).size
    coflow = coflow.ravel()
    latency = np.broadcast_to(np.asarray(coflow_latency_s, dtype=float), (c,)).copy()
    if local_latency_s is not None:
        network = np.zeros(c, dtype=bool)
        network[coflow[pl.host[src] != pl.host[dst]]] = True
        latency = np.where(network, latency, np.broadcast_to(np.asarray(local_latency_s, dtype=float), (c,)))
    return FlowSet(pl.host[src], pl.gpu[src], snic, pl.host[dst], pl.gpu[dst], pl.nic[dst], coflow, conn,
                   np.broadcast_to(np.asarray(coflow_bytes, dtype=float), (c,)).copy(), latency,
                   np.asarray(coflow_group, dtype=np.int64), np.zeros(c, dtype=np.int64), (label,),
                   None if conns == 1 else np.full(c, conns, dtype=np.int64))


def host_segments(node: np.ndarray):
    """Per element of ``node[G, n]``: host segment index, segment start column, length, offset."""
    g, n = node.shape
    new = np.ones((g, n), dtype=bool)
    new[:, 1:] = node[:, 1:] != node[:, :-1]
    seg = np.cumsum(new, axis=1) - 1
    pos = np.broadcast_to(np.arange(n), (g, n))
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    flat = seg + (np.arange(g) * n)[:, None]
    length = np.bincount(flat.ravel(), minlength=g * n)[flat]
    return seg, start, length, pos - start


def ring_flows(pl: RankPlacement, groups: np.ndarray, factor: float, size_bytes: float, steps: int, config, label, comm):
    """Flows of ``channels`` rings per group of ``groups[G, n]``, each edge carrying ``factor * size_bytes /
    channels`` bytes, with ``steps`` algorithm steps of latency (``config`` is a CollectiveConfig)."""
    g, n = groups.shape
    seg, start, length, offset = host_segments(pl.node[groups])
    multi = seg[:, -1] > 0
    channels = config.channels or (int(length[multi].min()) * config.channels_per_nic if multi.any() else 1)
    c = np.arange(channels)[:, None, None]                    # all channels at once: (C, G, n)
    rows = np.arange(g)[None, :, None]
    entry = c % length                                         # entry offset of each element's host
    # Ring order of columns: host segments in place, each rotated to start at its entry
    # rank (what a stable argsort of (segment, (offset - entry) mod length) gives).
    order = start + (offset + entry) % length
    nxt = np.roll(order, -1, axis=2)
    entry_rank = groups[rows, start + entry]                   # entry rank of each element's host
    src_nic = pl.nic[np.take_along_axis(entry_rank, order, axis=2)]   # a host sends through its entry rank's NIC
    coflow = np.broadcast_to(np.arange(g)[None, :, None] * channels + c, order.shape)
    src, dst = groups[rows, order].ravel(), groups[rows, nxt].ravel()
    conn = np.repeat(connection_key(comm, np.arange(channels)), g * n)
    coflow, src_nic = coflow.ravel(), src_nic.ravel()
    return make_flows(pl, src, dst, coflow, conn, factor * size_bytes / channels, steps * config.alpha_s,
                  np.repeat(np.arange(g), channels), label, src_nic, steps * config.alpha_local_s)
