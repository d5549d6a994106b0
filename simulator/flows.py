"""Flows and where ranks sit: the data the collective builders hand to the network.

A *flow* moves bytes from one GPU to another (over NVLink inside a host, over the NICs
and switches between hosts). Flows are grouped into *coflows* whose flows all move at one
rate: the edges of one ring channel (a ring step cannot finish before its slowest edge,
so NCCL's ring advances at the pace of its slowest link), one tree, or a single
point-to-point transfer. A coflow of one flow is an ordinary flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rankmap.errors import RankmapError

__all__ = ["RankPlacement", "FlowSet", "LazyFlowSet", "FLOW_FIELDS"]


@dataclass(frozen=True, eq=False)
class RankPlacement:
    """Where every global rank runs.

    Attributes
    ----------
    node : ndarray
        ``node[W]``: node rank (ranks of one node share a host).
    host : ndarray
        ``host[W]``: host index in :class:`rankmap.simulator.network.Network` (cluster order).
    gpu : ndarray
        ``gpu[W]``: local GPU (= local rank).
    nic : ndarray
        ``nic[W]``: NIC (rail) the GPU sends through.
    """

    node: np.ndarray
    host: np.ndarray
    gpu: np.ndarray
    nic: np.ndarray

    @property
    def world_size(self) -> int:
        return int(self.node.size)

    @classmethod
    def from_rankmap(cls, rm, network) -> "RankPlacement":
        """The placement a :class:`rankmap.job.rank_map.RankMap` describes, on ``network``'s hosts.

        Raises
        ------
        RankmapError
            A host of the map is not in the network's cluster.
        """
        missing = [h for h in rm.hosts if h not in network.host_index]
        if missing:
            raise RankmapError(f"rank map host {missing[0]!r} is not in cluster {network.cluster.name!r}")
        node_host = np.array([network.host_index[h] for h in rm.hosts], dtype=np.int64)
        counts = np.array([len(r) for r in rm.rails], dtype=np.int64)   # ranks per node (may differ)
        node = np.repeat(np.arange(len(rm.hosts)), counts)
        local = np.arange(node.size) - np.concatenate([[0], np.cumsum(counts)])[node]
        rails = np.array([r for node_rails in rm.rails for r in node_rails], dtype=np.int64)
        return cls(node, node_host[node], local, rails)

    @classmethod
    def on_hosts(cls, network, hosts: list[str], gpus_per_host: int) -> "RankPlacement":
        """Ranks ``node * gpus_per_host + local`` on ``hosts`` in this order (the launcher's rule).

        Examples
        --------
        >>> from rankmap.topology.spec import parse_cluster
        >>> from rankmap.simulator.network import Network
        >>> net = Network(parse_cluster("hosts: {gpus: 2, nics: 2}\\ntor_groups: [{name: a, hosts: 'h[1-2]'}]"))
        >>> RankPlacement.on_hosts(net, ["h2", "h1"], 2).host.tolist()
        [1, 1, 0, 0]
        """
        node_host = np.array([network.host_index[h] for h in hosts], dtype=np.int64)
        ranks = np.arange(len(hosts) * gpus_per_host)
        node, local = ranks // gpus_per_host, ranks % gpus_per_host
        host = node_host[node]
        gpus, nics = network.host_gpus[host], network.host_nics[host]
        if (local >= gpus).any():
            raise RankmapError(f"a host has fewer than {gpus_per_host} GPUs")
        return cls(node, host, local, local * nics // gpus)


@dataclass(frozen=True, eq=False)
class FlowSet:
    """Flows grouped into coflows.

    Attributes
    ----------
    src_host, src_gpu, src_nic, dst_host, dst_gpu, dst_nic : ndarray
        ``[F]`` endpoints of each flow (host index, local GPU, NIC); NICs matter only
        between hosts.
    coflow : ndarray
        ``coflow[F]``: coflow of each flow, in ``0..C-1``.
    conn : ndarray
        ``conn[F]`` uint64: connection key (communicator and channel); the ECMP source
        ports derive from it, so two collectives on one communicator share paths.
    coflow_bytes : ndarray
        ``coflow_bytes[C]``: bytes each flow of the coflow carries.
    coflow_latency_s : ndarray
        ``coflow_latency_s[C]``: latency added after its last byte (steps x alpha).
    coflow_group : ndarray
        ``coflow_group[C]``: group (row of the group table) the coflow belongs to.
    coflow_part : ndarray
        ``coflow_part[C]``: index into ``parts``.
    parts : tuple of str
        Labels of the collectives in the set, e.g. ``("dp reducescatter",)``.
    """

    src_host: np.ndarray
    src_gpu: np.ndarray
    src_nic: np.ndarray
    dst_host: np.ndarray
    dst_gpu: np.ndarray
    dst_nic: np.ndarray
    coflow: np.ndarray
    conn: np.ndarray
    coflow_bytes: np.ndarray
    coflow_latency_s: np.ndarray
    coflow_group: np.ndarray
    coflow_part: np.ndarray
    parts: tuple

    def between_set(self) -> "FlowSet | None":
        """The flows between hosts as a flow set of their own, when known without the flow table
        (:class:`LazyFlowSet`); None here."""
        return None

    def nvlink_rows(self, gpus: int):
        """None: routing reads every flow (see :meth:`LazyFlowSet.nvlink_rows`)."""
        return None

    def connection_groups(self, gpus: int):
        """None: the rate cap groups the flows between hosts itself (see
        :meth:`LazyFlowSet.connection_groups`)."""
        return None

    @property
    def n_flows(self) -> int:
        return int(self.coflow.size)

    @cached_property
    def between_hosts(self) -> np.ndarray:
        """Indices of the flows whose two ends are on different hosts (sorted; computed once)."""
        return np.flatnonzero(self.src_host != self.dst_host)

    @property
    def n_coflows(self) -> int:
        return int(self.coflow_bytes.size)

    @classmethod
    def empty(cls, label: str) -> "FlowSet":
        i = np.zeros(0, dtype=np.int64)
        f = np.zeros(0)
        return cls(i, i, i, i, i, i, i, i.astype(np.uint64), f, f, i, i, (label,))

    @classmethod
    def concat(cls, sets: list["FlowSet"]) -> "FlowSet":
        """One flow set holding every flow of ``sets``; coflow and part indices are renumbered."""
        if not sets:
            return cls.empty("")
        c_off = np.cumsum([0] + [s.n_coflows for s in sets])
        p_off = np.cumsum([0] + [len(s.parts) for s in sets])

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(s, name) for s in sets])

        return cls(cat("src_host"), cat("src_gpu"), cat("src_nic"), cat("dst_host"), cat("dst_gpu"),
                   cat("dst_nic"),
                   np.concatenate([s.coflow + c_off[i] for i, s in enumerate(sets)]),
                   cat("conn"), cat("coflow_bytes"), cat("coflow_latency_s"), cat("coflow_group"),
                   np.concatenate([s.coflow_part + p_off[i] for i, s in enumerate(sets)]),
                   tuple(p for s in sets for p in s.parts))


FLOW_FIELDS = ("src_host", "src_gpu", "src_nic", "dst_host", "dst_gpu", "dst_nic", "coflow", "conn")


class _Built:
    """A per-flow field of :class:`LazyFlowSet`: reading it builds the flow table once."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        obj.__dict__.update(zip(FLOW_FIELDS, obj.__dict__.pop("_build")()))
        return obj.__dict__[self.name]


class LazyFlowSet(FlowSet):
    """A :class:`FlowSet` that knows its flows between hosts and its NVLink entries without its flow table.

    A ring over 16,384 GPUs has 262,144 flows, seven in eight of them over NVLink; routing
    needs only the flows between hosts and, per GPU, the coflows it sends and receives
    over NVLink. So :func:`rankmap.simulator.ring_flows.ring_flows` hands those over and
    builds the per-flow arrays (the same values) only when something reads one.

    Create with :meth:`deferred`; ``dataclasses.replace`` and :meth:`FlowSet.concat` read
    every field and so get an ordinary flow set.
    """

    src_host = _Built()
    src_gpu = _Built()
    src_nic = _Built()
    dst_host = _Built()
    dst_gpu = _Built()
    dst_nic = _Built()
    coflow = _Built()
    conn = _Built()

    @classmethod
    def deferred(cls, build, n_flows: int, between: FlowSet, between_hosts: np.ndarray, nvlink, *,
                 coflow_bytes, coflow_latency_s, coflow_group, coflow_part, parts, connections=None
                 ) -> "LazyFlowSet":
        """A flow set whose flow table ``build()`` returns (the eight ``[F]`` arrays of ``FLOW_FIELDS``).

        Parameters
        ----------
        build : callable
            Returns the per-flow arrays, in ``FLOW_FIELDS`` order.
        n_flows : int
            F.
        between : FlowSet
            The flows between hosts (``between_hosts`` of them, in flow order), with this
            set's coflow arrays.
        between_hosts : ndarray
            ``between_hosts[I]``: their indices.
        nvlink : callable
            ``nvlink(gpus)``: what :meth:`nvlink_rows` returns.
        connections : callable, optional
            ``connections(gpus)``: what :meth:`connection_groups` returns.
        """
        obj = object.__new__(cls)
        obj.__dict__.update(coflow_bytes=coflow_bytes, coflow_latency_s=coflow_latency_s, coflow_group=coflow_group,
                            coflow_part=coflow_part, parts=parts, _build=build,
                            _n_flows=n_flows, _between=between, between_hosts=between_hosts, _nvlink=nvlink,
                            _connections=connections)
        return obj

    @property
    def n_flows(self) -> int:
        return int(self.__dict__["_n_flows"]) if "_n_flows" in self.__dict__ else int(self.coflow.size)

    def between_set(self) -> FlowSet | None:
        """The flows between hosts (``between_hosts`` of them, in flow order) as a flow set of
        their own; None when this set was built in full (e.g. by ``dataclasses.replace``)."""
        return self.__dict__.get("_between")

    def nvlink_rows(self, gpus: int):
        """``(counts[2, K], write, per_coflow[C])`` for the flows that stay inside a host:
        ``counts[0, k]`` and ``counts[1, k]`` entries in the rows of the ``nvlink-out`` and
        ``nvlink-in`` links of GPU ``k = host * gpus + gpu`` (K: up to the last GPU used);
        ``write(out)`` puts those rows' columns (coflows) into the integer array ``out`` in
        row order (out rows, then in rows), ascending within a row, every entry one flow;
        ``per_coflow``: entries per coflow. None when this set was built in full or two of
        its ranks share a GPU."""
        if "_nvlink" not in self.__dict__:
            return None
        return self.__dict__["_nvlink"](gpus)

    def connection_groups(self, gpus: int):
        """The flows between hosts (:meth:`between_set`) grouped into connections for the rate
        cap, from the set's structure instead of a sort: ``(conn[P], col[P], count[P],
        conn_of_flow[I])``, as :func:`rankmap.simulator.connections.connection_caps` groups
        them, except that connections known to carry the same coflows may share one index.
        None when this set was built in full or two of its ranks share a GPU."""
        make = self.__dict__.get("_connections")
        return None if make is None or "_between" not in self.__dict__ else make(gpus)
