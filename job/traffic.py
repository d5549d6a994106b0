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

__all__ = ["GroupTraffic", "job_traffic", "group_traffic", "group_edges", "weighted_edges", "alignment_problems"]


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
        src, dst = (np.concatenate(parts) for parts in zip(*(e for e, _ in weighted_edges(layout, tr))))
        inter = rank_host[src] != rank_host[dst]
        off_rail = np.nonzero(inter & (rank_local[src] != rank_local[dst]))[0]
        for e in off_rail[:limit]:
            a, b = int(src[e]), int(dst[e])
            problems.append(f"{kind.upper()} edge rank {a} -> rank {b} joins local rank {rank_local[a]} "
                            f"to local rank {rank_local[b]} on another host (not rail-aligned)")
    return problems
