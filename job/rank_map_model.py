"""The placed job: :class:`RankMap`, which host, GPU and rail every global rank runs on.

Global rank ``r`` runs on node rank ``r // G`` at local rank ``r % G`` (``G`` =
``nproc_per_node``), or, on hosts with different GPU counts, node after node as ``nprocs``
says: what torchrun, Slurm and mpirun do when hosts are given in node-rank order. The file
that carries a map, ``rankmap.json``, is described in :mod:`rankmap.job.rank_map`; writing it
is :mod:`rankmap.job.rank_map_write`, reading it :mod:`rankmap.job.rank_map_read`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from rankmap.errors import RankMapFileError
from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import DIMS, JobSpec
from rankmap.topology.model import Cluster

__all__ = ["RankMap", "ENTRY_KEYS"]

#: The keys of a rank's entry in ``rankmap.json``, in the order they are written.
ENTRY_KEYS = ("rank", "host", "node_rank", "local_rank", "tor_group", "rail") + DIMS


@dataclass(frozen=True)
class RankMap:
    """A placed job.

    Attributes
    ----------
    job : JobSpec
        The job, dp resolved.
    cluster_name, cluster_hash : str
        The cluster it was planned on (see ``Cluster.spec_hash``).
    hosts : tuple of str
        Host of each node rank (``hosts[node_rank]``).
    tor_groups : tuple of str
        ToR group of each node rank.
    rails : tuple of tuple of int
        ``rails[node_rank][local_rank]``: rail (NIC) that GPU uses; ``len(rails[n])`` is the
        number of ranks on node n.
    nproc_per_node : int
        Ranks per host (G): the same on every host, except in maps of hosts with different
        GPU counts, where it is the largest and ``nprocs`` gives each node's.
    summary : dict
        Plan metrics written alongside (informational).
    """

    job: JobSpec
    cluster_name: str
    cluster_hash: str
    hosts: tuple
    tor_groups: tuple
    rails: tuple
    nproc_per_node: int
    summary: dict = field(default_factory=dict, compare=False)
    source: str = field(default="rankmap.json", compare=False)
    # What the plan was told besides the cluster and the job (hosts excluded and reserved, as
    # hostlists), so that `rankmap replan` keeps honouring it.
    context: dict = field(default_factory=dict, compare=False)

    @cached_property
    def nprocs(self) -> tuple:
        """Ranks on each node rank (computed once: loops over nodes index it)."""
        return tuple(len(r) for r in self.rails)

    @property
    def uniform(self) -> bool:
        """Every node runs ``nproc_per_node`` ranks (rank = node_rank * G + local_rank)."""
        return all(n == self.nproc_per_node for n in self.nprocs)

    @cached_property
    def offsets(self) -> np.ndarray:
        """``offsets[N+1]``: first global rank of each node rank (launchers number ranks so)."""
        return np.concatenate([[0], np.cumsum(self.nprocs)])

    @property
    def world_size(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def rank_node(self) -> np.ndarray:
        """``rank_node[W]``: node rank of each global rank."""
        return np.repeat(np.arange(len(self.hosts)), self.nprocs)

    @cached_property
    def layout(self) -> ParallelLayout:
        return ParallelLayout.of(self.job)

    def entry(self, rank: int) -> dict:
        """The ``ranks[rank]`` record of rankmap.json."""
        node = int(self.rank_node[rank])
        local = rank - int(self.offsets[node])
        rec = {"rank": rank, "host": self.hosts[node], "node_rank": node, "local_rank": local,
               "tor_group": self.tor_groups[node], "rail": self.rails[node][local]}
        rec.update(self.layout.coords(rank))
        return rec

    @classmethod
    def from_hosts(cls, job: JobSpec, cluster: Cluster, hosts: list[str], nproc_per_node: int,
                   summary: dict | None = None, nprocs: list[int] | None = None) -> "RankMap":
        """Build the map that launching ``hosts`` in this order gives (``nprocs[n]`` ranks on
        node n; default ``nproc_per_node`` on every node)."""
        hs = [cluster.host(h) for h in hosts]
        counts = nprocs or [nproc_per_node] * len(hs)
        shapes: dict = {}            # one rails tuple per (GPUs, NICs, ranks) shape, shared by its hosts
        rails = tuple(shapes.get((h.gpus, h.nics, n)) or shapes.setdefault(
            (h.gpus, h.nics, n), tuple(h.rail_of_gpu(lr) for lr in range(n))) for h, n in zip(hs, counts))
        return cls(job=job, cluster_name=cluster.name, cluster_hash=cluster.spec_hash(), hosts=tuple(hosts),
                   tor_groups=tuple(h.tor_group for h in hs), rails=rails, nproc_per_node=max(counts),
                   summary=dict(summary or {}))

    def verify_cluster(self, cluster: Cluster, source: str | None = None) -> None:
        """Check the map belongs to ``cluster``: same spec hash, hosts present, GPUs enough.

        Raises
        ------
        RankMapFileError
            The map was made for another cluster (its hash, or its name, differs: the hash
            covers the name, so a name edited in the map is caught too) or names a host the
            cluster lacks.
        """
        source = source or self.source
        if self.cluster_hash == cluster.spec_hash() and self.cluster_name != cluster.name:
            raise RankMapFileError(f"rank map names cluster {self.cluster_name!r}, but its sha256 is that of "
                                   f"{cluster.name!r}: the map was edited", source=source, key="cluster.name")
        if self.cluster_hash != cluster.spec_hash() and self.cluster_name == cluster.name:
            raise RankMapFileError(f"rank map was made for cluster {self.cluster_name!r} as it was then (sha256 "
                                   f"{self.cluster_hash[:12]}...): its spec has changed since (hosts, ToR groups, "
                                   f"switches or links; sha256 {cluster.spec_hash()[:12]}... now): plan the job again "
                                   f"on it", source=source, key="cluster.sha256")
        if self.cluster_hash != cluster.spec_hash():
            raise RankMapFileError(f"rank map was made for cluster {self.cluster_name!r} "
                               f"(sha256 {self.cluster_hash[:12]}...), not for {cluster.name!r} "
                               f"(sha256 {cluster.spec_hash()[:12]}...)", source=source, key="cluster.sha256")
        for node, name in enumerate(self.hosts):
            if not cluster.has_host(name):
                raise RankMapFileError(f"host {name!r} is not in the cluster", source=source, key="ranks")
            host = cluster.host(name)
            rails = tuple(host.rail_of_gpu(lr) for lr in range(min(host.gpus, self.nprocs[node])))
            if rails != tuple(self.rails[node]):
                raise RankMapFileError(f"host {name!r}: the map's rails {list(self.rails[node])} are not the cluster's "
                                   f"{list(rails)}", source=source, key="ranks")
            if host.gpus < self.nprocs[node] or host.tor_group != self.tor_groups[node]:
                raise RankMapFileError(f"host {name!r} does not match the cluster (GPUs {host.gpus}, "
                                   f"ToR group {host.tor_group!r})", source=source, key="ranks")
