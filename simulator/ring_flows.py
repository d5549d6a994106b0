"""Ring decomposition of a collective into flows, and the flow-building helpers it shares with the trees.

NCCL runs a ring collective as ``channels`` rings, each entering a host at one rank (so on
that rank's rail) and crossing the host over NVLink; between hosts the ring follows rank
order (NCCL's ring search, ``src/graph/rings.cc``). Used by :mod:`rankmap.simulator.collectives`.
"""

from __future__ import annotations

import numpy as np

from rankmap.simulator.ecmp import mix64
from rankmap.simulator.flows import FlowSet, LazyFlowSet, RankPlacement

__all__ = ["connection_key", "make_flows", "host_segments", "ring_flows"]


def connection_key(comm: str, channel) -> np.ndarray:
    """Connection key of a communicator's channel (uint64)."""
    name = int.from_bytes(comm.encode()[:8].ljust(8, b"\0"), "little")
    return mix64(np.uint64(name) ^ mix64(np.asarray(channel, dtype=np.uint64) + np.uint64(1)))


def make_flows(pl: RankPlacement, src: np.ndarray, dst: np.ndarray, coflow: np.ndarray, conn: np.ndarray,
           coflow_bytes, coflow_latency_s, coflow_group, label: str, src_nic: np.ndarray | None = None,
           local_latency_s=None) -> FlowSet:
    """Flows from rank ``src[F]`` to rank ``dst[F]``; the sender's NIC is its own unless given.

    ``coflow_latency_s`` is the latency of a coflow with a flow between hosts; a coflow
    all on NVLink gets ``local_latency_s`` instead when given.
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
                     coflow_group, label, network, local_latency_s)


def _flow_set(ends: tuple, coflow: np.ndarray, conn: np.ndarray, coflow_bytes, coflow_latency_s, coflow_group,
              label: str, network: np.ndarray | None, local_latency_s) -> FlowSet:
    """A FlowSet from endpoint arrays ``ends`` (``src_host, src_gpu, src_nic, dst_host, dst_gpu, dst_nic``,
    each ``[F]``); ``network[C]``: coflows with a flow between hosts (they get ``coflow_latency_s``, the
    others ``local_latency_s``), None when the two latencies are not told apart."""
    c = np.asarray(coflow_group).size
    latency = np.broadcast_to(np.asarray(coflow_latency_s, dtype=float), (c,)).copy()
    if network is not None:
        latency = np.where(network, latency, np.broadcast_to(np.asarray(local_latency_s, dtype=float), (c,)))
    return FlowSet(*ends, coflow, conn, np.broadcast_to(np.asarray(coflow_bytes, dtype=float), (c,)).copy(), latency,
                   np.asarray(coflow_group, dtype=np.int64), np.zeros(c, dtype=np.int64), (label,))


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
    channels`` bytes, with ``steps`` algorithm steps of latency (``config`` is a CollectiveConfig).

    Returns a :class:`~rankmap.simulator.flows.LazyFlowSet`: its flows between hosts and
    NVLink rows come from the host segments (one flow per segment and channel leaves a
    host), its flow table is built when read.
    """
    g, n = groups.shape
    seg, start, length, offset = host_segments(pl.node[groups])
    multi = seg[:, -1] > 0
    channels = config.channels or (int(length[multi].min()) * config.channels_per_nic if multi.any() else 1)
    ring = _Ring(pl, groups, channels, length, offset)
    keys = connection_key(comm, np.arange(channels))            # (C,) uint64
    ends, network = ring.between(keys)
    c = g * channels
    per_coflow = dict(coflow_bytes=np.full(c, factor * size_bytes / channels),
                      coflow_latency_s=np.where(network, steps * config.alpha_s, steps * config.alpha_local_s),
                      coflow_group=np.repeat(np.arange(g), channels), coflow_part=np.zeros(c, dtype=np.int64),
                      parts=(label,))
    between = FlowSet(*ends, **per_coflow)
    between.__dict__["between_hosts"] = np.arange(between.n_flows)   # the cached property: all of them
    return LazyFlowSet.deferred(lambda: ring.table(keys), channels * g * n, between, ring.between_hosts,
                                ring.nvlink, connections=ring.connections, **per_coflow)


