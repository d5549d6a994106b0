"""The per-connection rate cap: what one connection between two ranks can move, as rows below the links.

A *connection* is what one group of one collective (a ring, a tree, a pipeline, an
all-to-all pair) opens from a rank to a peer rank on another host through one NIC: the
flows between hosts of one ``(coflow_part, coflow_group)`` with the same sending rank,
sending NIC and receiving rank. All the channels of a ring (or tree) that take that hop
go over it together: NCCL splits a collective's buffer evenly over its channels (NCCL
``src/enqueue.cc``), and duplicated channels repeat the same path through the same NICs
(``ncclTopoDupChannels``, NCCL ``src/graph/search.cc``); NCCL opens one network
connection per channel, of ``NCCL_IB_QPS_PER_CONNECTION`` queue pairs (NCCL
``src/transport/net_ib/connect.cc``, ``ncclIbSenderQpsCreate``). The model caps the sum
over those channels and queue pairs, not each of them (here *connection* means all of
them together): it moves at most ``fraction`` of its sending NIC's line rate (times
``efficiency``), whatever its channel and queue-pair counts. So one ring alone on a NIC reaches ``fraction`` of line rate and
two rings sharing the NIC, each held to half the line by the NIC, run ``2 * fraction``
times slower than one alone: 1.6x for the default 0.8 (the slowdown NCCL users report;
an assumption, not an NVIDIA figure: see
:attr:`rankmap.simulator.collectives.CollectiveConfig.connection_rate_fraction`).

Flows over NVLink open no network connection and get no cap. Every flow of a coflow moves
at the coflow's rate, so a connection is one linear row over the coflows with a flow on
it: ``sum over its flows of rate(coflow) <= cap``. Connections with the same coflows (the
same hop of a ring, host after host) give the same row up to the cap; one row per distinct
set of coflows is kept, with the least cap.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from rankmap.simulator.ecmp import mix64
from rankmap.simulator.flows import FlowSet

__all__ = ["connection_caps", "rate_constraints"]

_FIELDS = ("src_host", "src_gpu", "src_nic", "dst_host", "dst_gpu", "coflow")


def connection_caps(network, flows: FlowSet, config) -> tuple[sparse.csr_array, np.ndarray]:
    """The per-connection cap rows of a flow set.

    Parameters
    ----------
    network : Network
        Gives the NICs' line rates (``capacity_bps`` of their ``nic-up`` links) and the
        GPU count per host (``gpus``).
    flows : FlowSet
    config : CollectiveConfig
        ``connection_rate_fraction`` (None or 1: no rows, as a connection's row could
        never be tighter than its NIC's ``nic-up`` link) and ``efficiency``.

    Returns
    -------
    rows : scipy.sparse.csr_array
        ``rows[K, C]``: one row per distinct set of coflows sharing a connection; entry
        ``[k, c]`` counts coflow ``c``'s flows on the connection (1 but for a coflow that
        takes one hop twice). Only coflows with bytes count.
    cap_bps : ndarray
        ``cap_bps[K]``: the least cap of the connections giving each row, bytes/s.

    Examples
    --------
    Two single-GPU hosts, a ring of two ranks with 4 channels: each host's one connection
    to the other carries the 4 channels, so two rows (one per direction) of 4 coflows.

    >>> from rankmap.topology.spec import parse_cluster
    >>> from rankmap.simulator.network import Network
    >>> from rankmap.simulator.flows import RankPlacement
    >>> from rankmap.simulator.collectives import CollectiveConfig, collective_flows
    >>> net = Network(parse_cluster("hosts: {gpus: 1, nics: 1}\\ntor_groups: [{name: a, hosts: 'h[1-2]'}]"))
    >>> pl = RankPlacement.on_hosts(net, ["h1", "h2"], 1)
    >>> config = CollectiveConfig(channels=4)
    >>> rows, cap = connection_caps(net, collective_flows(pl, [[0, 1]], "allreduce", 1e9, config=config), config)
    >>> rows.toarray().tolist(), (cap / 25e9).tolist()
    ([[1.0, 1.0, 1.0, 1.0]], [0.8])
    """
    fraction = config.connection_rate_fraction
    if fraction is None or fraction >= 1 or not flows.n_flows:
        return _no_rows(flows.n_coflows)
    between = flows.between_set()
    if between is None:
        inter = flows.between_hosts
        sh, sg, sn, dh, dg, coflow = (getattr(flows, f)[inter] for f in _FIELDS)
    else:
        sh, sg, sn, dh, dg, coflow = (getattr(between, f) for f in _FIELDS)
    keep = flows.coflow_bytes[coflow] > 0
    every = bool(keep.all())
    if not every:
        sh, sg, sn, dh, dg, coflow = (a[keep] for a in (sh, sg, sn, dh, dg, coflow))
    if not coflow.size:
        return _no_rows(flows.n_coflows)
    known = flows.connection_groups(network.gpus) if every else None   # a ring's, from its segments
    conn, col, count, conn_of_flow = known or _connections(network, flows, sh, sg, sn, dh, dg, coflow)
    rows, row_of_conn = _distinct_rows(conn, col, count, flows.n_coflows)
    line = network.capacity_bps[network.nic_up(sh, sn)]              # (F,) each flow's sending NIC
    if line.min() == line.max():                                      # (one NIC speed: the usual case)
        cap = np.full(rows.shape[0], line[0])
    else:
        cap = np.full(rows.shape[0], np.inf)
        np.minimum.at(cap, row_of_conn[conn_of_flow], line)
    return rows, cap * (config.efficiency * fraction)


def rate_constraints(network, flows: FlowSet, route, config) -> tuple[sparse.csr_array, np.ndarray]:
    """The rows max-min fairness fills for a routed flow set: links, then per-connection caps.

    Parameters
    ----------
    network, flows, config
        As for :func:`rankmap.simulator.collectives.run_flows`.
    route : Routing
        ``network.route(flows, routing)``. When it was routed with ``extra_rows`` = the cap
        rows (as ``run_flows`` does), its ``constraints`` are these rows already; otherwise
        the cap rows are stacked below a copy of its matrix.

    Returns
    -------
    matrix : scipy.sparse.csr_array
        ``matrix[L + K, C]``: ``route.matrix``, then the ``K`` rows of :func:`connection_caps`.
    capacity : ndarray
        ``capacity[L + K]`` bytes/s: link line rates times ``config.efficiency``, then
        each row's cap.
    """
    rows, cap = connection_caps(network, flows, config)
    capacity = np.concatenate([network.capacity_bps * config.efficiency, cap])
    if route.constraints is not None and route.constraints.shape[0] == capacity.size:
        return route.constraints, capacity
    if not cap.size:
        return route.matrix, capacity
    return sparse.vstack([route.matrix, rows], format="csr"), capacity


def _no_rows(n_coflows: int) -> tuple[sparse.csr_array, np.ndarray]:
    return sparse.csr_array((0, n_coflows)), np.zeros(0)


def _connections(network, flows: FlowSet, sh, sg, sn, dh, dg, coflow):
    """The flows ``[F]`` grouped into connections: ``(conn[P], col[P], count[P], conn_of_flow[F])``,
    the distinct (connection, coflow) pairs sorted by connection (0..N-1) and coflow,
    their flow counts, and each flow's connection."""
    c = flows.n_coflows
    # Coflows renumbered so that those of one group (part, group) are consecutive: then a
    # connection is a run of equal (sender, NIC, receiver) whose coflows share a group.
    owner = flows.coflow_part.astype(np.int64) * (int(flows.coflow_group.max()) + 1) + flows.coflow_group
    rank = np.arange(c)
    if (owner[1:] < owner[:-1]).any():                                # (usually in order already)
        rank[np.argsort(owner, kind="stable")] = np.arange(c)
    gpus, rails = network.gpus, network.rails
    ends = network.n_hosts * gpus
    sender = (sh.astype(np.int64) * gpus + sg) * rails + sn           # (F,) rank and NIC
    receiver = dh.astype(np.int64) * gpus + dg                        # (F,)
    if ends * rails * ends * c < 2**62:
        key = (sender * ends + receiver) * c + rank[coflow]           # (F,) one int per (hop, coflow)
        order = np.argsort(key)
        key = key[order]
        new_pair = np.concatenate([[True], key[1:] != key[:-1]])
        hop = key // c
        new_hop = np.concatenate([[True], hop[1:] != hop[:-1]])
    else:                                                             # too many ends for one int
        order = np.lexsort((rank[coflow], receiver, sender))
        s, r = sender[order], receiver[order]
        new_hop = np.concatenate([[True], (s[1:] != s[:-1]) | (r[1:] != r[:-1])])
        k = rank[coflow][order]
        new_pair = new_hop | np.concatenate([[True], k[1:] != k[:-1]])
    col = coflow[order]
    group = owner[col]
    new_conn = new_hop | np.concatenate([[True], group[1:] != group[:-1]])
    sorted_conn = np.cumsum(new_conn) - 1
    conn_of_flow = np.empty(col.size, dtype=np.int64)
    conn_of_flow[order] = sorted_conn
    starts = np.flatnonzero(new_pair)
    count = np.diff(np.append(starts, col.size))
    return sorted_conn[starts], col[starts], count, conn_of_flow


