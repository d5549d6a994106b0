"""Traffic of one training iteration, per communication group.

Accounting per micro-batch of ``b`` sequences of length ``s``, hidden size ``h``,
``a`` bytes per activation element, ``m`` micro-batches per iteration, ``L`` layers
(``L / pp`` per stage) -- the standard 3D-parallel accounting of Narayanan et al.
(SC'21, §3) as summarised in ``shared/reference/domain.md``:

- TP (+SP): per layer and micro-batch, 4 all-reduce-sized collectives of
  ``S = b * (s/cp) * h * a`` (2 forward, 2 backward; with sequence parallelism each
  all-reduce is an all-gather + reduce-scatter pair of the same total bytes).
- CP: per layer and micro-batch, an all-gather of K and V forward and a reduce-scatter
  of their gradients backward, ``S = 2 * b * s * (h/tp) * a`` (Megatron-Core context
  parallelism; ring attention moves the same bytes point to point).
- EP: per layer and micro-batch, 4 all-to-alls (dispatch and combine, forward and
  backward) of ``S = b * (s/(cp*tp)) * h * a * top_k`` per rank.
- PP: per stage boundary and micro-batch, ``b*(s/cp)*h*a`` forward and the same
  backward; with sequence parallelism each TP rank carries ``1/tp`` of it. With ``v``
  virtual stages per rank (interleaved 1F1B), a micro-batch passes the pipeline ``v``
  times: each boundary carries ``v`` times as much, and the hop from the last stage back
  to the first carries ``v - 1`` times (Narayanan et al. SC'21, §2.2.2: the interleaved
  schedule multiplies pipeline communication by v).
- DP (gradients reduced over DP x CP, n members): ZeRO/FSDP-style reduce-scatter of
  gradients and all-gather of parameters, each moving ``(n-1)/n`` of the local
  ``P/(tp*pp)`` parameters (at ``grad_bytes`` and ``param_bytes``); or an all-reduce
  moving ``2(n-1)/n`` of the gradients.

Ring factors are nccl-tests' (NVIDIA/nccl-tests doc/PERFORMANCE.md): all-reduce
``2(n-1)/n``, all-gather and reduce-scatter ``(n-1)/n``. Recomputation, embedding
imbalance and optimizer-state traffic are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import JobSpec

__all__ = ["GroupTraffic", "job_traffic", "group_edges", "weighted_edges", "alignment_problems"]


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
        Message size S of one collective (nccl-tests' S), bytes.
    ops : int
        Collectives of that size per iteration.
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


def _ring(kind: str, n: int, op_bytes: int, ops: int, factor: float) -> GroupTraffic:
    per_rank = factor * op_bytes * ops if n > 1 else 0.0
    return GroupTraffic(kind, "ring", n, op_bytes, ops, per_rank, per_rank)


def job_traffic(job: JobSpec) -> dict[str, GroupTraffic]:
    """Per-iteration traffic of every group kind of a resolved job.

    Returns
    -------
    dict of str to GroupTraffic
        Keys tp, cp, ep, dp, pp (kinds of size 1 carry zero bytes).

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> t = job_traffic(JobSpec(tp=8, pp=8, dp=2, num_micro_batches=4))
    >>> t["pp"].edge_bytes == 2 * 4 * 1 * 2048 * 12288 * 2 / 8
    True
    """
    if job.dp is None:
        raise ValueError("job_traffic needs a resolved dp")
    model = job.model
    b, s, h, a = job.micro_batch_size, model.seq_len, model.hidden, job.activation_bytes
    m = job.micro_batches()
    layers_per_stage = model.layers // job.pp
    tp, cp, ep, pp = job.tp, job.cp, job.ep, job.pp
    n_dp = job.dp * cp
    out: dict[str, GroupTraffic] = {}

    out["tp"] = _ring("tp", tp, b * (s // cp) * h * a, 4 * layers_per_stage * m, 2 * (tp - 1) / tp)
    out["cp"] = _ring("cp", cp, 2 * b * s * (h // tp) * a, 2 * layers_per_stage * m, (cp - 1) / cp)

    ep_bytes = b * (s // (cp * tp)) * h * a * model.top_k
    ep_ops = 4 * layers_per_stage * m if ep > 1 else 0
    out["ep"] = GroupTraffic("ep", "all-to-all", ep, ep_bytes, ep_ops, ep_bytes / ep * ep_ops,
                             (ep - 1) / ep * ep_bytes * ep_ops)

    act = b * (s // cp) * h * a // (tp if job.sequence_parallel else 1)
    v = job.virtual_stages
    hop = 2 * m * act if pp > 1 else 0
    out["pp"] = GroupTraffic("pp", "chain", pp, act, 2 * m * v, v * hop, v * hop, (v - 1) * hop)

    local_params = model.params / (tp * pp)
    if job.data_parallel == "zero":
        per_rank = (n_dp - 1) / n_dp * local_params * (job.grad_bytes + job.param_bytes) if n_dp > 1 else 0.0
        out["dp"] = GroupTraffic("dp", "ring", n_dp, round(local_params * job.grad_bytes), 2, per_rank, per_rank)
    else:
        out["dp"] = _ring("dp", n_dp, round(local_params * job.grad_bytes), 1, 2 * (n_dp - 1) / n_dp)
    return out


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
