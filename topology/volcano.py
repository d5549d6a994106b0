"""Volcano HyperNodes (``topology.volcano.sh/v1alpha1``) -> Cluster.

A HyperNode is one network domain; ``spec.tier`` counts from the nodes up (tier 1 holds
nodes). Its members are nodes (selected by ``exactMatch`` name or ``regexMatch``
pattern) or lower-tier HyperNodes (by ``exactMatch`` name)::

    apiVersion: topology.volcano.sh/v1alpha1
    kind: HyperNode
    metadata: {name: s0}
    spec:
      tier: 1
      members:
      - {type: Node, selector: {exactMatch: {name: node-0}}}
      - {type: Node, selector: {regexMatch: {pattern: "^node-[1-3]$"}}}

A file holds several documents (``---``) or a ``List``. HyperNodes whose members are
nodes become ToR groups; the others become switches. Each HyperNode and node has one
parent, members must sit on a lower tier, and cycles are errors. Regex members match
the host names given as ``ImportOptions.hosts`` (Volcano matches them against the
cluster's nodes, which a file does not list); ``labelMatch`` members need node labels
and are refused.

References
----------
Volcano network topology aware scheduling, https://volcano.sh/en/docs/network_topology_aware_scheduling/
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rankmap.errors import SpecError
from rankmap.names import regex_problem
from rankmap.topology.hostnames import check_hostname
from rankmap.topology.model import Switch
from rankmap.topology.sources import (
    Diagnostics,
    ImportOptions,
    ImportResult,
    Leaf,
    build_cluster,
    check_known_hosts,
    file_stem,
    join_top_domains,
    name_tiers,
    note_tiers,
)
from rankmap.topology.tiers import structure
from rankmap.topology.tree import find_cycle, name_key
from rankmap.yamlio import Fields, parse_yaml_documents

__all__ = ["parse_hypernodes"]


def parse_hypernodes(text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Read HyperNode objects (multi-document YAML or a List).

    Examples
    --------
    >>> text = '''
    ... kind: HyperNode
    ... metadata: {name: s0}
    ... spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^n[12]$"}}}]}
    ... ---
    ... kind: HyperNode
    ... metadata: {name: s1}
    ... spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: s0}}}]}
    ... '''
    >>> r = parse_hypernodes(text, "hn.yaml", ImportOptions(hosts=("n1", "n2", "n3")))
    >>> r.cluster.tor_groups[0].hosts, r.cluster.switches[0].children
    (('n1', 'n2'), ('s0',))
    >>> [str(w) for w in r.warnings]
    ['hn.yaml:1: HyperNodes lack access to 1 nodes: n3 (hosts under no leaf are left out)']
    """
    options = options or ImportOptions()
    diags = Diagnostics(options.strict)
    hypernodes = [_hypernode(d, source) for d in _documents(text, source)]
    if not hypernodes:
        raise SpecError("no HyperNode objects found", source=source, line=1)
    by_name: dict[str, _HyperNode] = {}
    for hn in hypernodes:
        if hn.name in by_name:
            raise SpecError(f"HyperNode {hn.name} is defined twice (first on line "
                            f"{by_name[hn.name].line})", source=source, line=hn.line, key=hn.name)
        by_name[hn.name] = hn
    _check_tree(hypernodes, by_name, source)
    leaves = _leaves(hypernodes, options, diags, source)
    leaves = check_known_hosts(leaves, options, diags, source, ("HyperNode", "HyperNodes"))
    switches = tuple(Switch(name=hn.name, children=tuple(sorted(hn.children, key=name_key)))
                     for hn in hypernodes if hn.children)
    switches, _ = join_top_domains(leaves, switches, options, diags, what="top HyperNodes")
    cluster = build_cluster(leaves, options, default_name=file_stem(source), source=source, switches=switches)
    cluster = name_tiers(cluster, _tier_names(cluster, by_name))
    if len(cluster.islands()) > 1:
        diags.note(f"{len(cluster.islands())} top HyperNodes: kept as separate islands (--separate-top-domains)")
    note_tiers(cluster, diags)
    return ImportResult(cluster=cluster, format="volcano", source=source, warnings=tuple(diags.warnings),
                        notes=tuple(diags.notes))


def _tier_names(cluster, by_name: dict):
    """Name each level by its HyperNodes' ``tierName`` (or "tierN" from ``spec.tier``) when
    all HyperNodes of that level agree ("root" for an implied root); None keeps the default name."""
    def name(level: int) -> str | None:
        found = {by_name[n.name].tier_name or f"tier{by_name[n.name].tier}" if n.name in by_name else "root"
                 for n in structure(cluster)[level - 1]}  # the implied root is no HyperNode
        return found.pop() if len(found) == 1 else None
    return name


def _documents(text: str, source: str) -> list:
    """Every YAML document (items of a List count as documents), with line numbers."""
    docs = parse_yaml_documents(text, source)
    out = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = Fields(doc, source).only("apiVersion", "kind", "metadata", "items").seq("items")
            out.extend(items)
        elif doc is not None:
            out.append(doc)
    return out


@dataclass
class _HyperNode:
    name: str
    tier: int
    line: int
    tier_name: str | None = None
    nodes: list[str] = field(default_factory=list)
    regex: list[tuple[re.Pattern, str, int]] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    member_lines: dict[str, int] = field(default_factory=dict)


