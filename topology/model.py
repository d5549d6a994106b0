"""The cluster model: hosts, rail NICs, ToR groups, spine, link speeds, availability.

A host has ``gpus`` GPUs and ``nics`` rail NICs; NIC ``i`` is cabled to rail ToR ``i`` of
the host's ToR group, and GPU ``g`` uses NIC ``g * nics // gpus`` (so with 8 GPUs and 8
NICs, GPU i sits on rail i). A ToR group is one set of rail ToR switches serving up to
``capacity`` hosts; every rail ToR has ``tor_uplinks`` uplinks of ``tor_uplink_gbps`` to
the spine layer. These are the multi-rail, ToR-group fabrics of MegaScale (NSDI 2024, §3.3:
8 x 200G NICs per host, one ToR group of 8 rail switches per 64 hosts, 400G ToR ports
split into two 200G downlinks so an uplink carries twice a downlink).

The parts (:class:`Host`, :class:`TorGroup`, :class:`Links`, ...) are defined in
:mod:`rankmap.topology.parts` and importable from here too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

from rankmap.errors import TopologyError
from rankmap.names import host_identity, host_problem, name_problem
from rankmap.topology.parts import HOST_STATES, MAX_HOST_GPUS, Host, Links, SlurmTopology, Spine, Switch, TorGroup
from rankmap.topology.tiers import Tier, TierFigures, check_tiers, derived_tiers, partition, structure, tier_figures
from rankmap.topology.tree import check_block_sizes, check_switch_tree, name_key

__all__ = ["Host", "Links", "Spine", "TorGroup", "Switch", "Tier", "SlurmTopology", "Cluster", "HOST_STATES", "MAX_HOST_GPUS"]


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
    switches : tuple of Switch or None
        The switch tree above the ToR groups, when one is known (imported from a tree
        topology). None (the default) means the spine joins every ToR group. A tuple,
        even an empty one, is the whole fabric: ToR groups are joined only through these
        switches, and each connected part is an island that no job may span.
    block_sizes : tuple of int or None
        Slurm topology/block aggregation sizes in hosts (``BlockSizes``); the ToR groups
        are the base blocks, in block order. None when the cluster is not a block topology.
    tiers : tuple of Tier or None
        The switch tiers above the rail ToRs, lowest first, one per level of the fabric's
        structure (switch tree levels, block levels, or the one spine); see
        :mod:`rankmap.topology.tiers`. None (the default) derives them: a non-blocking
        fabric sized from ``links`` and ``spine`` (:attr:`fabric_tiers`).
    slurm_topologies : tuple of SlurmTopology
        The other topologies of the Slurm topology.yaml this cluster was read from (not
        used for placement; written back by the topology.yaml exporter).
    source : str or None
        The file the cluster was read from, for messages (not compared).
    lines : dict of str to int
        Line in ``source`` of spec keys that messages about host states cite
        (``availability``, ``availability.busy``, ``availability.failed``); not compared.

    Raises
    ------
    TopologyError
        If a host appears twice, a host names an unknown group, a group is over capacity,
        or the switch tree or block sizes are inconsistent.
    """

    name: str
    tor_groups: tuple[TorGroup, ...]
    hosts: tuple[Host, ...]
    links: Links = field(default_factory=Links)
    spine: Spine = field(default_factory=Spine)
    switches: tuple[Switch, ...] | None = None
    block_sizes: tuple[int, ...] | None = None
    tiers: tuple[Tier, ...] | None = None
    slurm_topologies: tuple[SlurmTopology, ...] = ()
    source: str | None = field(default=None, compare=False)
    lines: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _check_names(self)
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
        check_switch_tree(self.switches, set(names), self.block_sizes is not None)
        check_block_sizes(self.block_sizes)
        if self.tiers is not None:
            if not all(isinstance(t, Tier) for t in self.tiers):
                raise TopologyError("tiers must be Tier objects")
            check_tiers(self, self.tiers)

    @cached_property
    def _by_name(self) -> dict[str, Host]:
        return {host_identity(h.name): h for h in self.hosts}

    @cached_property
    def _group_by_name(self) -> dict[str, TorGroup]:
        return {g.name: g for g in self.tor_groups}

    def host(self, name: str) -> Host:
        """The host called ``name``, in any letter case (host names ignore case, RFC 4343);
        KeyError if there is none. Its ``name`` is the spec's spelling."""
        return self._by_name[host_identity(name)]

    @cached_property
    def _group_index_by_host(self) -> dict[str, int]:
        index = {g.name: g.index for g in self.tor_groups}
        return {h.name: index[h.tor_group] for h in self.hosts}

    def group_indices(self, names) -> list[int]:
        """``index[N]``: the :attr:`TorGroup.index` of each named host's ToR group, names in any
        letter case; KeyError for a name no host has. One dictionary lookup per host spelled as
        the spec spells it (a plan measures every candidate's 100,000 hosts this way).

        Examples
        --------
        >>> hosts = (Host(name="x1", gpus=8, nics=8, tor_group="a"),
        ...          Host(name="y1", gpus=8, nics=8, tor_group="b"))
        >>> groups = (TorGroup(name="a", index=0, hosts=("x1",)), TorGroup(name="b", index=1, hosts=("y1",)))
        >>> Cluster(name="c", tor_groups=groups, hosts=hosts).group_indices(["y1", "X1"])
        [1, 0]
        """
        exact = self._group_index_by_host
        return [exact[n] if n in exact else exact[self.host(n).name] for n in names]

    def has_host(self, name: str) -> bool:
        """Whether a host is called ``name``, in any letter case."""
        return host_identity(name) in self._by_name

    def tor_group(self, name: str) -> TorGroup:
        """The ToR group called ``name``; KeyError if there is none."""
        return self._group_by_name[name]

    @cached_property
    def _islands(self) -> tuple[tuple[str, ...], ...]:
        index = {g.name: g.index for g in self.tor_groups}
        parts = [sorted(p, key=index.__getitem__) for p in partition(self, len(structure(self)))]
        return tuple(tuple(p) for p in sorted(parts, key=lambda p: index[p[0]]))

    def islands(self) -> tuple[tuple[str, ...], ...]:
        """ToR group names per island (a part of the fabric no job may leave), in group order.

        Without a switch tree (``switches is None``) the spine joins all groups: one
        island. With one, two groups share an island only if switches connect them.

        Examples
        --------
        >>> hosts = (Host(name="x1", gpus=8, nics=8, tor_group="a"),
        ...          Host(name="y1", gpus=8, nics=8, tor_group="b"))
        >>> groups = (TorGroup(name="a", index=0, hosts=("x1",)), TorGroup(name="b", index=1, hosts=("y1",)))
        >>> Cluster(name="c", tor_groups=groups, hosts=hosts).islands()
        (('a', 'b'),)
        >>> Cluster(name="c", tor_groups=groups, hosts=hosts, switches=()).islands()
        (('a',), ('b',))
        """
        return self._islands

    @cached_property
    def fabric_tiers(self) -> tuple[Tier, ...]:
        """The tiers in force: ``tiers`` when given, else derived (one flat "spine" without a tree)."""
        return self.tiers if self.tiers is not None else derived_tiers(self)

    @property
    def depth(self) -> int:
        """Levels above the ToR groups (the top level's domains are the islands)."""
        return len(self.fabric_tiers)

    def tier_domains(self, level: int) -> tuple[tuple[str, ...], ...]:
        """ToR group names per domain at ``level`` (0: each group; :attr:`depth`: the islands).

        Groups in natural name order inside a domain, domains by their first group:
        independent of the order the spec listed switches or hosts.

        Examples
        --------
        >>> from rankmap.topology.spec import parse_cluster
        >>> c = parse_cluster("tor_groups: [{name: l1, hosts: a1}, {name: l2, hosts: a2}, {name: l3, hosts: a3}]\\n"
        ...                   "switches: [{name: p2, children: [l3]}, {name: p1, children: [l1, l2]},\\n"
        ...                   "           {name: core, children: [p1, p2]}]")
        >>> c.tier_domains(1), c.tier_domains(2)
        ((('l1', 'l2'), ('l3',)), (('l1', 'l2', 'l3'),))
        >>> c.domain_index(1)
        (0, 0, 1)
        """
        return partition(self, level)

    def domain_index(self, level: int) -> tuple[int, ...]:
        """Per ToR group (in ``tor_groups`` order), the index of its domain in ``tier_domains(level)``."""
        where = {g: i for i, dom in enumerate(self.tier_domains(level)) for g in dom}
        return tuple(where[g.name] for g in self.tor_groups)

    def tier_figures(self) -> tuple[TierFigures, ...]:
        """Per level, rail ToRs first: domains, switches, per-domain down/up Gb/s and their ratio.

        The ratio (oversubscription) and ``up_gbps`` (what one domain can send out) say how
        scarce each tier's bandwidth is.

        Examples
        --------
        >>> from rankmap.topology.spec import parse_cluster
        >>> c = parse_cluster("tor_groups: [{name: a, hosts: 'x[1-64]'}]\\nlinks: {tor_uplinks: 16}\\n"
        ...                   "tiers: [{name: spine, switches: 4, down_ports: 32}]")
        >>> [(f.name, f.domains, f.switches, f.down_gbps, f.up_gbps, f.ratio) for f in c.tier_figures()]
        [('ToR', 1, 8, 102400.0, 51200.0, 2.0), ('spine', 1, 4, 51200.0, 0.0, None)]
        >>> c = parse_cluster("tor_groups: [{name: a, hosts: 'x[1-16]'}]\\nlinks: {tor_uplinks: 16}\\n"
        ...                   "tiers: [{name: spine, switches: 4, down_ports: 32}]")
        >>> f = c.tier_figures()[0]   # 16 of 64 host ports cabled: 16 x 200 Gb/s x 8 rails in, 16 x 400 x 8 out
        >>> f.down_gbps, f.cabled_gbps, f.ratio
        (102400.0, 25600.0, 0.5)
        """
        return tier_figures(self, self.fabric_tiers)

    @cached_property
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
        """SHA-256 (hex) of the static fabric: name, hosts, GPUs, NICs, ToR groups, links, spine,
        switch tree, block sizes and tiers.

        The order in which a spec lists hosts, ToR groups, group members, switches and switch
        children is left out (all are sorted by :func:`~rankmap.topology.tree.name_key`): it
        does not change the fabric; so is the letter case of host names, which name one host in
        any case (:func:`rankmap.names.host_identity`, RFC 4343). The order of ToR groups does enter it for a Slurm
        topology/block cluster, whose contiguous base blocks aggregate into larger blocks in
        listing order (topology.conf(5), ``BlockSizes``). Availability (busy/failed) is left
        out too: a rank map stays bound to the cluster it was made for while hosts come and
        go; reading a map checks the hosts.

        Examples
        --------
        >>> from rankmap.topology.spec import parse_cluster
        >>> a = parse_cluster("tor_groups: [{name: t1, hosts: 'x[1-2]'}, {name: t2, hosts: y1}]")
        >>> b = parse_cluster("tor_groups: [{name: t2, hosts: Y1}, {name: t1, hosts: 'x2,x1'}]")
        >>> a.spec_hash() == b.spec_hash()
        True
        """
        return self._spec_hash

    @cached_property
    def _spec_hash(self) -> str:
        """:meth:`spec_hash`, computed once per cluster object (a plan of 100,000 hosts asks twice)."""
        groups = self.tor_groups if self.block_sizes is not None else sorted(self.tor_groups,
                                                                             key=lambda g: name_key(g.name))
        doc = {
            "name": self.name,
            "links": vars(self.links),
            "spine": vars(self.spine),
            "tor_groups": [[g.name, g.capacity, sorted(map(host_identity, g.hosts), key=name_key)]
                           + ([g.link_speed] if g.link_speed is not None else []) for g in groups],
            "hosts": sorted(([host_identity(h.name), h.gpus, h.nics] for h in self.hosts),
                            key=lambda row: name_key(row[0])),
        }
        # Fields added later enter the hash only when used, so older specs keep their hash.
        if self.switches is not None:
            doc["switches"] = [[s.name, sorted(s.children, key=name_key), s.link_speed]
                               for s in sorted(self.switches, key=lambda s: name_key(s.name))]
        if self.block_sizes is not None:
            doc["block_sizes"] = list(self.block_sizes)
        if self.tiers is not None:
            doc["tiers"] = [[t.name, t.switches, t.down_ports, t.up_ports, t.down_gbps, t.up_gbps, t.planes]
                            for t in self.tiers]
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    def reordered(self, tor_groups: tuple[TorGroup, ...], hosts: tuple[Host, ...]) -> "Cluster":
        """A copy listing the same ToR groups and hosts in another order (group indices as given).

        Without ``block_sizes`` the copy has the same :meth:`spec_hash`, which sorts groups and
        hosts by name; it is carried over rather than computed again."""
        copy = dataclasses.replace(self, tor_groups=tor_groups, hosts=hosts)
        if self.block_sizes is None and "_spec_hash" in self.__dict__:
            copy.__dict__["_spec_hash"] = self._spec_hash
        return copy

    def with_states(self, states: dict[str, str]) -> "Cluster":
        """A copy with the given ``{host: state}`` changes applied."""
        for name, state in states.items():
            if not self.has_host(name):
                raise TopologyError(f"unknown host {name!r}")
            if state not in HOST_STATES:
                raise TopologyError(f"unknown host state {state!r}")
        states = {host_identity(name): state for name, state in states.items()}
        hosts = tuple(Host(name=h.name, gpus=h.gpus, nics=h.nics, tor_group=h.tor_group,
                           state=states.get(host_identity(h.name), h.state)) for h in self.hosts)
        return dataclasses.replace(self, hosts=hosts)


def _check_names(cluster: Cluster) -> None:
    """Every name in its grammar (:mod:`rankmap.names`), and no host spelled twice (case aside)."""
    why = name_problem(cluster.name, "cluster name")
    if why:
        raise TopologyError(f"bad cluster name: {why}")
    for kind, items in (("ToR group name", cluster.tor_groups), ("switch name", cluster.switches or ())):
        for item in items:
            why = name_problem(item.name, kind)
            if why:
                raise TopologyError(f"bad {kind}: {why}")
    seen: dict[str, str] = {}
    for host in cluster.hosts:
        why = host_problem(host.name)
        if why:
            raise TopologyError(f"bad host {host.name[:60]!r}: {why}")
        other = seen.setdefault(host_identity(host.name), host.name)
        if other != host.name:
            raise TopologyError(f"hosts {other!r} and {host.name!r} are one host (host names ignore case)")
