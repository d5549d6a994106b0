"""Slurm topology.conf for the topology/tree plugin <-> :class:`~rankmap.topology.model.Cluster`.

Each line names a switch and its children, either hosts (``Nodes=``, a leaf switch) or
switches (``Switches=``), with an optional ``LinkSpeed=``::

    SwitchName=core1 Switches=sp[3,7]
    SwitchName=sp3   Switches=leaf[1-2]
    SwitchName=leaf1 Nodes=gpu-a[01-02] LinkSpeed=400

Lines may come in any order. A leaf switch becomes one ToR group (its rail switches are
not in the file: ``ImportOptions.rails`` says how many NICs a host has); the switches
above are kept as :attr:`Cluster.switches <rankmap.topology.model.Cluster.switches>`. Parts of the
tree that no switch joins stay separate islands: no common root is invented.

Checks follow slurmctld's (src/plugins/topology/tree) and use its words: a switch defined
twice, a line with both ``Nodes=`` and ``Switches=``, an invalid (undefined) child, a
switch configuration that is not a tree, hosts under several leaves. What slurmctld only
warns about (hosts no switch reaches, unknown host names, empty leaves) is a warning here.

References
----------
topology.conf(5), https://slurm.schedmd.com/topology.conf.html
"""

from __future__ import annotations

from dataclasses import dataclass

from rankmap.errors import SpecError
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster, Switch
from rankmap.topology.slurmconf import (
    Record,
    Token,
    check_switch_name,
    compress_names,
    expand_names,
    parse_records,
    slurm_rejects,
)
from rankmap.topology.sources import (
    SLURM_VERSION,
    Diagnostics,
    ImportOptions,
    ImportResult,
    Leaf,
    build_cluster,
    check_known_hosts,
    file_stem,
    note_tiers,
    slurm_release,
    warn_odd_names,
)
from rankmap.topology.tree import find_cycle, name_key

__all__ = ["parse_slurm_tree", "tree_from_records", "export_slurm_tree", "warn_unreadable", "HOSTLIST_SUFFIX_SINCE"]

# Slurm reads text after a hostlist bracket (``ip-10-[20,25]-6-18``) from 23.02.5 on
# (Slurm NEWS, 23.02.5: hostlist expressions with a suffix after the range).
HOSTLIST_SUFFIX_SINCE = (23, 2, 5)

TREE_KEYS = ("SwitchName", "Nodes", "Switches", "LinkSpeed")


@dataclass
class _Line:
    name: str
    record: Record
    nodes: list[str] | None
    children: list[str] | None
    link_speed: int | None


