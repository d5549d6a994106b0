"""Traffic of one training iteration per kind of group: the planner's view of :mod:`rankmap.job.comm`.

:func:`job_traffic` sums the collectives of :func:`rankmap.job.comm.iteration_comm` per
group kind into the bytes that cross each rank-level edge: a ring edge
``r_i -> r_(i+1 mod n)`` carries what one rank sends (nccl-tests' ``busbw / algbw``
factor times ``S``, NVIDIA/nccl-tests doc/PERFORMANCE.md), an all-to-all pair ``S / n``
per collective, a pipeline hop every message of its boundary. :func:`group_edges` and
:func:`weighted_edges` lay those bytes on the edges of every group of a
:class:`~rankmap.job.layout.ParallelLayout`; :func:`alignment_problems` checks a
placement against them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.job.comm import CommOp, iteration_comm
from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import JobSpec

__all__ = ["GroupTraffic", "job_traffic", "group_traffic", "group_edges", "weighted_edges", "alignment_problems",
           "ring_channels", "rail_crossings"]


@dataclass(frozen=True)
class GroupTraffic:
    """Traffic of one kind of group in one iteration.

    Attributes
    ----------
    kind : str
        tp, cp, ep, dp or pp.
    pattern : str
        "ring" (edges r_i -> r_(i+1 mod n) in rank order), "chain" (pipeline hops
        r_i <-> r_(i+1)) or "all-to-all" (every ordered pair).
    group_size : int
        Ranks per group (n).
    op_bytes : int
        Message size S of one collective (nccl-tests' S), bytes: of the kind's reducing
        collective (the gradient message for dp), else of its only one.
    ops : int
        Collectives per iteration (for pp: messages per stage boundary).
    edge_bytes : float
        Bytes per iteration on one ring edge, one chain hop (both directions) or one
        ordered pair of an all-to-all.
    rank_bytes : float
        Bytes one rank sends per iteration in this kind of group (interior pipeline rank for PP).
    wrap_bytes : float
        Chains only: bytes per iteration on the hop from the last member back to the first
        (interleaved pipelines), else 0.
    """

    kind: str
    pattern: str
    group_size: int
    op_bytes: int
    ops: int
    edge_bytes: float
    rank_bytes: float
    wrap_bytes: float = 0.0


def group_traffic(kind: str, n: int, ops: tuple[CommOp, ...]) -> GroupTraffic:
    """Sum the ops of one kind (all of one pattern) on groups of ``n`` ranks.

    Raises
    ------
    ValueError
        No ops, or ops of different patterns.
    """
    patterns = {o.pattern for o in ops}
    if len(patterns) != 1:
        raise ValueError(f"{kind}: need ops of one pattern, got {sorted(patterns) or 'none'}")
    pattern = patterns.pop()
    ref = next((o for o in ops if o.op in ("allreduce", "reducescatter")), ops[0])
    count = sum(o.count for o in ops)
    if pattern == "chain":
        hop = sum(o.size_bytes * o.count for o in ops) if n > 1 else 0
        wrap = sum(o.size_bytes * o.wrap_count for o in ops) if n > 1 else 0
        return GroupTraffic(kind, pattern, n, round(ref.size_bytes), count, hop, hop, wrap)
    rank = sum(o.rank_bytes(n) for o in ops) if n > 1 else 0.0
    if pattern == "ring":
        return GroupTraffic(kind, pattern, n, round(ref.size_bytes), count, rank, rank)
    pair = sum(o.size_bytes / n * o.count for o in ops) if n > 1 else 0.0
    return GroupTraffic(kind, pattern, n, round(ref.size_bytes), count, pair, rank)


def job_traffic(job: JobSpec) -> dict[str, GroupTraffic]:
    """Per-iteration traffic of every group kind of a resolved job.

    Derived from :func:`rankmap.job.comm.iteration_comm`, the same description the
    simulator replays.

    Returns
    -------
    dict of str to GroupTraffic
        Keys tp, cp, ep, pp, dp (kinds of size 1 carry zero bytes).

    Raises
    ------
    ValueError
        ``job.dp`` is not resolved.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> t = job_traffic(JobSpec(tp=8, pp=8, dp=2, num_micro_batches=4))
    >>> t["pp"].edge_bytes == 2 * 4 * 1 * 2048 * 12288 * 2 / 8
    True
    """
    if job.dp is None:
        raise ValueError("job_traffic needs a resolved dp")
    comm = iteration_comm(job)
    return {kind: group_traffic(kind, comm.group_sizes[kind], comm.of_kind(kind)) for kind in comm.kinds()}


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


def weighted_edges(layout: ParallelLayout, tr: GroupTraffic) -> list:
    """``[((src, dst), bytes per edge)]``: a kind's edges, plus interleaved wrap hops."""
    out = [(group_edges(layout, tr), tr.edge_bytes)]
    if tr.wrap_bytes:
        groups = layout.groups(tr.kind)
        out.append(((groups[:, -1], groups[:, 0]), tr.wrap_bytes))
    return out


def alignment_problems(layout: ParallelLayout, traffic: dict[str, GroupTraffic],
                       rank_host: np.ndarray, rank_local: np.ndarray, limit: int = 3,
                       rank_rail: np.ndarray | None = None, pxn: bool = True) -> list[str]:
    """Why a placement breaks the rules: a TP group leaving a host, or inter-host traffic that
    NCCL cannot keep on one rail.

    What NCCL does, not rank order, decides (see :func:`ring_channels`): a ring group (CP, DP)
    is fine when some NIC rail serves a member on every host it spans -- NCCL orders each
    node's GPUs itself and runs a channel through that rail on every node. A point-to-point
    or all-to-all pair (PP, EP) from host A to a peer on rail r is fine when a member of the
    group on host A sits on rail r: with PXN (on by default, ``NCCL_PXN_DISABLE=0``) NCCL
    moves the data over NVLink to that member and sends it from its NIC [1]_, [2]_. With
    ``pxn=False`` the two ranks must share a rail.

    Parameters
    ----------
    rank_host, rank_local : ndarray
        ``[W]``: host index and local rank of every rank.
    rank_rail : ndarray, optional
        ``[W]``: the rail (NIC) of every rank's GPU; default its local rank (one NIC per GPU).
    limit : int
        Messages per kind.
    pxn : bool
        Whether NCCL may send through another member's NIC (``NCCL_PXN_DISABLE`` unset or 0).

    Returns
    -------
    list of str
        Up to ``limit`` messages per kind; empty when every inter-host byte can stay on a rail.

    References
    ----------
    .. [1] NCCL documentation, Environment Variables: ``NCCL_PXN_DISABLE``, ``NCCL_CROSS_NIC``.
       https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
    .. [2] NVIDIA/nccl, ``src/graph/search.cc`` (per-channel ring search: a channel enters and
       leaves a node through one NIC) and ``src/graph/paths.cc`` (``ncclTopoGetIntermediateRank``:
       PXN relays through a local rank of the communicator close to the NIC).
    """
    rank_rail = rank_local if rank_rail is None else rank_rail
    problems: list[str] = []
    tp_hosts = rank_host[layout.groups("tp")]
    bad = np.nonzero((tp_hosts != tp_hosts[:, :1]).any(axis=1))[0]
    if bad.size:
        ranks = layout.groups("tp")[bad[0]].tolist()
        problems.append(f"TP group {ranks} spans {len(set(tp_hosts[bad[0]].tolist()))} hosts")
    for kind, tr in traffic.items():
        if kind == "tp" or tr.group_size < 2:
            continue
        groups = layout.groups(kind)
        if tr.pattern == "ring":
            for g in _railless_rings(groups, rank_host, rank_rail)[:limit].tolist():
                on = _member_rails(groups[g], rank_host, rank_rail)
                where = "; ".join(f"host {h}: rails {sorted(r)}" for h, r in list(on.items())[:3])
                problems.append(f"{kind.upper()} group {groups[g].tolist()[:8]} spans {len(on)} hosts with no NIC "
                                f"rail common to all ({where}): every NCCL channel changes rails (not rail-aligned)")
            continue
        src, dst = (np.concatenate(parts) for parts in zip(*(e for e, _ in weighted_edges(layout, tr))))
        bad = _off_rail_edges(groups, src, dst, rank_host, rank_rail, pxn)[:limit]
        for a, b in zip(src[bad].tolist(), dst[bad].tolist()):
            problems.append(f"{kind.upper()} edge rank {a} -> rank {b} joins local rank {rank_local[a]} "
                            f"to local rank {rank_local[b]} on another host, and no member of the group on "
                            f"rank {a}'s host sits on rail {int(rank_rail[b])} (not rail-aligned)")
    return problems


def _member_keys(groups: np.ndarray, rank_host: np.ndarray, rank_rail: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(keys[G*n], hosts, rails)``: one int64 key ``(group * hosts + host) * rails + rail`` per
    member of ``groups[G, n]``, with ``hosts`` and ``rails`` the bounds of the host and rail
    indices (keys stay below ``W * hosts * rails``, far inside int64 for any cluster)."""
    n_hosts, n_rails = int(rank_host.max()) + 1, int(rank_rail.max()) + 1
    g = np.repeat(np.arange(groups.shape[0], dtype=np.int64), groups.shape[1])
    return (g * n_hosts + rank_host[groups].ravel()) * n_rails + rank_rail[groups].ravel(), n_hosts, n_rails


def _railless_rings(groups: np.ndarray, rank_host: np.ndarray, rank_rail: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the groups ``groups[G, n]`` that span several hosts with no rail
    common to all of them (for no rail does every host of the group hold a member on it)."""
    keys, n_hosts, n_rails = _member_keys(groups, rank_host, rank_rail)
    members = _distinct(keys)                                           # distinct (group, host, rail)
    hosts = np.bincount(_distinct(members // n_rails) // n_hosts, minlength=groups.shape[0])     # hosts[G]
    group_rail = np.sort(members // (n_hosts * n_rails) * n_rails + members % n_rails)   # a (group, rail) per host
    starts = np.flatnonzero(np.r_[True, group_rail[1:] != group_rail[:-1]])
    on_rail = np.diff(np.r_[starts, group_rail.size])                   # hosts of a group on each of its rails
    best = np.zeros(groups.shape[0], dtype=np.int64)
    np.maximum.at(best, group_rail[starts] // n_rails, on_rail)         # best[G]: most hosts sharing a rail
    return np.flatnonzero((hosts > 1) & (best < hosts))


def _off_rail_edges(groups: np.ndarray, src: np.ndarray, dst: np.ndarray, rank_host: np.ndarray,
                    rank_rail: np.ndarray, pxn: bool) -> np.ndarray:
    """Indices (ascending) of the edges ``src[E] -> dst[E]`` between hosts that no rail carries:
    with ``pxn``, no member of the source's group on the source's host sits on the destination's
    rail; without, the two ends' rails differ."""
    cross = rank_host[src] != rank_host[dst]
    if not pxn:
        return np.flatnonzero(cross & (rank_rail[src] != rank_rail[dst]))
    keys, n_hosts, n_rails = _member_keys(groups, rank_host, rank_rail)
    members = _distinct(keys)
    group_of = np.empty(rank_host.size, dtype=np.int64)
    group_of[groups] = np.arange(groups.shape[0])[:, None]
    wanted = (group_of[src] * n_hosts + rank_host[src]) * n_rails + rank_rail[dst]   # (group, source host, rail)
    at = np.minimum(np.searchsorted(members, wanted), members.size - 1)
    return np.flatnonzero(cross & (members[at] != wanted))


def _distinct(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted, each value once: ``np.unique`` by sorting (numpy 2.4's ``np.unique`` hashes,
    ~100x slower on 10^6 spread-out int64 keys)."""
    out = np.sort(keys)
    return out[np.r_[True, out[1:] != out[:-1]]] if out.size else out


def _member_rails(group: np.ndarray, rank_host: np.ndarray, rank_rail: np.ndarray) -> dict:
    """``{host: set of rails of the group's members on that host}``, hosts in rank order."""
    on: dict = {}
    for h, r in zip(rank_host[group].tolist(), rank_rail[group].tolist()):
        on.setdefault(h, set()).add(r)
    return on


def ring_channels(group: np.ndarray, rank_host: np.ndarray, rank_rail: np.ndarray) -> list[list[int]]:
    """NCCL's rings of one group: the rail each channel uses on each host, hosts in ring order.

    NCCL lays one ring per channel over the group's nodes in the order their first ranks
    come (``src/graph/connect.cc``), orders each node's GPUs itself, and gives each channel
    one NIC per node, through which the ring enters and leaves it (``src/graph/search.cc``).
    Modelled here: one channel per rail of the host with the fewest member rails; channel c
    runs on the c-th rail common to all hosts while there are any (no rail change), then on
    each host's c-th remaining rail.

    Returns
    -------
    list of list of int
        ``rails[channel][host in ring order]``; ``[]`` for a group inside one host.

    Examples
    --------
    >>> host, rail = np.array([0, 0, 1, 1]), np.array([0, 4, 0, 4])
    >>> ring_channels(np.array([0, 1, 2, 3]), host, rail)      # both hosts on rails 0 and 4
    [[0, 0], [4, 4]]
    >>> ring_channels(np.array([0, 1, 2, 3]), host, np.array([0, 1, 4, 5]))
    [[0, 4], [1, 5]]
    """
    order: list[int] = []
    rails: dict[int, list[int]] = {}
    for r in sorted(group.tolist()):
        h = int(rank_host[r])
        if h not in rails:
            order.append(h)
            rails[h] = []
        if int(rank_rail[r]) not in rails[h]:
            rails[h].append(int(rank_rail[r]))
    if len(order) < 2:
        return []
    common = sorted(set.intersection(*(set(v) for v in rails.values())))
    rest = {h: sorted(set(v) - set(common)) for h, v in rails.items()}
    channels = min(len(v) for v in rails.values())
    return [[common[c] if c < len(common) else rest[h][c - len(common)] for h in order] for c in range(channels)]


def rail_crossings(layout: ParallelLayout, traffic: dict[str, GroupTraffic], rank_host: np.ndarray,
                   rank_rail: np.ndarray) -> dict[str, tuple[int, int]]:
    """Per ring kind: ``(channel hops between hosts, those that change rails)``, over all groups.

    A channel of a ring over k >= 2 hosts makes k host-to-host hops (the last one closes the
    ring); a hop changes rails when the channel's rail differs on its two ends
    (:func:`ring_channels`), which sends its bytes through the spine.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> job = JobSpec(tp=4, cp=2, dp=4, num_micro_batches=2)
    >>> lay = ParallelLayout.of(job)
    >>> ranks = np.arange(32)
    >>> rail_crossings(lay, job_traffic(job), ranks // 8, ranks % 8)["dp"]   # 4 groups x 2 channels x 4 hops
    (32, 0)
    """
    out: dict[str, tuple[int, int]] = {}
    for kind, tr in traffic.items():
        if tr.pattern != "ring" or tr.group_size < 2:
            continue
        hops = changes = 0
        for group in layout.groups(kind):
            for channel in ring_channels(group, rank_host, rank_rail):
                hops += len(channel)
                changes += sum(a != b for a, b in zip(channel, channel[1:] + channel[:1]))
        out[kind] = (hops, changes)
    return out
