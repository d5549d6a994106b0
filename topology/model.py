"""The cluster model: hosts, rail NICs, ToR groups, spine, link speeds, availability.

A host has ``gpus`` GPUs and ``nics`` rail NICs; NIC ``i`` is cabled to rail ToR ``i`` of
the host's ToR group, and GPU ``g`` uses NIC ``g * nics // gpus`` (so with 8 GPUs and 8
NICs, GPU i sits on rail i). A ToR group is one set of rail ToR switches serving up to
``capacity`` hosts; every rail ToR has ``tor_uplinks`` uplinks of ``tor_uplink_gbps`` to
the spine layer. These are the multi-rail, ToR-group fabrics of MegaScale (NSDI 2024, §3.3:
8 x 200G NICs per host, one ToR group of 8 rail switches per 64 hosts, 400G ToR ports
split into two 200G downlinks so an uplink carries twice a downlink).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

from .errors import TopologyError

__all__ = ["Host", "Links", "Spine", "TorGroup", "Cluster", "HOST_STATES"]

HOST_STATES = ("free", "busy", "failed")


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
    """

    name: str
    index: int
    hosts: tuple[str, ...]
    capacity: int = 64


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """A multi-rail cluster: ToR groups of hosts joined by a spine layer.

    Attributes
    ----------
    name : str
        Cluster name.
    tor_groups : tuple of TorGroup
        The ToR groups, in spec order.
    hosts : tuple of Host
        Every host, grouped by ToR group in spec order.
    links : Links
        Link speeds.
    spine : Spine
        Spine layer.

    Raises
    ------
    TopologyError
        If a host appears twice, a host names an unknown group, or a group is over capacity.
    """

    name: str
    tor_groups: tuple[TorGroup, ...]
    hosts: tuple[Host, ...]
    links: Links = field(default_factory=Links)
    spine: Spine = field(default_factory=Spine)

    def __post_init__(self) -> None:
        names = [g.name for g in self.tor_groups]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise TopologyError(f"ToR group {dup!r} is defined twice")
        seen: dict[str, str] = {}
        for group in self.tor_groups:
            if len(group.hosts) > group.capacity:
                raise TopologyError(f"ToR group {group.name!r} has {len(group.hosts)} hosts, "
                                    f"more than its capacity {group.capacity}")
            for host in group.hosts:
                if host in seen:
                    raise TopologyError(f"host {host!r} is in ToR groups {seen[host]!r} and {group.name!r}")
                seen[host] = group.name
        for host in self.hosts:
            if seen.get(host.name) != host.tor_group:
                raise TopologyError(f"host {host.name!r} does not match ToR group {host.tor_group!r}")
            if host.state not in HOST_STATES:
                raise TopologyError(f"host {host.name!r} has unknown state {host.state!r}")
        if len(self.hosts) != len(seen):
            raise TopologyError("cluster hosts and ToR group members differ")

    @cached_property
    def _by_name(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    @cached_property
    def _group_by_name(self) -> dict[str, TorGroup]:
        return {g.name: g for g in self.tor_groups}

    def host(self, name: str) -> Host:
        """The host called ``name``; KeyError if there is none."""
        return self._by_name[name]

    def has_host(self, name: str) -> bool:
        return name in self._by_name

    def tor_group(self, name: str) -> TorGroup:
        """The ToR group called ``name``; KeyError if there is none."""
        return self._group_by_name[name]

    @property
    def rails(self) -> int:
        """Rail ToR switches per ToR group (the most NICs any host has)."""
        return max((h.nics for h in self.hosts), default=0)

    @property
    def gpus(self) -> int:
        return sum(h.gpus for h in self.hosts)

    def free_hosts(self) -> tuple[Host, ...]:
        """Hosts in state "free", in spec order."""
        return tuple(h for h in self.hosts if h.state == "free")

    def oversubscription(self, group: str) -> float:
        """Downlink over uplink bandwidth of one rail ToR of ``group`` (1.0 = non-blocking).

        Counts the group's cabled hosts (one downlink each per rail) against
        ``tor_uplinks * tor_uplink_gbps``.
        """
        hosts = len(self.tor_group(group).hosts)
        up = self.links.tor_uplinks * self.links.tor_uplink_gbps
        return hosts * self.links.tor_downlink_gbps / up if up else float("inf")

    def spec_hash(self) -> str:
        """SHA-256 (hex) of the static topology: hosts, GPUs, NICs, ToR groups, links, spine.

        Availability (busy/failed) is left out on purpose: a rank map stays bound to the
        cluster it was made for while hosts come and go; reading a map checks the hosts.
        """
        doc = {
            "name": self.name,
            "links": vars(self.links),
            "spine": vars(self.spine),
            "tor_groups": [[g.name, g.capacity, list(g.hosts)] for g in self.tor_groups],
            "hosts": [[h.name, h.gpus, h.nics] for h in self.hosts],
        }
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    def with_states(self, states: dict[str, str]) -> "Cluster":
        """A copy with the given ``{host: state}`` changes applied."""
        for name, state in states.items():
            if name not in self._by_name:
                raise TopologyError(f"unknown host {name!r}")
            if state not in HOST_STATES:
                raise TopologyError(f"unknown host state {state!r}")
        hosts = tuple(Host(name=h.name, gpus=h.gpus, nics=h.nics, tor_group=h.tor_group,
                           state=states.get(h.name, h.state)) for h in self.hosts)
        return Cluster(name=self.name, tor_groups=self.tor_groups, hosts=hosts,
                       links=self.links, spine=self.spine)
