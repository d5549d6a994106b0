"""NCCL-style collectives as flows: rings per channel and rail, double binary trees,
all-to-all, send/recv and pipeline hops; results in nccl-tests' terms.

Decomposition (NCCL's algorithms as described in its docs and the NCCL tests'
doc/PERFORMANCE.md; the code is ours):

- **Ring** (all-reduce, all-gather, reduce-scatter). Ranks in group order form the ring;
  the ranks of one host are consecutive (rank = node * G + local). With ``k`` ranks per
  host, ``k`` channels run side by side, each on ``1/k`` of the buffer. Channel ``c``
  enters every host at its ``c mod k``-th rank, walks the host's ranks over NVLink, and
  leaves through the entry rank's NIC (NCCL's ``net -> GPUs -> net`` channel pattern), so
  channel ``c`` of a rail-aligned group stays on one rail. Each edge of a channel carries
  ``factor * S / channels`` bytes, ``factor`` = 2(n-1)/n for all-reduce and (n-1)/n for
  all-gather and reduce-scatter; a channel is one coflow (every step waits for its
  slowest edge). Latency: 2(n-1) steps (all-reduce) or n-1 steps, times alpha.
- **Tree** (all-reduce). NCCL's double binary tree over nodes (NCCL ``src/graph/trees.cc``,
  ``ncclGetBtree``/``ncclGetDtree``): hosts numbered in group order, tree 0 links host
  ``r`` to ``(r ^ b) | 2b`` (``b`` its lowest set bit; ``r ^ b`` when that is past the
  end), tree 1 is its mirror (even host count) or its shift by one (odd), so a host is
  interior in at most one tree and neighbours in rank order are neighbours in the tree
  (few edges leave a ToR group). Each tree carries ``S/2``: children send to parents
  (reduce) while parents send to children (broadcast), pipelined; each host has one
  edge to its parent across the fabric, and inside the host a chain over NVLink from
  the entry rank. Groups inside one host use the ring. Latency: 2 (depth + k - 1) steps.
- **All-to-all**: every ordered pair sends ``S/n``; one coflow per pair.
- **Send/recv** (nccl-tests ``sendrecv``): rank i sends ``S`` to rank i+1 mod n.
- **Pipeline hops**: each stage boundary sends forward and backward (1F1B); one coflow per
  pipeline, which advances at the pace of its slowest hop.

Channels: NCCL duplicates the channels its topology search finds (``ncclTopoDupChannels``
in NCCL ``src/graph/search.cc``; nccl-tests logs on 8-NIC hosts show two channels per NIC),
so by default a group spanning hosts runs ``channels_per_nic`` (2) channels per rank a host
holds; a single-host group runs one. Queue pairs per connection: NCCL's
``NCCL_IB_QPS_PER_CONNECTION`` defaults to 1 (NCCL environment-variable docs;
:class:`~rankmap.simulator.ecmp.EcmpConfig`); they spread a connection over ECMP paths.

Per-connection rate cap (:mod:`rankmap.simulator.connections`): the flows between hosts
that one group sends from a rank to a peer rank through one NIC form one connection (a
ring's hop with all its channels; a tree edge one way, both trees' channels; one pair of
an all-to-all; one send/recv or pipeline hop one way), which moves at most
``connection_rate_fraction`` (0.8, an assumption) of the NIC's line rate in total, however
many channels and queue pairs it runs. So a ring alone on a NIC reaches 0.8 of line rate
(busbw = 0.8 B) and two rings sharing a NIC run 2 x 0.8 = 1.6x slower than one alone,
not 2x, with any channel count. NVLink flows are not capped. Consequences of the rule, by
design: a NIC carrying two or more connections can fill its line rate, so a tree
all-reduce (each NIC carries both trees' edges to different peers, each at most half of
line rate) keeps its 2S/B while a ring's single hop per NIC is capped: with the default cap
a large tree all-reduce across ToR groups is 1.25x faster than a ring (NCCL's tuner,
``src/graph/tuning.cc``, rates a tree at about 0.92 of a ring's bandwidth; pass
``connection_rate_fraction=None`` where that comparison matters), and a ring whose ranks
share a NIC (two GPUs per NIC) reaches line rate, as two connections leave that NIC.

Times are ``bytes / rate + steps * alpha``, rates max-min fair on links scaled by
``efficiency`` and under the connection caps, so a ring all-reduce over a fabric whose
per-rank bottleneck share is B takes ``2(n-1)/n * S / min(B, 0.8 * efficiency * NIC rate)``
plus its steps' latency. Latency per step is ``alpha_s`` when the step crosses the network
and ``alpha_nvlink_s`` when it stays on NVLink. ``algbw = S / t`` and ``busbw = algbw *
factor`` (nccl-tests doc/PERFORMANCE.md: factor 2(n-1)/n for all-reduce, (n-1)/n for
all-gather, reduce-scatter and all-to-all, 1 for send/recv).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from rankmap.job.comm import COLLECTIVES, bus_factor
from rankmap.simulator.connections import connection_caps
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.events import FlowResult, complete_coflows
from rankmap.simulator.flows import FlowSet, RankPlacement
from rankmap.simulator.maxmin import FairShare
from rankmap.simulator.network import Network
from rankmap.simulator.ring_flows import connection_key, make_flows, ring_flows
from rankmap.simulator.tree_flows import tree_flows

__all__ = ["OPS", "ALGORITHMS", "CollectiveConfig", "CollectiveResult", "bus_factor", "collective_flows",
           "pipeline_flows", "point_to_point_flows", "simulate_collective", "run_flows"]

OPS = COLLECTIVES
ALGORITHMS = ("ring", "tree")


@dataclass(frozen=True, kw_only=True)
class CollectiveConfig:
    """How collectives run.

    Attributes
    ----------
    alpha_s : float
        Latency of an algorithm step that crosses the network, seconds (NCCL's per-hop
        network latency is a few microseconds).
    alpha_nvlink_s : float or None
        Latency of a step that stays on NVLink; None: ``alpha_s``. NCCL's tuning model
        (NCCL ``src/graph/tuning.cc``, ``hwLatencies``) puts a ring step of the Simple
        protocol at 3.4 us over NVLink and 14 us over the network (plus the graph's
        ``latencyInter``); the default keeps one alpha, as nothing here is calibrated
        against that table. ``rankmap simulate --alpha-nvlink-us``.
    efficiency : float
        Fraction of line rate a transfer reaches (nccl-tests usually measure 0.8-0.95).
    algorithm : str
        All-reduce algorithm, ``"ring"`` or ``"tree"``.
    channels : int or None
        Channels per group; None: ``channels_per_nic`` per rank a host holds (one per
        rank for a group inside one host).
    channels_per_nic : int
        Channels per rank of a host when ``channels`` is None: 2, as NCCL duplicates its
        channels (``ncclTopoDupChannels``, NCCL ``src/graph/search.cc``); users change the
        count with ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` (NCCL documentation,
        "Environment Variables"). Send/recv, all-to-all and pipeline hops do not read it:
        NCCL opens ``NCCL_NCHANNELS_PER_NET_PEER`` channels (2 by default, same page) to
        a network peer, but they form one connection under one cap, so their count does
        not change a transfer's time. ``rankmap simulate --channels-per-nic``.
    connection_rate_fraction : float or None
        Most one connection moves, as a fraction of its sending NIC's line rate (times
        ``efficiency``), summed over its channels and queue pairs
        (:mod:`rankmap.simulator.connections`); None or 1: no cap below line rate, the
        line-rate busbw nccl-tests shows on an idle fabric. Assumption: 0.8, the value
        that makes two rings sharing one NIC 1.6x slower than one ring alone (2 x 0.8),
        the slowdown NCCL users report; not an NVIDIA figure.
        ``rankmap simulate --connection-rate-fraction``.
    """

    alpha_s: float = 5e-6
    alpha_nvlink_s: float | None = None
    efficiency: float = 1.0
    algorithm: str = "ring"
    channels: int | None = None
    channels_per_nic: int = 2
    connection_rate_fraction: float | None = 0.8

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and math.isfinite(self.alpha_s)):
            raise ValueError(f"alpha_s must be a finite number >= 0, got {self.alpha_s!r}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency!r}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.channels is not None and (not isinstance(self.channels, int) or self.channels < 1):
            raise ValueError(f"channels must be a positive integer or None, got {self.channels!r}")
        if not isinstance(self.channels_per_nic, int) or self.channels_per_nic < 1:
            raise ValueError(f"channels_per_nic must be a positive integer, got {self.channels_per_nic!r}")
        if self.alpha_nvlink_s is not None and not (self.alpha_nvlink_s >= 0 and math.isfinite(self.alpha_nvlink_s)):
            raise ValueError(f"alpha_nvlink_s must be a finite number >= 0 or None, got {self.alpha_nvlink_s!r}")
        if self.connection_rate_fraction is not None and not 0 < self.connection_rate_fraction <= 1:
            raise ValueError(f"connection_rate_fraction must be in (0, 1] or None, "
                             f"got {self.connection_rate_fraction!r}")

    @property
    def alpha_local_s(self) -> float:
        """Latency of a step on NVLink."""
        return self.alpha_s if self.alpha_nvlink_s is None else self.alpha_nvlink_s


@dataclass(frozen=True, eq=False)
class CollectiveResult:
    """One collective run by every group at once.

    Attributes
    ----------
    op : str
    n_ranks : int
        Ranks per group (n).
    size_bytes : float
        nccl-tests' S.
    time_s : float
        Completion of the slowest group.
    group_times_s : ndarray
        ``group_times_s[n_groups]``.
    n_flows : int
    events : int
    """

    op: str
    n_ranks: int
    size_bytes: float
    time_s: float
    group_times_s: np.ndarray
    n_flows: int
    events: int = field(default=0)

    @property
    def algbw_gb_s(self) -> float:
        """Algorithm bandwidth S / t in GB/s (1e9 bytes/s), as nccl-tests prints it."""
        return self.size_bytes / self.time_s / 1e9 if self.time_s > 0 else float("inf")

    @property
    def busbw_gb_s(self) -> float:
        """Bus bandwidth: algbw times :func:`bus_factor`."""
        return self.algbw_gb_s * bus_factor(self.op, self.n_ranks)


def collective_flows(placement: RankPlacement, groups: np.ndarray, op: str, size_bytes: float, *, count: int = 1,
                     config: CollectiveConfig | None = None, label: str | None = None, comm: str = "") -> FlowSet:
    """Flows of ``count`` back-to-back collectives of ``size_bytes`` in every group.

    Parameters
    ----------
    placement : RankPlacement
    groups : ndarray
        ``groups[n_groups, n]``: global ranks of each group, in ring order.
    op : str
        One of ``OPS``.
    size_bytes : float
        nccl-tests' S of one collective.
    count : int
        Collectives in a row (bytes and latency add up).
    config : CollectiveConfig, optional
    label : str, optional
        Name of the collective in results (default: ``op``).
    comm : str
        Communicator name; collectives on one communicator share connections (paths).

    Returns
    -------
    FlowSet
        ``coflow_group`` indexes rows of ``groups``.
    """
    config = config or CollectiveConfig()
    label = label or op
    groups = np.asarray(groups, dtype=np.int64)
    g, n = groups.shape
    if n < 2 or size_bytes <= 0 or count <= 0:
        return FlowSet.empty(label)
    if op == "allreduce" and config.algorithm == "tree":
        return tree_flows(placement, groups, size_bytes, count, config, label, comm)
    if op in ("allreduce", "allgather", "reducescatter"):
        steps = (2 if op == "allreduce" else 1) * (n - 1) * count
        return ring_flows(placement, groups, bus_factor(op, n), size_bytes * count, steps, config, label, comm)
    if op == "alltoall":
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        coflow = np.arange(g)[:, None] * i.size + np.arange(i.size)[None, :]
        return make_flows(placement, groups[:, i], groups[:, j], coflow, connection_key(comm, j[None, :]),
                      size_bytes * count / n, count * config.alpha_s, np.repeat(np.arange(g), i.size), label,
                      local_latency_s=count * config.alpha_local_s)
    if op == "sendrecv":
        coflow = np.arange(g * n).reshape(g, n)
        return make_flows(placement, groups, np.roll(groups, -1, axis=1), coflow, connection_key(comm, 0),
                      size_bytes * count, count * config.alpha_s, np.repeat(np.arange(g), n), label,
                      local_latency_s=count * config.alpha_local_s)
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")


def pipeline_flows(placement: RankPlacement, groups: np.ndarray, size_bytes: float, sends: float, *,
                   wrap_sends: float = 0.0, config: CollectiveConfig | None = None, label: str = "pp p2p",
                   comm: str = "pp") -> FlowSet:
    """Pipeline hops: every stage boundary of every pipeline sends ``sends`` messages of
    ``size_bytes`` forward (activations) and as many backward (gradients).

    One coflow per pipeline: in 1F1B every stage waits for its neighbours' sends each
    micro-batch, so a pipeline advances at the pace of its slowest hop (and a fast hop
    leaves bandwidth to others). With interleaved stages the hop from the last stage back
    to the first carries ``wrap_sends`` messages each way, as a second coflow of the same
    pipeline. ``groups[n_groups, pp]`` lists each pipeline's ranks by stage. Latency: the
    messages of a direction x alpha, both directions counted.
    """
    config = config or CollectiveConfig()
    groups = np.asarray(groups, dtype=np.int64)
    g, n = groups.shape
    if n < 2 or size_bytes <= 0 or sends <= 0:
        return FlowSet.empty(label)
    src = np.concatenate([groups[:, :-1], groups[:, 1:]], axis=1)     # (G, 2(n-1)) forward, then backward
    dst = np.concatenate([groups[:, 1:], groups[:, :-1]], axis=1)
    coflow = np.broadcast_to(np.arange(g)[:, None], src.shape)
    main = make_flows(placement, src, dst, coflow, connection_key(comm, 0), size_bytes * sends, 2 * sends * config.alpha_s,
                  np.arange(g), label, local_latency_s=2 * sends * config.alpha_local_s)
    if wrap_sends <= 0:
        return main
    ends = groups[:, [-1, 0]]                                           # (G, 2) last stage, first stage
    wrap = make_flows(placement, ends, ends[:, ::-1], np.broadcast_to(np.arange(g)[:, None], (g, 2)), connection_key(comm, 1),
                  size_bytes * wrap_sends, 2 * wrap_sends * config.alpha_s, np.arange(g), label,
                  local_latency_s=2 * wrap_sends * config.alpha_local_s)
    both = FlowSet.concat([main, wrap])
    return dataclasses.replace(both, coflow_part=np.zeros(both.n_coflows, dtype=np.int64), parts=(label,))


def point_to_point_flows(placement: RankPlacement, src: np.ndarray, dst: np.ndarray, size_bytes: float, *,
                         label: str = "p2p", comm: str = "p2p", latency_s: float = 0.0) -> FlowSet:
    """One independent flow of ``size_bytes`` from each rank ``src[F]`` to rank ``dst[F]``
    (each its own coflow and group, so its own connection for the rate cap): custom
    traffic, e.g. m flows for an ECMP experiment."""
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    return make_flows(placement, src, dst, np.arange(src.size), connection_key(comm, 0), size_bytes, latency_s,
                  np.arange(src.size), label)


def run_flows(network: Network, flows: FlowSet, routing: EcmpConfig, config: CollectiveConfig,
              release_s: np.ndarray | None = None) -> FlowResult:
    """Route a flow set and run it to completion, each connection capped below line rate.

    As :func:`rankmap.simulator.events.simulate_flows`, plus the per-connection cap
    (:func:`rankmap.simulator.connections.connection_caps`): the flows one group sends from
    a rank to a peer on another host through one NIC move at most
    ``config.connection_rate_fraction`` of that NIC's line rate (times ``efficiency``)
    together, one extra constraint row per distinct set of coflows, routed with the links
    (:meth:`Network.route`'s ``extra_rows``). ``release_s[C]``, optional: when each coflow
    enters the network (default: all at 0; :func:`rankmap.simulator.events.complete_coflows`).

    Returns
    -------
    FlowResult
        ``link_bytes`` over the network's links only.
    """
    rows, cap = connection_caps(network, flows, config)
    route = network.route(flows, routing, extra_rows=rows)
    fair = FairShare(route.constraints, np.concatenate([network.capacity_bps * config.efficiency, cap]),
                     route.column_entries)
    finish, first, events = complete_coflows(fair, flows.coflow_bytes, release_s=release_s)
    finish = np.where(flows.coflow_bytes > 0, finish + flows.coflow_latency_s, 0.0)
    return FlowResult(finish, first, route.matrix @ flows.coflow_bytes, route, events, fair.rounds)


def simulate_collective(network: Network, placement: RankPlacement, op: str, size_bytes: float, *,
                        groups: np.ndarray | None = None, config: CollectiveConfig | None = None,
                        routing: EcmpConfig | None = None) -> CollectiveResult:
    """Run one collective in every group at once and time it.

    Parameters
    ----------
    network : Network
    placement : RankPlacement
    op : str
        One of ``OPS``.
    size_bytes : float
        nccl-tests' S.
    groups : ndarray, optional
        ``groups[n_groups, n]``; default one group of all ranks in rank order.
    config : CollectiveConfig, optional
    routing : EcmpConfig, optional

    Returns
    -------
    CollectiveResult

    Examples
    --------
    Ring all-reduce of 1 GB over 4 single-GPU hosts with 200 Gb/s NICs (B = 25 GB/s), each
    rank's one connection capped at 0.8 B: 2 * 3/4 * 1e9 / 20e9 = 75 ms; 60 ms without the cap.

    >>> from rankmap.topology.spec import parse_cluster
    >>> net = Network(parse_cluster("hosts: {gpus: 1, nics: 1}\\ntor_groups: [{name: a, hosts: 'h[1-4]'}]"))
    >>> pl = RankPlacement.on_hosts(net, ["h1", "h2", "h3", "h4"], 1)
    >>> r = simulate_collective(net, pl, "allreduce", 1e9, config=CollectiveConfig(alpha_s=0))
    >>> round(r.time_s * 1e3, 3), round(r.busbw_gb_s, 3)
    (75.0, 20.0)
    >>> free = CollectiveConfig(alpha_s=0, connection_rate_fraction=None)
    >>> round(simulate_collective(net, pl, "allreduce", 1e9, config=free).time_s * 1e3, 3)
    60.0
    """
    config = config or CollectiveConfig()
    routing = routing or EcmpConfig()
    if groups is None:
        groups = np.arange(placement.world_size)[None, :]
    groups = np.asarray(groups, dtype=np.int64)
    flows = collective_flows(placement, groups, op, size_bytes, config=config, comm=op)
    result = run_flows(network, flows, routing, config)
    group_times = np.zeros(groups.shape[0])
    if flows.n_coflows:
        np.maximum.at(group_times, flows.coflow_group, result.finish_s)
    return CollectiveResult(op, groups.shape[1], float(size_bytes), float(group_times.max(initial=0.0)),
                            group_times, flows.n_flows, result.events)