def _hypernode(doc, source: str) -> _HyperNode:
    top = Fields(doc, source, line=getattr(doc, "line", 1)).only("apiVersion", "kind", "metadata", "spec")
    if top.raw("kind", None) != "HyperNode":
        raise top.error("kind", f"expected kind: HyperNode, got {top.raw('kind', None)!r}")
    meta = top.sub("metadata", required=True)
    name = meta.str("name")  # labels, annotations... of the object are not ours to check
    spec = top.sub("spec", required=True).only("tier", "tierName", "members")
    hn = _HyperNode(name=name, tier=spec.int("tier", minimum=1), line=meta.line_of("name"),
                    tier_name=spec.str("tierName", None))
    members = spec.seq("members")
    if not members:
        raise spec.error("members", f"HyperNode {name} has no members")
    kinds = {_member(hn, Fields(entry, source, f"{name}.members[{i}]", members.item_lines[i]))
             for i, entry in enumerate(members)}
    if len(kinds) > 1:
        raise SpecError(f"HyperNode {name} has both Node and HyperNode members", source=source,
                        line=hn.line, key=name)
    return hn


def _member(hn: _HyperNode, f: Fields) -> str:
    """Add one member to ``hn``; returns its type."""
    kind = f.only("type", "selector").choice("type", ("Node", "HyperNode"))
    sel = f.sub("selector", required=True).only("exactMatch", "regexMatch", "labelMatch")
    if len(sel.data) != 1:
        raise sel.error(next(iter(sel.data), "selector"), "a selector has exactly one of exactMatch, "
                        "regexMatch, labelMatch")
    if sel.has("labelMatch"):
        raise sel.error("labelMatch", "labelMatch needs node labels, which HyperNodes do not list: "
                        "import the nodes with --from k8s-labels --levels instead")
    if sel.has("regexMatch"):
        if kind == "HyperNode":
            raise sel.error("regexMatch", "HyperNode members are selected by exactMatch name")
        pattern = sel.sub("regexMatch").only("pattern").str("pattern")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise sel.error("regexMatch", f"bad regular expression {pattern!r}: {exc}") from None
        why = regex_problem(pattern)  # Python's re backtracks where Volcano's RE2 does not
        if why:
            raise sel.error("regexMatch", f"refused regular expression {pattern[:80]!r}: {why}")
        hn.regex.append((compiled, pattern, sel.line_of("regexMatch")))
        return kind
    member = sel.sub("exactMatch").only("name").str("name")
    if kind == "Node" and check_hostname(member):
        raise sel.error("exactMatch", f"bad node name {member!r}: {check_hostname(member)}")
    (hn.nodes if kind == "Node" else hn.children).append(member)
    hn.member_lines[member] = sel.line_of("exactMatch")
    return kind


def _check_tree(hypernodes: list[_HyperNode], by_name: dict[str, _HyperNode], source: str) -> None:
    parent: dict[str, str] = {}
    for hn in hypernodes:
        for child in hn.children:
            line = hn.member_lines[child]
            if child not in by_name or child == hn.name:
                raise SpecError(f"HyperNode {hn.name} has invalid member ({child}): no HyperNode has "
                                "that name", source=source, line=line, key=child)
            if child in parent:
                raise SpecError(f"HyperNode {child} has two parents ({parent[child]} and {hn.name}): "
                                "a HyperNode has one parent", source=source, line=line, key=child)
            parent[child] = hn.name
            if by_name[child].tier >= hn.tier:
                raise SpecError(f"HyperNode {hn.name} (tier {hn.tier}) has member {child} of tier "
                                f"{by_name[child].tier}: members sit on a lower tier", source=source,
                                line=line, key=child)
    cycle = find_cycle({hn.name: hn.children for hn in hypernodes})
    if cycle:  # unreachable with the tier rule, kept as the model's own guard
        raise SpecError("HyperNodes form a cycle: " + " -> ".join(cycle), source=source,
                        line=by_name[cycle[0]].line, key=cycle[0])


def _leaves(hypernodes: list[_HyperNode], options: ImportOptions, diags: Diagnostics, source: str) -> list[Leaf]:
    leaves: list[Leaf] = []
    owner: dict[str, str] = {}
    for hn in hypernodes:
        if hn.children:
            continue
        hosts = list(hn.nodes)
        for pattern, text, line in hn.regex:
            if options.hosts is None:
                raise SpecError(f"regexMatch {text!r} matches node names, which the file does not list: "
                                "pass --hosts", source=source, line=line, key=text)
            matched = [h for h in options.hosts if pattern.search(h) and h not in hosts]
            if not matched:
                diags.warn(f"regexMatch {text!r} matches no host in --hosts", source=source, line=line, key=text)
            hosts.extend(matched)
        for host in hosts:
            if host in owner:
                raise SpecError(f"node {host} is a member of HyperNodes {owner[host]} and {hn.name}: "
                                "a node has one parent", source=source, line=hn.line, key=host)
            owner[host] = hn.name
        leaves.append(Leaf(name=hn.name, hosts=[(h, 0) for h in hosts], line=hn.line))
    return leaves