def parse_slurm_tree(text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Read a topology/tree topology.conf.

    Parameters
    ----------
    text : str
        File contents.
    source : str
        File name, for messages and the default cluster name.
    options : ImportOptions, optional
        GPUs and rails per host, link speeds, known hosts, strictness.

    Returns
    -------
    ImportResult
        Leaves as ToR groups and the switches above them, each in natural name order (the
        order of lines does not matter); one tier per switch level ("spine" for one level,
        else "tier1", "tier2"... as ``scontrol show topology`` numbers levels), with
        default sizes that the cluster YAML can override.

    Raises
    ------
    SpecError
        At ``FILE:LINE`` with the token, for every error slurmctld refuses and for hosts
        under two leaves (a host has one ToR group).

    Examples
    --------
    >>> r = parse_slurm_tree("SwitchName=top Switches=l[1-2]\\nSwitchName=l1 Nodes=a[1-2]\\n"
    ...                      "SwitchName=l2 Nodes=b1", "t.conf", ImportOptions(rails=4))
    >>> [(g.name, g.hosts) for g in r.cluster.tor_groups], r.cluster.host("a1").nics
    ([('l1', ('a1', 'a2')), ('l2', ('b1',))], 4)
    >>> r.cluster.switches
    (Switch(name='top', children=('l1', 'l2'), link_speed=None),)
    """
    options = options or ImportOptions()
    hint = "this is a topology/block file: import it with --from slurm-block"
    records = parse_records(text, source, TREE_KEYS, {"BlockName": hint, "BlockSizes": hint})
    return tree_from_records(records, source, options, last_line=max(1, text.count("\n") + (not text.endswith("\n"))))


def tree_from_records(records: list[Record], source: str, options: ImportOptions, *, last_line: int = 1,
                      fmt: str = "slurm") -> ImportResult:
    """The tree of ``SwitchName=`` records (from topology.conf, or topology.yaml's ``tree``).

    ``last_line`` is where "no switches" is reported; ``fmt`` names the importer in the result.
    """
    diags = Diagnostics(options.strict)
    lines = _switch_lines(records, source, diags, options.slurm_version)
    if not lines:
        raise SpecError("No switches configured (no SwitchName= line)", source=source, line=last_line)
    by_name = {ln.name: ln for ln in lines}
    _check_children(lines, by_name, source)
    _warn_several_parents(lines, source, diags)
    leaves = _leaves(lines, source, diags)
    leaves = check_known_hosts(leaves, options, diags, source, ("switch", "switches"))
    warn_odd_names(leaves, diags, source, what="switch")
    switches = tuple(Switch(name=ln.name, children=tuple(sorted(ln.children, key=name_key)),
                            link_speed=ln.link_speed) for ln in lines if ln.children is not None)
    cluster = build_cluster(leaves, options, default_name=file_stem(source), source=source, switches=switches)
    _note_islands(cluster, diags)
    note_tiers(cluster, diags)
    return ImportResult(cluster=cluster, format=fmt, source=source, warnings=tuple(diags.warnings),
                        notes=tuple(diags.notes))


def _switch_lines(records: list[Record], source: str, diags: Diagnostics, version: str) -> list[_Line]:
    lines: list[_Line] = []
    seen: dict[str, int] = {}
    for rec in records:
        first = rec.tokens[0]
        if first.key != "SwitchName":
            raise SpecError(f"a line must start with SwitchName=, not {first.key}=", source=source,
                            line=rec.line, key=first.text)
        name = first.value
        why = check_switch_name(name)
        if why:
            raise SpecError(f"bad switch name: {why}", source=source, line=rec.line, key=first.text)
        if name in seen:
            raise SpecError(f"Switch ({name}) has already been defined (line {seen[name]})",
                            source=source, line=rec.line, key=first.text)
        seen[name] = rec.line
        nodes, switches = rec.get("Nodes"), rec.get("Switches")
        if nodes and switches:
            raise SpecError(f"switch {name} has both child switches and nodes", source=source,
                            line=rec.line, key=switches.text)
        warn_unreadable(nodes or switches, source, diags, version)
        lines.append(_Line(
            name=name, record=rec,
            nodes=expand_hostlist(nodes.value, source=source, line=rec.line, key=nodes.text) if nodes else None,
            children=expand_names(switches, source) if switches else None,
            link_speed=_link_speed(rec.get("LinkSpeed"), source)))
    return lines


def warn_unreadable(token: Token | None, source: str, diags: Diagnostics, version: str = SLURM_VERSION) -> None:
    """Warn about a hostlist element that python-hostlist reads but slurmctld ``version`` refuses
    (text after a bracket, which Slurm reads from 23.02.5 on: :data:`HOSTLIST_SUFFIX_SINCE`)."""
    if slurm_release(version) >= HOSTLIST_SUFFIX_SINCE:
        return
    bad = slurm_rejects(token.value) if token else None
    if bad:
        diags.warn(f"slurmctld {version} cannot read {bad!r}: Slurm before 23.02.5 allows no text after a "
                   "bracket (read here as python-hostlist does)", source=source, line=token.line, key=token.text)


def _link_speed(token: Token | None, source: str) -> int | None:
    if token is None:
        return None
    if not token.value.isdigit() or int(token.value) > 2**32 - 1:
        raise SpecError(f"LinkSpeed must be an unsigned 32-bit integer, got {token.value!r}",
                        source=source, line=token.line, key=token.text)
    return int(token.value)


def _check_children(lines: list[_Line], by_name: dict[str, _Line], source: str) -> None:
    for ln in lines:
        for child in ln.children or ():
            if child not in by_name or child == ln.name:
                raise SpecError(f"Switch configuration {ln.name} has invalid child ({child})"
                                + ("" if child == ln.name else ": no SwitchName line defines it"),
                                source=source, line=ln.record.line, key=ln.record.get("Switches").text)
    cycle = find_cycle({ln.name: ln.children or () for ln in lines})
    if cycle:
        where = by_name[cycle[0]].record
        raise SpecError("Switch configuration is not a tree: it has a cycle " + " -> ".join(cycle),
                        source=source, line=where.line, key=where.get("Switches").text)


def _warn_several_parents(lines: list[_Line], source: str, diags: Diagnostics) -> None:
    """One warning for switches listed under several parents (slurmibtopology writes every spine
    over every leaf). rankmap reads them as one fabric that each parent reaches; Slurm's
    topology/tree keeps only the last parent listed as the switch's ``parent``
    (``_find_child_switches`` in src/plugins/topology/tree/switch_record.c), and Volcano refuses
    the shape outright (a HyperNode has one parent): a tree was perhaps meant."""
    parents: dict[str, list[_Line]] = {}
    for ln in lines:
        for child in ln.children or ():
            parents.setdefault(child, []).append(ln)
    several = {child: up for child, up in parents.items() if len(up) > 1}
    if not several:
        return
    child, up = next(iter(several.items()))
    more = f" (and {len(several) - 1} more switches)" if len(several) > 1 else ""
    diags.warn(f"switch {child} has {len(up)} parents ({', '.join(f'{p.name} line {p.record.line}' for p in up)})"
               f"{more}: read as a fabric where each parent reaches it, not a tree; Slurm keeps only the last "
               f"parent listed ({up[-1].name}) when it walks up the tree", source=source, line=up[1].record.line,
               key=up[1].record.get("Switches").text)


def _leaves(lines: list[_Line], source: str, diags: Diagnostics) -> list[Leaf]:
    leaves: list[Leaf] = []
    leaf_of: dict[str, _Line] = {}
    for ln in lines:
        if ln.children is not None:
            continue
        if ln.nodes is None:
            diags.warn(f"switch {ln.name} has neither Nodes= nor Switches= (an empty leaf switch)",
                       source=source, line=ln.record.line, key=ln.record.tokens[0].text)
        for host in ln.nodes or ():
            if host in leaf_of:
                other = leaf_of[host]
                raise SpecError(f"Multiple leaf switches contain nodes: {host} is under {other.name} "
                                f"(line {other.record.line}) and {ln.name}; a host hangs under one leaf",
                                source=source, line=ln.record.line, key=ln.record.get("Nodes").text)
            leaf_of[host] = ln
        leaves.append(Leaf(name=ln.name, hosts=[(h, 0) for h in ln.nodes or ()], line=ln.record.line,
                           link_speed=ln.link_speed))
    return leaves


def _note_islands(cluster: Cluster, diags: Diagnostics) -> None:
    islands = cluster.islands()
    if len(islands) > 1:
        sizes = ", ".join(str(sum(len(cluster.tor_group(g).hosts) for g in isl)) for isl in islands)
        diags.note(f"no switch can reach all nodes: {len(islands)} islands of {sizes} hosts, "
                   "kept as separate fabrics (no job may span two)")


def export_slurm_tree(cluster: Cluster) -> str:
    """Write a topology/tree topology.conf; ``parse_slurm_tree`` reads the same tree back.

    Leaves (ToR groups) come first, in group order, then the switches above. A cluster
    without a switch tree (one spine joins all groups) gets one root switch over all
    groups, named ``spine`` (or ``spine1``... if taken). Islands stay islands.

    Raises
    ------
    SpecError
        If a name cannot be written in topology.conf, or there would be no switch line.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: l1, hosts: 'n[08-09]'}, {name: l2, hosts: n10}]")
    >>> print(export_slurm_tree(c), end="")
    # topology.conf (topology/tree) for cluster 'cluster', written by rankmap
    SwitchName=l1 Nodes=n[08-09]
    SwitchName=l2 Nodes=n10
    SwitchName=spine Switches=l[1-2]
    """
    switches = cluster.switches
    if switches is None:
        switches = (Switch(name=_free_name(cluster, "spine"), children=tuple(g.name for g in cluster.tor_groups)),)
    out = [f"# topology.conf (topology/tree) for cluster {cluster.name!r}, written by rankmap"]
    for group in cluster.tor_groups:
        words = [f"SwitchName={_name(group.name)}"]
        if group.hosts:
            words.append(f"Nodes={compress_names(group.hosts)}")
        if group.link_speed is not None:
            words.append(f"LinkSpeed={group.link_speed}")
        out.append(" ".join(words))
    for sw in switches:
        words = [f"SwitchName={_name(sw.name)}", f"Switches={compress_names(_name(c) for c in sw.children)}"]
        if sw.link_speed is not None:
            words.append(f"LinkSpeed={sw.link_speed}")
        out.append(" ".join(words))
    if len(out) == 1:
        raise SpecError(f"cluster {cluster.name!r} has no ToR groups: refusing to write an empty topology.conf")
    return "\n".join(out[:1] + [line.replace("#", "\\#") for line in out[1:]]) + "\n"


def _name(name: str) -> str:
    why = check_switch_name(name)
    if why:
        raise SpecError(f"cannot write {name!r} as a Slurm switch name: {why}")
    return name


def _free_name(cluster: Cluster, base: str) -> str:
    taken = {g.name for g in cluster.tor_groups}
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name
