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
    src_host, dst_host = pl.host[src], pl.host[dst]
    snic = pl.nic[src] if src_nic is None else src_nic.ravel()
    c = np.asarray(coflow_group).size
    coflow = coflow.ravel()
    network = None
    if local_latency_s is not None:
        network = np.zeros(c, dtype=bool)
        network[coflow[src_host != dst_host]] = True
    return _flow_set((src_host, pl.gpu[src], snic, dst_host, pl.gpu[dst], pl.nic[dst]), coflow,
                     conn, coflow_bytes, coflow_latency_s,
                     coflow_group, label, network, local_latency_s, conns)


def _flow_set(ends: tuple, coflow: np.ndarray, conn: np.ndarray, coflow_bytes, coflow_latency_s, coflow_group,
              label: str, network: np.ndarray | None, local_latency_s, conns: int) -> FlowSet:
    """A FlowSet from endpoint arrays ``ends`` (``src_host, src_gpu, src_nic, dst_host, dst_gpu, dst_nic``,
    each ``[F]``); ``network[C]``: coflows with a flow between hosts (they get ``coflow_latency_s``, the
    others ``local_latency_s``), None when the two latencies are not told apart."""
    c = np.asarray(coflow_group).size
    latency = np.broadcast_to(np.asarray(coflow_latency_s, dtype=float), (c,)).copy()
    if network is not None:
        latency = np.where(network, latency, np.broadcast_to(np.asarray(local_latency_s, dtype=float), (c,)))
    return FlowSet(*ends, coflow, conn, np.broadcast_to(np.asarray(coflow_bytes, dtype=float), (c,)).copy(), latency,
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


def _roll_left(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.roll(a, -1, axis=-1)`` into ``out``."""
    out[..., :-1] = a[..., 1:]
    out[..., -1] = a[..., 0]
    return out


def ring_flows(pl: RankPlacement, groups: np.ndarray, factor: float, size_bytes: float, steps: int, config, label, comm):
    """Flows of ``channels`` rings per group of ``groups[G, n]``, each edge carrying ``factor * size_bytes /
    channels`` bytes, with ``steps`` algorithm steps of latency (``config`` is a CollectiveConfig)."""
    g, n = groups.shape
    seg, start, length, offset = host_segments(pl.node[groups])
    multi = seg[:, -1] > 0
    channels = config.channels or (int(length[multi].min()) * config.channels_per_nic if multi.any() else 1)
    # Host segments, numbered row by row: S of them, each with its flat start column and length.
    first = (offset == 0).ravel()                               # (G*n,) a segment starts here
    seg_start = np.flatnonzero(first)                           # (S,) flat column of each segment's first rank
    seg_len = length.ravel()[seg_start]                         # (S,)
    seg_of = np.cumsum(first) - 1                               # (G*n,) segment of each column
    entry = np.arange(channels)[:, None] % seg_len              # (C, S) entry offset of each host per channel
    # The flow table in one block (a large block gets huge pages, so filling it faults far
    # less than eight separate arrays would). Rows: src host, gpu, nic, dst host, gpu, nic,
    # coflow, connection key (uint64, the same bytes read unsigned).
    table = np.empty((8, channels, g, n), dtype=np.int64)
    flat = table.reshape(8, channels, g * n)
    # Ring order of columns: host segments in place, each rotated to start at its entry rank
    # (what a stable argsort of (segment, (offset - entry) mod length) gives). Rows 3 and 4
    # hold the order and the senders' NICs until the receivers' columns overwrite them.
    # (Every np.take below writes into the table: mode="clip" because the default "raise"
    # buffers ``out``; the indices are in range, so the values are the same.)
    order = flat[4]
    np.take(entry, seg_of, axis=1, out=order, mode="clip")
    order += offset.ravel()                                     # < 2 * length
    flat_len = length.ravel()
    np.subtract(order, flat_len, out=order, where=order >= flat_len)
    order += seg_start[seg_of]                                  # (C, G*n) flat column of each ring position
    ranks = groups.ravel()
    host, gpu, nic = (np.asarray(a, dtype=np.int64) for a in (pl.host, pl.gpu, pl.nic))   # take casts safely only
    np.take(host[ranks], order, out=flat[0], mode="clip")
    np.take(gpu[ranks], order, out=flat[1], mode="clip")
    np.take(nic[ranks], order, out=flat[3], mode="clip")
    # A host sends through its entry rank's NIC; order keeps segments in place, so position
    # p's host is segment seg_of[p].
    np.take(nic[ranks[seg_start + entry]], seg_of, axis=1, out=flat[2], mode="clip")
    _roll_left(table[3], table[5])
    _roll_left(table[0], table[3])
    _roll_left(table[1], table[4])
    leaves = table[0] != table[3]                              # (C, G, n) the edge leaves its host
    network = leaves.any(axis=2).T.ravel()                      # (G*C,) coflow g * C + c leaves a host
    table[6] = ((np.arange(g) * channels)[None, :] + np.arange(channels)[:, None])[:, :, None]   # g * C + c
    rows = table.reshape(8, -1)
    conn = rows[7].view(np.uint64)
    conn.reshape(channels, g * n)[:] = connection_key(comm, np.arange(channels))[:, None]
    *ends, coflow, _ = rows
    flows = _flow_set(tuple(ends), coflow, conn, factor * size_bytes / channels,
                      steps * config.alpha_s, np.repeat(np.arange(g), channels), label, network,
                      steps * config.alpha_local_s, 1)
    flows.__dict__["between_hosts"] = np.flatnonzero(leaves)   # FlowSet's cached property, known here already
    return flows
