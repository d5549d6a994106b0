"""The parts a cluster is built of: hosts, ToR groups, switches above them, link speeds,
the spine, and the other topologies of a Slurm topology.yaml it was imported from.

A host has ``gpus`` GPUs and ``nics`` rail NICs; NIC ``i`` is cabled to rail ToR ``i`` of
the host's ToR group, and GPU ``g`` uses NIC ``g * nics // gpus``. The cluster that joins
them, and checks that they fit together, is :class:`rankmap.topology.model.Cluster`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Host", "Links", "Spine", "TorGroup", "Switch", "SlurmTopology", "HOST_STATES", "MAX_HOST_GPUS"]

HOST_STATES = ("free", "busy", "failed")
MAX_HOST_GPUS = 1024   # GPUs (and NICs) one host may have: a cluster spec's and every importer's limit


@dataclass(frozen=True, kw_only=True)
class Links:
    """Link speeds of the fabric, in Gb/s per link (one direction).

    Attributes
    ----------
    nic_gbps : float
        Speed of one host NIC (one rail).
    tor_downlink_gbps : float
        Speed of one ToR port facing a host (a 400G port split in two gives 200).
    tor_uplinks : int
        Uplinks of one rail ToR switch to the spine layer.
    tor_uplink_gbps : float
        Speed of one ToR uplink.
    nvlink_gbps : float
        Per-GPU NVLink bandwidth inside a host, one direction (A100: 300 GB/s = 2400 Gb/s,
        NVIDIA A100 datasheet; H100: 450 GB/s = 3600 Gb/s).
    """

    nic_gbps: float = 200.0
    tor_downlink_gbps: float = 200.0
    tor_uplinks: int = 32
    tor_uplink_gbps: float = 400.0
    nvlink_gbps: float = 2400.0

    @property
    def uplink_to_downlink_ratio(self) -> float:
        """Bandwidth of one uplink over one downlink (MegaScale: 2.0)."""
        return self.tor_uplink_gbps / self.tor_downlink_gbps


@dataclass(frozen=True, kw_only=True)
class Spine:
    """The spine layer joining ToR groups: ``switches`` spine switches; rail ToR uplink
    ``u`` goes to spine switch ``u % switches``."""

    switches: int = 32


@dataclass(frozen=True, kw_only=True)
class Host:
    """One host (server).

    Attributes
    ----------
    name : str
        Hostname as the launcher and scheduler know it.
    gpus : int
        GPUs on the host (local ranks 0..gpus-1).
    nics : int
        Rail NICs; NIC i goes to rail ToR i of the host's ToR group.
    tor_group : str
        Name of the ToR group the host is cabled to.
    state : str
        "free", "busy" (allocated to another job) or "failed".
    """

    name: str
    gpus: int
    nics: int
    tor_group: str
    state: str = "free"

    def rail_of_gpu(self, local_rank: int) -> int:
        """Rail (NIC index) GPU ``local_rank`` sends through: ``local_rank * nics // gpus``."""
        if not 0 <= local_rank < self.gpus:
            raise ValueError(f"{self.name} has no GPU {local_rank}")
        return local_rank * self.nics // self.gpus


@dataclass(frozen=True, kw_only=True)
class TorGroup:
    """One ToR group: a set of rail ToR switches serving up to ``capacity`` hosts.

    Attributes
    ----------
    name : str
        Group name.
    index : int
        Position in the cluster's list of groups (0-based).
    hosts : tuple of str
        Host names cabled to this group, in spec order.
    capacity : int
        Host ports per rail ToR (MegaScale: 64).
    link_speed : int or None
        Slurm's ``LinkSpeed`` of the leaf switch this group was imported from (arbitrary
        units, kept for export); None when not given.
    """

    name: str
    index: int
    hosts: tuple[str, ...]
    capacity: int = 64
    link_speed: int | None = None


@dataclass(frozen=True, kw_only=True)
class Switch:
    """A switch (or label domain) above the ToR groups, kept from tree-shaped topology files.

    Slurm's topology/tree, Kubernetes label layers and Volcano HyperNodes describe the
    fabric as a tree of switches over leaf switches; the leaves are :class:`TorGroup`
    objects and the switches above them are kept here, so islands stay apart and an
    export writes the same tree back.

    Attributes
    ----------
    name : str
        Switch name; unique among switches and ToR groups.
    children : tuple of str
        Names of ToR groups or other switches directly below, in natural name order.
    link_speed : int or None
        Slurm's ``LinkSpeed`` (arbitrary units, informational), or None.
    """

    name: str
    children: tuple[str, ...]
    link_speed: int | None = None


@dataclass(frozen=True, kw_only=True)
class SlurmTopology:
    """Another named topology of the Slurm topology.yaml a cluster was imported from, kept
    so that exporting topology.yaml writes it back (slurmctld serves it to the partitions
    that name it; topology.yaml(5), https://slurm.schedmd.com/topology.yaml.html).

    Attributes
    ----------
    name : str
        The ``topology:`` name.
    position : int
        Its place in the file (0-based); the cluster's own topology takes the first free place.
    default : bool
        ``cluster_default``.
    kind : str
        ``tree``, ``block`` or ``flat``.
    items : tuple of tuple of (str, str or int)
        The switches (tree) or blocks (block), each as its ``(key, value)`` pairs in file order.
    block_sizes : tuple of int or None
        A block topology's ``block_sizes``.
    """

    name: str
    position: int
    default: bool = False
    kind: str = "flat"
    items: tuple[tuple[tuple[str, str | int], ...], ...] = ()
    block_sizes: tuple[int, ...] | None = None
