"""NCCL's double binary tree for all-reduce, as flows.

NCCL builds two complementary binary trees over the nodes (ranks ordered by node), each
carrying half of the data, with one tree edge per node across the fabric and a chain over
NVLink inside each node (NCCL ``src/graph/trees.cc``: ``ncclGetBtree``, ``ncclGetDtree``;
Sanders, Speck and Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction and
scan", Parallel Computing 2009). Used by :mod:`rankmap.simulator.collectives`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rankmap.simulator.flows import FlowSet, RankPlacement
from rankmap.simulator.ring_flows import connection_key, make_flows, ring_flows

__all__ = ["btree_parents", "tree_depth", "tree_flows"]


def btree_parents(k: int, tree: int = 0) -> np.ndarray:
    """Parent of each of ``k`` nodes in tree ``tree`` (0 or 1) of NCCL's double binary tree; -1 at the root.

    Tree 0 is ``ncclGetBtree`` (NCCL ``src/graph/trees.cc``): node ``r > 0`` with lowest set
    bit ``b`` hangs under ``(r ^ b) | 2b``, or ``r ^ b`` when that is ``>= k``; node 0 is
    the root. Tree 1 (``ncclGetDtree``) mirrors tree 0 when ``k`` is even and shifts it by
    one node when ``k`` is odd, so no node is interior in both trees.

    Examples
    --------
    >>> btree_parents(5).tolist(), btree_parents(5, 1).tolist()
    ([-1, 2, 4, 2, 0], [1, -1, 3, 0, 3])
    >>> btree_parents(4, 1).tolist()
    [1, 3, 1, -1]
    """
    r = np.arange(k)
    if tree == 1:
        moved = (r - 1) % k if k % 2 else k - 1 - r            # node r's place in tree 0
        up = btree_parents(k, 0)[moved]
        return np.where(up < 0, -1, (up + 1) % k if k % 2 else k - 1 - up)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= k, r ^ bit, up)
    return np.where(r > 0, up, -1)


def tree_depth(parent: np.ndarray) -> int:
    """Edges from the deepest node to the root of a tree given by ``parent[k]``."""
    node, depth = np.arange(parent.size), 0
    while (parent[node] >= 0).any():
        node = np.where(parent[node] >= 0, parent[node], node)
        depth += 1
    return depth


def tree_flows(pl: RankPlacement, groups: np.ndarray, size_bytes: float, count: int, config, label, comm):
    """All-reduce flows of ``count`` messages of ``size_bytes`` per group of ``groups[G, n]``: double binary
    trees over the hosts, or a ring when a group sits in one host."""
    g, n = groups.shape
    node = pl.node[groups]
    new = np.ones((g, n), dtype=bool)
    new[:, 1:] = node[:, 1:] != node[:, :-1]
    single = new.sum(axis=1) == 1
    sets = []
    if single.any():
        rows = np.flatnonzero(single)
        ring = ring_flows(pl, groups[rows], 2 * (n - 1) / n, size_bytes * count, 2 * (n - 1) * count, config, label, comm)
        sets.append((ring, rows))
    patterns, klass = np.unique(new[~single], axis=0, return_inverse=True)
    multi_rows = np.flatnonzero(~single)
    for p, pattern in enumerate(patterns):
        rows = multi_rows[klass.ravel() == p]
        sets.append((_tree_class(pl, groups[rows], pattern, size_bytes * count, count, config, label, comm), rows))
    flows = FlowSet.concat([s for s, _ in sets])
    group = np.concatenate([rows[s.coflow_group] for s, rows in sets]) if sets else np.zeros(0, dtype=np.int64)
    return dataclasses.replace(flows, coflow_group=group, coflow_part=np.zeros(flows.n_coflows, dtype=np.int64),
                               parts=(label,))


def _tree_class(pl, groups: np.ndarray, pattern: np.ndarray, total_bytes: float, count: int, config, label, comm):
    """Double binary trees for groups that share one host pattern (``pattern[n]``: a new host
    starts here); one pair of trees per channel, channel ``c`` entering each host at its
    ``c mod k``-th rank (so on that rank's rail)."""
    g, n = groups.shape
    starts = np.flatnonzero(pattern)
    k = np.diff(np.append(starts, n))                        # (K,) ranks per host
    hosts = starts.size
    channels = config.channels or int(k.min()) * config.channels_per_nic
    src_cols, dst_cols, tree = [], [], []
    for c in range(channels):
        for t in (0, 1):
            entry = starts + c % k                             # (K,) entry column of each host
            parent = btree_parents(hosts, t)
            child = np.flatnonzero(parent >= 0)
            pairs = [(entry[child], entry[parent[child]]), (entry[parent[child]], entry[child])]
            for j in range(hosts):                             # intra-host chain from the entry rank
                chain = starts[j] + (c % k[j] + np.arange(k[j])) % k[j]
                pairs += [(chain[:-1], chain[1:]), (chain[1:], chain[:-1])]
            s = np.concatenate([a for a, _ in pairs])
            src_cols.append(s)
            dst_cols.append(np.concatenate([b for _, b in pairs]))
            tree.append(np.full(s.size, 2 * c + t))
    s, d, t = np.concatenate(src_cols), np.concatenate(dst_cols), np.concatenate(tree)
    coflow = np.arange(g)[:, None] * 2 * channels + t[None, :]
    depth = max(tree_depth(btree_parents(hosts, 0)), tree_depth(btree_parents(hosts, 1)))
    latency = 2 * count * (depth * config.alpha_s + (int(k.max()) - 1) * config.alpha_local_s)
    return make_flows(pl, groups[:, s], groups[:, d], coflow, connection_key(comm, t[None, :] + 1000),
                  total_bytes / (2 * channels), latency, np.repeat(np.arange(g), 2 * channels), label)
