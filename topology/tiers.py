"""Switch tiers above the rail ToRs: the fabric's depth, its domains, and oversubscription per tier.

A multi-tier Clos fabric has rail ToRs (level 0, one ToR group = one domain) under one or
more tiers of switches, lowest first: a spine (aggregation) tier whose domains are pods,
a core tier joining pods, and so on. Each :class:`Tier` gives, per domain, its switch
count, down and up ports per switch and their speeds, and whether every rail has its own
plane of the tier (rail-optimised, NVIDIA DGX SuperPOD reference architectures) or rails
share its switches (MegaScale, NSDI 2024, §3.3 "three layers of switches ... 32 ports
down and 32 up", so 1:1 at every layer). Down over up bandwidth of a domain is that
tier's oversubscription (Arnold, arXiv 2509.15940: bandwidth shrinks at higher tiers).

Which ToR groups share a domain comes from the cluster's structure, not from the tiers:
the switch tree (a level-``L`` switch is one tier-``L`` domain, levels as Slurm's
topology/tree counts them), Slurm topology/block aggregation levels, or, with neither, one
spine joining every group. :func:`structure` turns each into nodes per level;
:func:`partition` groups ToR groups into domains, deterministically and in natural name
order, whatever order the input listed them in.

References
----------
MegaScale (Jiang et al., NSDI 2024), §3.3 network topology.
Arnold (arXiv 2509.15940), fat-tree leaf -> spine -> core with shrinking bandwidth.
NVIDIA DGX SuperPOD reference architecture (rail-optimised compute fabric).
Slurm topology.conf(5), https://slurm.schedmd.com/topology.conf.html
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from rankmap.errors import TopologyError
from rankmap.topology.tree import block_levels, name_key, switch_levels

if TYPE_CHECKING:  # the model imports this module
    from rankmap.topology.model import Cluster

__all__ = ["PLANES", "Tier", "TierFigures", "Node", "structure", "groups_under", "partition", "derived_tiers",
           "tier_name_problem", "check_tiers", "tier_figures"]

PLANES = ("shared", "rail")


def tier_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a tier above the ToRs, or None.

    ``ToR`` (any letter case) is tier 0's name in every table, header and ``--tier-weights``,
    so a tier above called so would be read as the ToRs; and a name is one word in
    ``--tier-weights NAME=W,...`` and the tables, so it holds no blank, ``,`` or ``=``.

    Examples
    --------
    >>> tier_name_problem("core"), tier_name_problem("topology.kubernetes.io/zone")
    (None, None)
    >>> print(tier_name_problem("tor"))
    'tor' is the name of tier 0 (the ToR switches): give this tier another name
    >>> print(tier_name_problem("a g"))
    tier name 'a g' must be one word (it is written in --tier-weights NAME=W and in tables): no blanks, ',' or '='
    """
    if name.strip().lower() == "tor":
        return f"{name!r} is the name of tier 0 (the ToR switches): give this tier another name"
    if any(c.isspace() or c in ",=" for c in name):
        return (f"tier name {name!r} must be one word (it is written in --tier-weights NAME=W and in tables): "
                "no blanks, ',' or '='")
    return None