def _distinct_rows(conn, col, count, n_coflows: int) -> tuple[sparse.csr_array, np.ndarray]:
    """One row per distinct (coflow, count) set among the connections ``conn[P]`` (0..N-1,
    ascending; ``col[P]`` ascending within one): ``rows[K, C]`` and ``row_of_conn[N]``."""
    n = int(conn[-1]) + 1
    starts = np.flatnonzero(np.concatenate([[True], conn[1:] != conn[:-1]]))
    size = np.diff(np.append(starts, conn.size))                      # (N,) coflows per connection
    # An order-free hash of each connection's (coflow, count) set, then a check that the
    # connections sharing a hash have equal sets entry by entry (so a collision costs a
    # row, never a wrong one). Rows come in hash order, whichever connection gives them.
    sig = np.add.reduceat(mix64(col.astype(np.uint64) + np.uint64(1)) * count.astype(np.uint64), starts)
    sig ^= mix64(size.astype(np.uint64))
    by_sig = np.argsort(sig)
    new = np.concatenate([[True], sig[by_sig[1:]] != sig[by_sig[:-1]]])
    rep = by_sig[new]                                                 # (K,) a connection of each distinct hash
    row = np.empty(n, dtype=np.int64)
    row[by_sig] = np.cumsum(new) - 1                                  # (N,) its row
    same = size == size[rep[row]]
    if same.all():
        at = np.arange(conn.size) - starts[conn]                     # (P,) place within its connection
        mirror = starts[rep[row[conn]]] + at
        same = (col == col[mirror]) & (count == count[mirror])
        same = np.logical_and.reduceat(same, starts)
    if not same.all():
        rep, row = np.arange(n), np.arange(n)                         # a hash collision: one row each
    indptr = np.append(0, np.cumsum(size[rep]))                        # (K + 1,) the representatives' entries
    entries = np.repeat(starts[rep] - indptr[:-1], size[rep]) + np.arange(indptr[-1])
    matrix = sparse.csr_array((count[entries].astype(float), col[entries], indptr), shape=(rep.size, n_coflows))
    return matrix, row