class _Ring:
    """The host segments of ``channels`` rings over ``groups[G, n]`` and what follows from them.

    Ring order of the columns of a group row: host segments in place, each rotated to start
    at its entry rank (channel ``c`` enters a segment of length ``len`` at offset ``c mod
    len``); the ranks of a segment pass the data on over NVLink and the segment's last
    rank in ring order (its exit) sends to the next segment's entry through the entry
    rank's NIC. Flow ``c * G * n + p`` leaves ring position ``p`` of channel ``c``.
    """

    def __init__(self, pl: RankPlacement, groups: np.ndarray, channels: int, length: np.ndarray, offset: np.ndarray):
        g, n = groups.shape
        self.channels, self.n_rows, self.n, self.width = channels, g, n, g * n
        self.ranks = groups.ravel()
        self.offset, self.length = offset.ravel(), length.ravel()      # (W,)
        first = self.offset == 0                                       # (W,) a segment starts here
        self.seg_start = np.flatnonzero(first)                         # (S,) flat column of each segment's first rank
        self.seg_len = self.length[self.seg_start]                     # (S,)
        self.seg_of = np.cumsum(first) - 1                             # (W,) segment of each column
        self.seg_row = self.seg_start // n                             # (S,) group row of each segment
        s = self.seg_start.size
        nxt = np.arange(1, s + 1)                                      # (S,) next segment in ring order
        last = np.ones(s, dtype=bool)
        last[:-1] = self.seg_row[1:] != self.seg_row[:-1]
        row_first = np.flatnonzero(np.concatenate([[True], last[:-1]]))   # (G,) first segment of each row
        nxt[last] = row_first[self.seg_row[last]]                      # the last one wraps to its row's first
        self.next = nxt
        self.entry = np.arange(channels)[:, None] % self.seg_len      # (C, S) entry offset of each segment
        self.entry_col = self.seg_start + self.entry                   # (C, S)
        self.exit_col = self.entry_col - 1                             # (C, S) the rank before the entry ...
        self.exit_col[self.entry == 0] += self.seg_len[np.nonzero(self.entry == 0)[1]]   # ... cyclically
        self.host, self.gpu, self.nic = (np.asarray(a, dtype=np.int64)[self.ranks] for a in (pl.host, pl.gpu, pl.nic))
        self.to_col = self.entry_col[:, nxt]                           # (C, S) receiver of each segment's exit flow
        self.leaves = self.host[self.exit_col] != self.host[self.to_col]   # (C, S) that flow goes between hosts
        flow = np.arange(channels)[:, None] * self.width + (self.seg_start + self.seg_len - 1)   # (C, S) its index
        self.between_hosts = flow[self.leaves]                         # ascending: (c, s) in order

    def between(self, keys: np.ndarray) -> tuple[tuple, np.ndarray]:
        """The eight arrays (``FLOW_FIELDS``) of the flows between hosts, in flow order, and
        ``network[G * C]``: coflows with such a flow (``keys[C]``: connection keys)."""
        m = self.leaves
        channel = np.broadcast_to(np.arange(self.channels)[:, None], m.shape)[m]
        src, via, dst = self.exit_col[m], self.entry_col[m], self.to_col[m]
        coflow = np.broadcast_to(self.seg_row, m.shape)[m] * self.channels + channel
        self.between_coflow = coflow
        network = np.zeros(self.n_rows * self.channels, dtype=bool)
        network[coflow] = True
        return (self.host[src], self.gpu[src], self.nic[via], self.host[dst], self.gpu[dst], self.nic[dst], coflow,
                keys[channel]), network

    def nvlink(self, gpus: int):
        """``(counts[2, K], write, per_coflow[G * C])`` for the NVLink rows (out of GPU ``k = host *
        gpus + gpu``, then into it): entries per row, ``write(out)``, which puts the rows'
        columns (coflows) into ``out`` row by row, and entries per coflow; None when two columns share a GPU (then routing reads the
        flow table). See :meth:`rankmap.simulator.flows.LazyFlowSet.nvlink_rows`."""
        key = self.host * gpus + self.gpu                              # (W,)
        in_order = bool((key[1:] > key[:-1]).all())                     # columns already by GPU (the usual case)
        n_keys = int(key.max()) + 1
        by_gpu = None                                                  # (W,) columns by GPU, when not in order
        if not in_order:
            slot = np.full(n_keys, -1)
            slot[key] = np.arange(key.size)
            by_gpu = slot[slot >= 0]
            if by_gpu.size != key.size:
                return None
        channels, w = self.channels, self.width
        # Every column sends and receives once per channel over NVLink, except a segment's
        # exit (sends) and the next segment's entry (receives) when that flow leaves the host.
        counts = np.zeros((2, n_keys), dtype=np.int64)
        counts[:, key] = channels
        counts[0] -= np.bincount(key[self.exit_col[self.leaves]], minlength=n_keys)
        counts[1] -= np.bincount(key[self.to_col[self.leaves]], minlength=n_keys)

        channel = np.broadcast_to(np.arange(channels)[:, None], self.leaves.shape)[self.leaves]

        def write(out: np.ndarray) -> None:
            coflow = np.empty((w, channels), dtype=out.dtype)          # (W, C) coflow of each column, channel
            np.add((self.seg_row[self.seg_of] * channels).astype(out.dtype)[:, None],
                   np.arange(channels, dtype=out.dtype), out=coflow)
            if by_gpu is not None:
                coflow = coflow[by_gpu]                                # rows by GPU
            n_out = int(counts[0].sum())
            for cols, part in ((self.exit_col, out[:n_out]), (self.to_col, out[n_out:])):
                over = np.ones((w, channels), dtype=bool)              # (W, C) over NVLink
                over.ravel()[cols[self.leaves] * channels + channel] = False
                if by_gpu is not None:
                    over = over[by_gpu]
                np.compress(over.ravel(), coflow.ravel(), out=part)   # (a boolean index would copy twice)

        # Per coflow (row g, channel c): n flows, one out of and one into every column, less
        # those between hosts.
        leaving = np.bincount(self.between_coflow, minlength=self.n_rows * channels)
        return counts, write, 2 * (self.n - leaving)

    def connections(self, gpus: int):
        """The flows between hosts grouped into connections (see
        :meth:`rankmap.simulator.flows.LazyFlowSet.connection_groups`); None when two columns
        share a GPU.

        Segment ``s``'s hop (its exit rank, through its entry rank's NIC, to the next
        segment's entry rank) is the same for channels ``c`` and ``c'`` exactly when they
        enter both segments at the same offset: ``c = c' mod period``, ``period`` the least
        common multiple of the two segments' lengths. So the hops of one group row with one
        period form ``period`` connections of the same coflows, host after host: one index
        each (residue ``c mod period``), whatever the segment.
        """
        key = self.host * gpus + self.gpu                              # (W,)
        if not (key[1:] > key[:-1]).all() and np.unique(key).size < key.size:
            return None
        channels = self.channels
        period = np.minimum(np.lcm(self.seg_len, self.seg_len[self.next]), channels)   # (S,)
        leave = self.leaves[0]                                         # (S,) the same for every channel
        klass, of_seg = np.unique((self.seg_row * (channels + 1) + period)[leave], return_inverse=True)
        row, m = np.divmod(klass, channels + 1)                        # (J,) group row and period of each class
        base = np.concatenate([[0], np.cumsum(m)[:-1]])                # (J,) its first connection index
        c = np.arange(channels)
        residue = c[None, :] % m[:, None]                              # (J, C)
        order = np.argsort(residue * channels + c, axis=1)             # (J, C) by connection, then channel
        conn = (base[:, None] + np.take_along_axis(residue, order, axis=1)).ravel()
        col = (row[:, None] * channels + order).ravel()
        of_seg = of_seg.ravel()
        conn_of_flow = (base[of_seg][None, :] + c[:, None] % m[of_seg][None, :]).ravel()   # (C x S_leave,)
        return conn, col, np.ones(col.size, dtype=np.int64), conn_of_flow

    def table(self, keys: np.ndarray) -> tuple:
        """The eight per-flow arrays (``FLOW_FIELDS``), each ``[C * W]``."""
        channels, w = self.channels, self.width
        # The flow table in one block (a large block gets huge pages, so filling it faults far
        # less than eight separate arrays would). Rows: src host, gpu, nic, dst host, gpu, nic,
        # coflow, connection key (uint64, the same bytes read unsigned).
        table = np.empty((8, channels, w), dtype=np.int64)
        # Ring order of columns (what a stable argsort of (segment, (offset - entry) mod
        # length) gives). Rows 3 and 4 hold the order and the senders' NICs until the
        # receivers' columns overwrite them. (Every np.take below writes into the table:
        # mode="clip" because the default "raise" buffers ``out``; the indices are in range.)
        order = table[4]
        np.take(self.entry, self.seg_of, axis=1, out=order, mode="clip")
        order += self.offset                                           # < 2 * length
        np.subtract(order, self.length, out=order, where=order >= self.length)
        order += self.seg_start[self.seg_of]                           # (C, W) flat column of each ring position
        np.take(self.host, order, out=table[0], mode="clip")
        np.take(self.gpu, order, out=table[1], mode="clip")
        np.take(self.nic, order, out=table[3], mode="clip")
        # A host sends through its entry rank's NIC; order keeps segments in place, so position
        # p's host is segment seg_of[p].
        np.take(self.nic[self.entry_col], self.seg_of, axis=1, out=table[2], mode="clip")
        rows = table.reshape(8, channels, self.n_rows, self.n)
        _roll_left(rows[3], rows[5])
        _roll_left(rows[0], rows[3])
        _roll_left(rows[1], rows[4])
        rows[6] = ((np.arange(rows.shape[2]) * channels)[None, :] + np.arange(channels)[:, None])[:, :, None]
        flat = table.reshape(8, -1)
        conn = flat[7].view(np.uint64)
        conn.reshape(channels, w)[:] = keys[:, None]
        return (*flat[:7], conn)
