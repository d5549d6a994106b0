"""What every topology importer shares: options, warnings, the result, and cluster assembly.

An importer turns one admin-kept file (Slurm topology.conf, ``kubectl get nodes`` output,
Volcano HyperNodes, a hostfile) into a :class:`~rankmap.topology.model.Cluster`. The file says
which hosts hang under which leaf switch; it cannot say how many rail NICs a host has or
how fast they are, so :class:`ImportOptions` adds that. Problems that make the file
unusable raise :class:`~rankmap.errors.SpecError` (FILE:LINE: token: what is wrong);
problems an admin may live with become warnings, and ``strict=True`` turns the first
warning into an error.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field

from rankmap.errors import SpecError, TopologyError
from rankmap.names import host_identity
from rankmap.topology.hostnames import compress_hostlist
from rankmap.topology.model import MAX_HOST_GPUS, Cluster, Host, Links, Switch, TorGroup
from rankmap.topology.tiers import derived_tiers, tier_name_problem
from rankmap.topology.tree import name_key

__all__ = ["SLURM_VERSION", "slurm_release", "ImportOptions", "Diagnostic", "Diagnostics", "ImportResult", "Leaf", "build_cluster",
           "check_known_hosts", "join_top_domains", "file_stem", "name_tiers", "note_tiers", "TIER_NOTE", "name_pattern", "warn_odd_names"]

TIER_NOTE = ("tiers: {names}: switch counts, ports and speeds are not in the file; each tier got "
             "defaults (spine.switches switches per domain, shared by rails, ports to cable its largest "
             "domain non-blocking at the ToR uplink speed): edit tiers: in the cluster YAML to give the real ones")


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    """What the topology file cannot say, plus checks to apply.

    Attributes
    ----------
    gpus : int
        GPUs per host where the file does not give a count (tree files never do).
    rails : int or None
        Rail NICs per host (one per rail ToR of the group); None means one per GPU.
        A host with fewer GPUs than rails gets one NIC per GPU.
    nic_gbps : float or None
        Speed of one rail NIC and of the ToR port facing it; None keeps the model default.
    capacity : int
        Host ports per rail ToR; a leaf with more hosts gets a capacity of its host count.
    name : str or None
        Cluster name (default: the file name without its suffix).
    hosts : tuple of str or None
        Every host the scheduler knows (e.g. ``sinfo -h -o %N``): hosts missing from the
        topology and unknown hosts in it are reported, and Volcano regex members match these.
    levels : tuple of str or None
        Kubernetes node label keys of the topology levels, top level first (Kueue
        ``Topology`` levels); None detects AWS or GKE labels.
    strict : bool
        Turn warnings into errors.
    topology : str or None
        Slurm topology.yaml: the named topology to read (None: the ``cluster_default`` one).
    slurm_version : str
        The Slurm release the file is for ("25.05", "23.02.5", ...): which hostlist forms
        and topology/block relaxations slurmctld of that release accepts (default: the
        current release, :data:`SLURM_VERSION`).
    separate_tops : bool
        Kubernetes labels and Volcano HyperNodes: keep several top-level domains as separate
        islands (they share no network). By default they are joined under an implied root
        (:func:`join_top_domains`).
    """

    gpus: int = 8
    rails: int | None = None
    nic_gbps: float | None = None
    capacity: int = 64
    name: str | None = None
    hosts: tuple[str, ...] | None = None
    levels: tuple[str, ...] | None = None
    strict: bool = False
    topology: str | None = None
    slurm_version: str = "25.05"
    separate_tops: bool = False

    def __post_init__(self) -> None:
        slurm_release(self.slurm_version, key="slurm_version")
        for key in ("gpus", "capacity") + (("rails",) if self.rails is not None else ()):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(f"must be a positive integer, got {value!r}", key=key)
        for key in ("gpus",) + (("rails",) if self.rails is not None else ()):
            if getattr(self, key) > MAX_HOST_GPUS:
                raise SpecError(f"must be <= {MAX_HOST_GPUS}, got {getattr(self, key)}", key=key)
        if self.nic_gbps is not None and not self.nic_gbps > 0:
            raise SpecError(f"must be positive, got {self.nic_gbps!r}", key="nic_gbps")

    def links(self) -> Links:
        """Link speeds: the model defaults, with ``nic_gbps`` applied to NICs and ToR downlinks."""
        if self.nic_gbps is None:
            return Links()
        return Links(nic_gbps=float(self.nic_gbps), tor_downlink_gbps=float(self.nic_gbps))


SLURM_VERSION = "25.05"   # the current Slurm release, the default target


def slurm_release(version: str, key: str = "--slurm-version") -> tuple[int, int, int]:
    """A Slurm release string as a comparable ``(year, month, micro)`` tuple.

    Raises
    ------
    SpecError
        Not ``YY.MM`` or ``YY.MM.N`` (Slurm numbers releases by year and month).

    Examples
    --------
    >>> slurm_release("23.02.5"), slurm_release("25.05")
    ((23, 2, 5), (25, 5, 0))
    >>> slurm_release("latest")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: --slurm-version: expected a Slurm release such as 25.05 or 23.02.5, got 'latest'
    """
    parts = str(version).split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise SpecError(f"expected a Slurm release such as 25.05 or 23.02.5, got {version!r}", key=key)
    year, month, micro = (int(p) for p in parts + ["0"] * (3 - len(parts)))
    return year, month, micro


@dataclass(frozen=True)
class Diagnostic:
    """One warning, located like a :class:`SpecError`: ``FILE:LINE: token: message``."""

    message: str
    source: str | None = None
    line: int | None = None
    key: str | None = None

    def __str__(self) -> str:
        return str(SpecError(self.message, source=self.source, line=self.line, key=self.key))


class Diagnostics:
    """Collects warnings and notes while importing; with ``strict`` a warning raises.

    Examples
    --------
    >>> d = Diagnostics(strict=False)
    >>> d.warn("switch s1 has no nodes", source="t.conf", line=3, key="SwitchName=s1")
    >>> [str(w) for w in d.warnings]
    ['t.conf:3: SwitchName=s1: switch s1 has no nodes']
    >>> Diagnostics(strict=True).warn("no nodes", source="t.conf", line=3)
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: t.conf:3: no nodes (an error with --strict)
    """

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.warnings: list[Diagnostic] = []
        self.notes: list[str] = []

    def warn(self, message: str, *, source: str | None = None, line: int | None = None,
             key: str | None = None) -> None:
        if self.strict:
            raise SpecError(f"{message} (an error with --strict)", source=source, line=line, key=key)
        self.warnings.append(Diagnostic(message, source, line, key))

    def note(self, message: str) -> None:
        self.notes.append(message)


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """A cluster and what was said while importing it.

    Attributes
    ----------
    cluster : Cluster
    format : str
        The importer's name ("slurm", "slurm-block", "k8s-labels", "volcano", "hostfile").
    source : str
        File name.
    warnings : tuple of Diagnostic
    notes : tuple of str
        Facts worth showing that are not problems (islands, dropped host levels, ...).
    """

    cluster: Cluster
    format: str
    source: str
    warnings: tuple[Diagnostic, ...] = ()
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True, kw_only=True)
class Leaf:
    """A leaf switch (future ToR group) as an importer found it: hosts with GPU counts."""

    name: str
    hosts: list[tuple[str, int]]
    line: int | None = None
    link_speed: int | None = None


def build_cluster(leaves: list[Leaf], options: ImportOptions, *, default_name: str, source: str,
                  switches: tuple[Switch, ...] | None = None,
                  block_sizes: tuple[int, ...] | None = None, host_lines: dict | None = None) -> Cluster:
    """Assemble a Cluster: each leaf becomes a ToR group (hosts in natural name order).

    ``host_lines`` (host -> line) locates errors about one host; without it, the leaf's line.

    Host NICs are ``min(rails, gpus)`` with ``rails`` defaulting to ``options.gpus``;
    group capacity is ``max(options.capacity, hosts in the leaf)``. With a switch tree the
    leaves and switches are put in natural name order (a tree file's line order carries no
    meaning); block files keep their block order. The cluster gets one tier per level
    above the leaves of a tree or block file (:func:`~rankmap.topology.tiers.derived_tiers`:
    documented defaults, named "tier1", "tier2"... or "spine" for one level;
    :func:`name_tiers` renames them); without either, ``tiers`` stays None (one flat spine).

    Raises
    ------
    SpecError
        If there are no hosts, a host has more than :data:`~rankmap.topology.model.MAX_HOST_GPUS`
        GPUs, two host names differ only in case (at the host's line), or the model rejects
        the result (naming ``source``).
    """
    if not any(leaf.hosts for leaf in leaves):
        raise SpecError("no hosts found", source=source, line=1)
    _check_hosts(leaves, source, host_lines or {})
    rails = options.rails or options.gpus
    if switches is not None:
        leaves = sorted(leaves, key=lambda leaf: name_key(leaf.name))
        switches = tuple(sorted(switches, key=lambda s: name_key(s.name)))
    groups, hosts = [], []
    for i, leaf in enumerate(leaves):
        members = sorted(leaf.hosts, key=lambda m: name_key(m[0]))
        groups.append(TorGroup(name=leaf.name, index=i, hosts=tuple(m[0] for m in members),
                               capacity=max(options.capacity, len(members)), link_speed=leaf.link_speed))
        hosts.extend(Host(name=h, gpus=g, nics=min(rails, g), tor_group=leaf.name) for h, g in members)
    links = options.links()
    try:
        cluster = Cluster(name=options.name or default_name, tor_groups=tuple(groups), hosts=tuple(hosts),
                          links=links, switches=switches, block_sizes=block_sizes, source=source)
        if switches is None and block_sizes is None:
            return cluster  # nothing read about switches: today's flat spine (tiers None)
        return dataclasses.replace(cluster, tiers=derived_tiers(cluster))
    except TopologyError as exc:
        raise SpecError(str(exc), source=source) from None


def _check_hosts(leaves: list[Leaf], source: str, host_lines: dict) -> None:
    """The per-host rules of a cluster spec, located at the host's line of the imported file."""
    seen: dict[str, tuple[str, int | None]] = {}
    for leaf in leaves:
        for name, gpus in leaf.hosts:
            line = host_lines.get(name, leaf.line)
            if gpus > MAX_HOST_GPUS:
                raise SpecError(f"host {name} has {gpus} GPUs (slots), more than {MAX_HOST_GPUS}", source=source,
                                line=line, key=name)
            first, first_line = seen.setdefault(host_identity(name), (name, line))
            if first != name:
                at = f" (line {first_line})" if first_line else ""
                raise SpecError(f"hosts {first!r}{at} and {name!r} are one host (host names ignore case)",
                                source=source, line=line, key=name)


def name_tiers(cluster: Cluster, names) -> Cluster:
    """``cluster`` with its tiers renamed, lowest first, by ``names(level)`` (a function of the
    1-based level returning a name or None to keep the default). A name a tier cannot take
    (:func:`~rankmap.topology.tiers.tier_name_problem`: ``ToR``, blanks, ``,`` or ``=``) keeps
    the default too; all are kept as they are if two would share a name (in any letter case).

    Examples
    --------
    >>> from rankmap.topology.slurm import parse_slurm_tree
    >>> c = parse_slurm_tree("SwitchName=s Switches=l1\\nSwitchName=l1 Nodes=n1", "t.conf").cluster
    >>> [t.name for t in name_tiers(c, lambda level: f"layer-{level}").tiers]
    ['layer-1']
    >>> [t.name for t in name_tiers(c, lambda level: "spine block").tiers]   # not one word: the default
    ['spine']
    """
    def usable(name):
        return name if name and tier_name_problem(name) is None else None

    tiers = tuple(dataclasses.replace(t, name=usable(names(lv)) or t.name)
                  for lv, t in enumerate(cluster.tiers or (), 1))
    if len({t.name.lower() for t in tiers}) < len(tiers):
        return cluster
    return dataclasses.replace(cluster, tiers=tiers)


def note_tiers(cluster: Cluster, diags: Diagnostics) -> None:
    """Note which tiers got default sizes (nothing when the cluster has no tier)."""
    if cluster.tiers:
        diags.note(TIER_NOTE.format(names=", ".join(t.name for t in cluster.tiers)))


def check_known_hosts(leaves: list[Leaf], options: ImportOptions, diags: Diagnostics, source: str,
                      what: tuple[str, str]) -> list[Leaf]:
    """Give hosts ``options.gpus`` GPUs; against ``options.hosts``, warn as slurmctld does
    about unknown hosts (left out) and about hosts that no leaf reaches. ``what`` names a
    leaf in singular and plural ("switch", "switches")."""
    known = set(options.hosts) if options.hosts is not None else None
    out, placed = [], set()
    for leaf in leaves:
        unknown = [h for h, _ in leaf.hosts if known is not None and h not in known]
        if unknown:
            diags.warn(f"Invalid hostnames in {what[0]} configuration: {compress_hostlist(unknown)} "
                       "(not in --hosts; left out)", source=source, line=leaf.line, key=leaf.name)
        hosts = [(h, options.gpus) for h, _ in leaf.hosts if h not in unknown]
        placed.update(h for h, _ in hosts)
        out.append(Leaf(name=leaf.name, hosts=hosts, line=leaf.line, link_speed=leaf.link_speed))
    if known is not None:
        missing = [h for h in options.hosts if h not in placed]
        if missing:
            diags.warn(f"{what[1]} lack access to {len(missing)} nodes: {compress_hostlist(missing)} "
                       "(hosts under no leaf are left out)", source=source, line=1)
    return out


def name_pattern(name: str) -> str:
    """A host name with every run of digits as ``#`` (``gpu-017.rack2`` -> ``gpu-#.rack#``).

    Examples
    --------
    >>> name_pattern("gpu-017.rack2"), name_pattern("gpu-0l7.rack2")
    ('gpu-#.rack#', 'gpu-#l#.rack#')
    """
    return re.sub(r"\d+", "#", name)


def warn_odd_names(leaves: list[Leaf], diags: Diagnostics, source: str, host_lines: dict | None = None,
                   what: str = "leaf") -> None:
    """Warn about a host whose name pattern (:func:`name_pattern`) differs from every other
    host's in its leaf while the others share one: a likely typo (``gpu-0l7`` among
    ``gpu-001`` ... ``gpu-016``). Needs three hosts in the leaf; the warning names the host
    and its line (``host_lines[host]``, else the leaf's line).
    """
    for leaf in leaves:
        names = [h for h, _ in leaf.hosts]
        if len(names) < 3:
            continue
        patterns = [name_pattern(n) for n in names]
        counts = Counter(patterns)                            # one pass: a leaf can hold 10^5 hosts
        usual = max(counts, key=lambda p: (counts[p], p))
        if counts[usual] < 2:
            continue
        for name, pattern in zip(names, patterns):
            if counts[pattern] == 1:
                line = (host_lines or {}).get(name, leaf.line)
                diags.warn(f"host {name} does not look like its {len(names) - 1} neighbours in {what} {leaf.name} "
                           f"(pattern {pattern!r}, {counts[usual]} of them {usual!r}): a typo?", source=source,
                           line=line, key=name)


def file_stem(source: str) -> str:
    """A file's name without folder and suffix, the default cluster name.

    Examples
    --------
    >>> file_stem("/etc/slurm/topology.conf"), file_stem("nodes")
    ('topology', 'nodes')
    """
    name = source.replace("\\", "/").rsplit("/", 1)[-1]
    return (name.rsplit(".", 1)[0] if "." in name.strip(".") else name) or "cluster"


def join_top_domains(leaves: list[Leaf], switches: tuple[Switch, ...], options: ImportOptions, diags: Diagnostics,
                     *, what: str) -> tuple[tuple[Switch, ...], str | None]:
    """``switches`` plus an implied root joining several top-level domains, and its name.

    Kueue's topology levels and Volcano's HyperNode tiers describe locality, not separation:
    Kueue admits a workload that fits no single domain of its preferred level into a domain
    one level up, and at the top level across several domains (Kueue, "Topology Aware
    Scheduling", https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/), and a
    Volcano job without ``highestTierAllowed`` may span HyperNodes. So nodes under different
    top-level domains still reach each other, through a network the labels do not describe.
    The root stands for it, sized like every imported tier (non-blocking at the ToR uplink
    speed, :func:`~rankmap.topology.tiers.derived_tiers`), and a note says so. With
    ``options.separate_tops`` (or a single top domain) nothing is added and the root is None.

    Examples
    --------
    >>> d = Diagnostics(False)
    >>> leaves = [Leaf(name="a", hosts=[("n1", 8)]), Leaf(name="b", hosts=[("n2", 8)])]
    >>> switches, root = join_top_domains(leaves, (), ImportOptions(), d, what="top-level domains")
    >>> [(s.name, s.children) for s in switches], root
    ([('root', ('a', 'b'))], 'root')
    """
    children = {c for s in switches for c in s.children}
    tops = sorted({leaf.name for leaf in leaves if leaf.hosts} | {s.name for s in switches}, key=name_key)
    tops = [t for t in tops if t not in children]
    if len(tops) < 2 or options.separate_tops:
        return switches, None
    taken = {leaf.name for leaf in leaves} | {s.name for s in switches}
    root = "root"
    while root in taken:
        root += "'"
    diags.note(f"{len(tops)} {what} joined under an implied root {root!r}: topology levels describe locality, "
               "not separation, so jobs may span them; the root's tier is assumed non-blocking at the ToR uplink "
               "speed (edit tiers: in the cluster YAML, or pass --separate-top-domains if they share no network)")
    return (*switches, Switch(name=root, children=tuple(tops))), root