@dataclass(frozen=True, kw_only=True)
class Tier:
    """One switch tier above the rail ToRs, as built in every domain of that tier.

    Attributes
    ----------
    name : str
        Tier name ("spine", "core", a label key, "tier2").
    switches : int
        Switches per domain, per plane (with ``planes="rail"`` each rail has this many).
    down_ports : int
        Ports per switch facing the tier below.
    up_ports : int
        Ports per switch facing the tier above (0 at the top tier).
    down_gbps, up_gbps : float
        Speed of one down and one up port, Gb/s, one direction.
    planes : str
        "shared" (rails share the tier's switches) or "rail" (each rail has its own plane).

    Examples
    --------
    >>> t = Tier(name="spine", switches=32, down_ports=48, up_ports=16)
    >>> t.switch_count(8), t.down_bw_gbps(8), t.ratio
    (32, 614400.0, 3.0)
    >>> Tier(name="spine", switches=4, down_ports=32, planes="rail").switch_count(8)
    32
    """

    name: str
    switches: int
    down_ports: int
    up_ports: int = 0
    down_gbps: float = 400.0
    up_gbps: float = 400.0
    planes: str = "shared"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise TopologyError(f"a tier needs a non-empty name, got {self.name!r}")
        why = tier_name_problem(self.name)
        if why:
            raise TopologyError(why)
        for key, low in (("switches", 1), ("down_ports", 1), ("up_ports", 0)):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise TopologyError(f"tier {self.name!r}: {key} must be an integer >= {low}, got {value!r}")
        for key in ("down_gbps", "up_gbps"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise TopologyError(f"tier {self.name!r}: {key} must be a positive number, got {value!r}")
        if self.planes not in PLANES:
            raise TopologyError(f"tier {self.name!r}: planes must be one of {', '.join(PLANES)}, "
                                f"got {self.planes!r}")

    def switch_count(self, rails: int) -> int:
        """Switches in one domain: ``switches``, times ``rails`` with rail planes."""
        return self.switches * (rails if self.planes == "rail" else 1)

    def down_bw_gbps(self, rails: int) -> float:
        """Downlink bandwidth of one domain, Gb/s (all its switches' down ports)."""
        return float(self.switch_count(rails) * self.down_ports * self.down_gbps)

    def up_bw_gbps(self, rails: int) -> float:
        """Uplink bandwidth of one domain, Gb/s (0 at the top tier)."""
        return float(self.switch_count(rails) * self.up_ports * self.up_gbps)

    @property
    def ratio(self) -> float | None:
        """Oversubscription, down over up bandwidth (1.0 = non-blocking); None without up ports."""
        return self.down_ports * self.down_gbps / (self.up_ports * self.up_gbps) if self.up_ports else None


@dataclass(frozen=True, kw_only=True)
class TierFigures:
    """Bandwidth of one level of the fabric, per domain (``Cluster.tier_figures``).

    Attributes
    ----------
    level : int
        0 for the rail ToRs (a domain is a ToR group), ``t`` for ``tiers[t - 1]``.
    name : str
        "ToR" at level 0, else the tier's name.
    planes : str
        "rail" at level 0 (one ToR per rail), else the tier's planes.
    domains : int
        Domains at this level (ToR groups, pods, ...).
    switches : int
        Switches in all domains of this level together.
    down_gbps, up_gbps : float
        Downlink and uplink bandwidth of one domain, Gb/s (up is 0 at the top tier), from
        the ports the switches have.
    cabled_gbps : float
        Downlink bandwidth of the busiest domain's cabled ports, Gb/s: what the level below
        can send into it (hosts' NICs at level 0, the children's uplinks above), at most
        ``down_gbps``. Less than ``down_gbps`` where ports stand empty (a half-filled rack).
    ratio : float or None
        ``cabled_gbps / up_gbps`` (oversubscription: what arrives over what can leave), None
        at a top tier without up ports. Empty ports send nothing, so they do not count.
    """

    level: int
    name: str
    planes: str
    domains: int
    switches: int
    down_gbps: float
    up_gbps: float
    cabled_gbps: float
    ratio: float | None


@dataclass(frozen=True)
class Node:
    """A domain switch set of the structure: ``name`` at ``level``, its direct ``children``
    (ToR groups or lower nodes)."""

    name: str
    level: int
    children: tuple[str, ...]


def structure(cluster: Cluster) -> tuple[tuple[Node, ...], ...]:
    """Nodes per level above the ToR groups, level 1 first, each level in natural name order.

    A switch tree gives its switches at their Slurm levels; topology/block gives one level
    per aggregated block size above the base, plus a "spine" joining the top blocks when
    more than one remains (the model keeps a block cluster in one island); with neither,
    one "spine" node joins every ToR group. ``switches=()`` has no level at all.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: a, hosts: x1}, {name: b, hosts: y1}]")
    >>> structure(c)
    ((Node(name='spine', level=1, children=('a', 'b')),),)
    """
    if cluster.switches is not None:
        level = switch_levels(cluster)
        depth = max((level[s.name] for s in cluster.switches), default=0)
        return tuple(tuple(sorted((Node(s.name, lv, s.children) for s in cluster.switches if level[s.name] == lv),
                                  key=lambda n: name_key(n.name))) for lv in range(1, depth + 1))
    if cluster.block_sizes is not None:
        return _block_structure(cluster)
    groups = tuple(sorted((g.name for g in cluster.tor_groups), key=name_key))
    return ((Node(_free_name(cluster, "spine"), 1, groups),),)


def _free_name(cluster: Cluster, name: str) -> str:
    """``name``, primed until no ToR group has it (synthetic nodes share the group namespace)."""
    while any(g.name == name for g in cluster.tor_groups):
        name += "'"
    return name


def _block_structure(cluster: Cluster) -> tuple[tuple[Node, ...], ...]:
    """Levels of aggregated blocks above the base blocks, then a spine if several remain."""
    members: dict[str, frozenset[str]] = {g.name: frozenset([g.name]) for g in cluster.tor_groups}
    tops = [g.name for g in cluster.tor_groups]  # roots so far, in block order
    levels: list[tuple[Node, ...]] = []
    for size, runs in block_levels(cluster)[1:]:
        nodes = []
        for i, run in enumerate(runs):
            name = _free_name(cluster, f"{size}-host block {i + 1}")
            kids = tuple(t for t in tops if members[t] <= set(run))
            members[name] = frozenset(run)
            nodes.append(Node(name, len(levels) + 1, kids))
        covered = set().union(*(n.children for n in nodes)) if nodes else set()
        tops = [t for t in tops if t not in covered] + [n.name for n in nodes]
        tops.sort(key=lambda t: min(cluster.tor_group(g).index for g in members[t]))
        levels.append(tuple(nodes))
    if len(tops) > 1 or not levels:
        levels.append((Node(_free_name(cluster, "spine"), len(levels) + 1, tuple(tops)),))
    return tuple(levels)


def groups_under(levels: tuple[tuple[Node, ...], ...], node: Node) -> list[str]:
    """ToR groups below ``node`` of ``levels`` (:func:`structure`): its descendants that are
    no node of a level."""
    below = {n.name: n for nodes in levels for n in nodes}
    out, todo = [], list(node.children)
    while todo:
        name = todo.pop()
        if name in below:
            todo.extend(below[name].children)
        else:
            out.append(name)
    return sorted(out, key=name_key)


def partition(cluster: Cluster, level: int) -> tuple[tuple[str, ...], ...]:
    """ToR groups per domain at ``level``: groups joined by nodes of levels 1..``level``.

    Groups are in natural name order inside a domain, domains by their first group, so the
    answer does not depend on the order a file listed switches or hosts. Level 0 gives
    every ToR group alone; the top level gives the islands.

    Raises
    ------
    ValueError
        If ``level`` is negative or above the top level.
    """
    levels = structure(cluster)
    if not 0 <= level <= len(levels):
        raise ValueError(f"level must be 0..{len(levels)}, got {level}")
    root = {g.name: g.name for g in cluster.tor_groups}

    def find(x: str) -> str:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for nodes in levels[:level]:
        for node in nodes:
            root.setdefault(node.name, node.name)
            for child in node.children:
                root[find(child)] = find(node.name)
    parts: dict[str, list[str]] = {}
    for g in cluster.tor_groups:
        parts.setdefault(find(g.name), []).append(g.name)
    domains = [tuple(sorted(p, key=name_key)) for p in parts.values()]
    return tuple(sorted(domains, key=lambda d: name_key(d[0])))


def _parents(levels: tuple[tuple[Node, ...], ...]) -> dict[str, int]:
    count: dict[str, int] = {}
    for nodes in levels:
        for node in nodes:
            for child in node.children:
                count[child] = count.get(child, 0) + 1
    return count


def _child_ports(cluster: Cluster, tiers, level_of: dict[str, int], child: str, tier: Tier) -> tuple[int, float]:
    """Up ports (per plane of ``tier``) and their speed of one child of a tier's node."""
    rails = max(cluster.rails, 1)
    lv = level_of.get(child, 0)
    if lv == 0:
        per_rail, speed = cluster.links.tor_uplinks, cluster.links.tor_uplink_gbps
        return (per_rail if tier.planes == "rail" else per_rail * rails), speed
    below = tiers[lv - 1]
    ports = below.switches * below.up_ports
    if below.planes == "rail" and tier.planes == "shared":
        ports *= rails
    return ports, below.up_gbps


def _demand(cluster: Cluster, tiers, levels, node: Node, tier: Tier) -> tuple[Fraction, list[float]]:
    """Down ports a node's children need per plane (shared among parents), and their speeds."""
    level_of = {n.name: n.level for nodes in levels for n in nodes}
    parents = _parents(levels)
    need, speeds = Fraction(0), []
    for child in node.children:
        ports, speed = _child_ports(cluster, tiers, level_of, child, tier)
        need += Fraction(ports, parents[child])
        speeds.append(speed)
    return need, speeds


def derived_tiers(cluster: Cluster, names: tuple[str, ...] | None = None) -> tuple[Tier, ...]:
    """Tiers sized to cable the cluster's structure non-blocking, for specs without ``tiers``.

    Every tier has ``spine.switches`` shared switches per domain at the ToR uplink speed,
    as many down ports as its largest domain needs, and as many up ports (1:1), none at
    the top. Without a switch tree this is today's flat spine: one tier "spine".
    ``names`` (one per level) replaces the default names ("spine" for one level, else
    "tier1", "tier2", ...: no space, so a name is one word in ``--tier-weights`` and tables).
    """
    levels = structure(cluster)
    if names is None:
        names = tuple("spine" if len(levels) == 1 else f"tier{lv}" for lv in range(1, len(levels) + 1))
    gbps, tiers = cluster.links.tor_uplink_gbps, []
    for lv, nodes in enumerate(levels, 1):
        probe = Tier(name=names[lv - 1], switches=cluster.spine.switches, down_ports=1, down_gbps=gbps, up_gbps=gbps)
        need = max(_demand(cluster, tiers, levels, n, probe)[0] for n in nodes)
        ports = max(1, math.ceil(need / probe.switches))
        tiers.append(Tier(name=probe.name, switches=probe.switches, down_ports=ports,
                          up_ports=ports if lv < len(levels) else 0, down_gbps=gbps, up_gbps=gbps))
    return tuple(tiers)


def check_tiers(cluster: Cluster, tiers: tuple[Tier, ...]) -> None:
    """Raise TopologyError unless ``tiers`` fit the cluster's structure and can be cabled.

    One tier per level of :func:`structure`; a shared tier is never below a rail-plane
    tier; tiers below the top have up ports; every node's switches have the down ports
    its children's uplinks need, at the same speed; with rail planes up to the top, all
    hosts have the same NIC count (rail ``r`` reaches only NIC ``r``).
    """
    levels = structure(cluster)
    if len(tiers) != len(levels):
        raise TopologyError(f"tiers lists {len(tiers)} tier{'s' * (len(tiers) != 1)} but the fabric has "
                            f"{len(levels)} level{'s' * (len(levels) != 1)} above the ToR groups "
                            "(from its switch tree, block sizes, or one spine)")
    seen: dict[str, int] = {}
    for lv, t in enumerate(tiers, 1):  # --tier-weights and the tables name tiers: two of one name would be one
        first = seen.setdefault(t.name.lower(), lv)
        if first != lv:
            raise TopologyError(f"tiers {first} and {lv} are both named {t.name!r} (names ignore case): "
                                "name each tier once")
    for low, high in zip(tiers, tiers[1:]):
        if low.planes == "shared" and high.planes == "rail":
            raise TopologyError(f"tier {high.name!r} has rail planes above tier {low.name!r} whose switches "
                                "rails share: a rail plane cannot start above a shared tier")
    for t in tiers[:-1]:
        if t.up_ports == 0:
            raise TopologyError(f"tier {t.name!r} has no up ports but a tier sits above it")
    if tiers and tiers[-1].planes == "rail" and len({h.nics for h in cluster.hosts}) > 1:
        raise TopologyError(f"every tier up to {tiers[-1].name!r} has rail planes, so rail r reaches only NIC r: "
                            "hosts with different NIC counts would have GPUs no network path joins "
                            "(make the top tier planes: shared)")
    for lv, nodes in enumerate(levels, 1):
        tier = tiers[lv - 1]
        for node in nodes:
            need, speeds = _demand(cluster, tiers, levels, node, tier)
            _check_node(tier, node, need, speeds)


def _check_node(tier: Tier, node: Node, need: Fraction, speeds: list[float]) -> None:
    have = tier.switches * tier.down_ports
    where = f"tier {tier.name!r} at {node.name!r}"
    if need > have:
        raise TopologyError(f"{where}: {tier.switches} switches x {tier.down_ports} down ports = {have} ports "
                            f"per plane cannot cable the {len(node.children)} domain{'s' * (len(node.children) != 1)} "
                            f"below, whose uplinks need {math.ceil(need)}")
    bad = sorted({s for s in speeds if s != tier.down_gbps})
    if bad:
        raise TopologyError(f"{where}: down ports run at {tier.down_gbps:g} Gb/s but the uplinks below run at "
                            f"{', '.join(f'{s:g}' for s in bad)} Gb/s (a link has one speed)")


def tier_figures(cluster: Cluster, tiers: tuple[Tier, ...]) -> tuple[TierFigures, ...]:
    """Per level (rail ToRs first), domains, switches, per-domain down and up Gb/s and ratio.

    Level 0: a ToR group of ``rails`` rail ToRs with ``capacity`` host ports each at
    ``tor_downlink_gbps`` (cabled: one per NIC of the busiest group's hosts) and ``tor_uplinks``
    uplinks at ``tor_uplink_gbps``. Above, a tier's cabled bandwidth is the down ports its
    busiest node's children fill with their uplinks (their share of them, when a child has
    several parents). The ratio counts cabled ports only: an empty port carries nothing, so
    a pod with room for 8 ToR groups that holds 2 is not oversubscribed by its 6 empty slots.
    """
    rails, links = cluster.rails, cluster.links
    down0 = float(rails * max((g.capacity for g in cluster.tor_groups), default=0) * links.tor_downlink_gbps)
    nics = {h.name: h.nics for h in cluster.hosts}
    cabled0 = float(max((sum(nics[h] for h in g.hosts) for g in cluster.tor_groups), default=0)
                    * links.tor_downlink_gbps)
    up0 = float(rails * links.tor_uplinks * links.tor_uplink_gbps)
    out = [TierFigures(level=0, name="ToR", planes="rail", domains=len(cluster.tor_groups),
                       switches=rails * len(cluster.tor_groups), down_gbps=down0, up_gbps=up0,
                       cabled_gbps=min(down0, cabled0), ratio=min(down0, cabled0) / up0 if up0 else None)]
    levels = structure(cluster)
    for lv, (tier, nodes) in enumerate(zip(tiers, levels), 1):
        up, down = tier.up_bw_gbps(rails), tier.down_bw_gbps(rails)
        cabled = min(down, max((_cabled_gbps(cluster, tiers, levels, n, tier) for n in nodes), default=0.0))
        out.append(TierFigures(level=lv, name=tier.name, planes=tier.planes, domains=len(partition(cluster, lv)),
                               switches=len(nodes) * tier.switch_count(rails), down_gbps=down,
                               up_gbps=up, cabled_gbps=cabled, ratio=cabled / up if up else None))
    return tuple(out)


def _cabled_gbps(cluster: Cluster, tiers, levels, node: Node, tier: Tier) -> float:
    """Gb/s one node's children send into it: their uplink ports (per plane) at their speed,
    times the planes of ``tier``, capped by the ports the node has."""
    need, _ = _demand(cluster, tiers, levels, node, tier)
    ports = min(need, Fraction(tier.switches * tier.down_ports))
    planes = max(cluster.rails, 1) if tier.planes == "rail" else 1
    return float(ports * planes) * tier.down_gbps
