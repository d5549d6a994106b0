"""Slurm topology.conf for the topology/block plugin <-> :class:`~rankmap.topology.model.Cluster`.

Base blocks (e.g. one NVLink domain or rack each) are listed in order; ``BlockSizes``
gives the aggregation levels in hosts::

    BlockName=blk1 Nodes=r1n[1-4]
    BlockName=blk2 Nodes=r2n[1-4]
    BlockSizes=4,8,16

Each base block becomes a ToR group; ``Cluster.block_sizes`` keeps the levels that
slurmctld uses (:func:`rankmap.topology.tree.block_levels` lists the aggregated blocks). Checks
and words follow slurmctld (src/plugins/topology/block): the first size is the base
block size, each size is the base size times a power of two (at most 2**15), no block
may have fewer hosts than the base size, and sizes past the first one that covers every
block are unused. Without ``BlockSizes`` slurmctld uses 1, 2, 4, 8 and 16 base blocks
of the first block's size; the imported cluster records those sizes explicitly.

References
----------
topology.conf(5), https://slurm.schedmd.com/topology.conf.html
"""

from __future__ import annotations

from rankmap.errors import SpecError
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster
from rankmap.topology.slurm import warn_unreadable
from rankmap.topology.slurmconf import Record, Token, check_switch_name, compress_names, parse_records
from rankmap.topology.sources import (
    SLURM_VERSION,
    Diagnostics,
    ImportOptions,
    ImportResult,
    Leaf,
    build_cluster,
    check_known_hosts,
    file_stem,
    name_tiers,
    note_tiers,
    slurm_release,
    warn_odd_names,
)
from rankmap.topology.tiers import groups_under, structure
from rankmap.topology.tree import block_runs

__all__ = ["parse_slurm_block", "block_from_records", "export_slurm_block", "mixed_blocks", "BLOCK_RELAXED_SINCE"]

BLOCK_KEYS = ("BlockName", "Nodes", "BlockSizes")
# Slurm 25.05 relaxed topology/block: blocks smaller than the base block size, and
# placeholder blocks without nodes (Slurm 25.05 release notes; topology.conf(5)).
BLOCK_RELAXED_SINCE = (25, 5, 0)
_MAX_LEVEL = 15  # slurmctld: a level may aggregate at most 2**15 base blocks


def parse_slurm_block(text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Read a topology/block topology.conf.

    Returns
    -------
    ImportResult
        One ToR group per base block, in file order; ``cluster.block_sizes`` in hosts; one
        tier per aggregated block level ("block128" ...: one word, as --tier-weights names it) and
        a "spine" above when several top-level blocks remain, with default sizes the cluster YAML
        can override.

    Raises
    ------
    SpecError
        At ``FILE:LINE`` with the token, for what slurmctld refuses, and for a host in
        two blocks.

    Examples
    --------
    >>> r = parse_slurm_block("BlockName=b1 Nodes=n[1-2]\\nBlockName=b2 Nodes=n[3-4]\\nBlockSizes=2,4", "b.conf")
    >>> [g.name for g in r.cluster.tor_groups], r.cluster.block_sizes
    (['b1', 'b2'], (2, 4))
    """
    options = options or ImportOptions()
    hint = "this is a topology/tree file: import it with --from slurm"
    return block_from_records(parse_records(text, source, BLOCK_KEYS, {"SwitchName": hint, "Switches": hint}),
                              source, options)


def block_from_records(records: list[Record], source: str, options: ImportOptions, *,
                       fmt: str = "slurm-block") -> ImportResult:
    """The blocks of ``BlockName=`` / ``BlockSizes=`` records (topology.conf, or topology.yaml's ``block``).

    With ``options.slurm_version`` 25.05 or later, a block may have fewer nodes than the base
    block size, and a block without nodes is a placeholder that keeps its position (an empty
    ToR group); earlier releases refuse both (Slurm 25.05 release notes, topology/block).
    """
    diags = Diagnostics(options.strict)
    relaxed = slurm_release(options.slurm_version) >= BLOCK_RELAXED_SINCE
    sizes_token, blocks = _block_lines(records, source, diags, options.slurm_version)
    if not blocks:
        raise SpecError("No blocks configured (no BlockName= line)", source=source,
                        line=sizes_token.line if sizes_token else 1)
    leaves = check_known_hosts(blocks, options, diags, source, ("block", "blocks"))
    warn_odd_names(leaves, diags, source, what="block")
    sizes = _block_sizes(sizes_token, leaves, source, diags, relaxed)
    cluster = build_cluster(leaves, options, default_name=file_stem(source), source=source, block_sizes=sizes)
    cluster = name_tiers(cluster, lambda level: f"block{sizes[level]}" if level < len(sizes) else "spine")
    note_tiers(cluster, diags)
    return ImportResult(cluster=cluster, format=fmt, source=source,
                        warnings=tuple(diags.warnings), notes=tuple(diags.notes))


def _block_lines(records: list[Record], source: str, diags: Diagnostics,
                 version: str) -> tuple[Token | None, list[Leaf]]:
    sizes: Token | None = None
    blocks: list[Leaf] = []
    seen: dict[str, int] = {}
    block_of: dict[str, tuple[str, int]] = {}
    for rec in records:
        first = rec.tokens[0]
        if first.key == "BlockSizes" or rec.get("BlockSizes"):
            if len(rec.tokens) > 1:
                raise SpecError("BlockSizes= stands alone on its line", source=source, line=rec.line,
                                key=rec.get("BlockSizes").text if first.key != "BlockSizes" else rec.tokens[1].text)
            if sizes is not None:
                raise SpecError(f"BlockSizes is given twice (first on line {sizes.line})", source=source,
                                line=rec.line, key=first.text)
            sizes = first
            continue
        if first.key != "BlockName":
            raise SpecError(f"a line must start with BlockName= or BlockSizes=, not {first.key}=",
                            source=source, line=rec.line, key=first.text)
        block = _block(rec, seen, source, diags, version)
        for host, _ in block.hosts:
            if host in block_of:
                other, line = block_of[host]
                raise SpecError(f"host {host} is in block {other} (line {line}) and in block {block.name}",
                                source=source, line=rec.line, key=rec.get("Nodes").text)
            block_of[host] = (block.name, rec.line)
        blocks.append(block)
    return sizes, blocks


def _block(rec: Record, seen: dict[str, int], source: str, diags: Diagnostics, version: str) -> Leaf:
    """One ``BlockName=`` line as a leaf (hosts without GPU counts yet)."""
    first = rec.tokens[0]
    name = first.value
    why = check_switch_name(name)
    if why:
        raise SpecError(f"bad block name: {why}", source=source, line=rec.line, key=first.text)
    if name in seen:
        raise SpecError(f"Block ({name}) has already been defined (line {seen[name]})", source=source,
                        line=rec.line, key=first.text)
    seen[name] = rec.line
    nodes = rec.get("Nodes")
    if nodes is None:
        if slurm_release(version) >= BLOCK_RELAXED_SINCE:  # a placeholder block: keeps its position
            return Leaf(name=name, hosts=[], line=rec.line)
        raise SpecError(f"block {name} hasn't got nodes (Nodes= is missing; placeholder blocks need "
                        f"Slurm 25.05, the target is {version})", source=source, line=rec.line, key=first.text)
    warn_unreadable(nodes, source, diags, version)
    hosts = expand_hostlist(nodes.value, source=source, line=rec.line, key=nodes.text)
    return Leaf(name=name, hosts=[(h, 0) for h in hosts], line=rec.line)


def _block_sizes(token: Token | None, blocks: list[Leaf], source: str, diags: Diagnostics,
                 relaxed: bool = False) -> tuple[int, ...]:
    """The aggregation sizes slurmctld will use, in hosts (``relaxed``: 25.05's rules, where a
    block may be smaller than the base block size)."""
    if token is None:
        base = len(blocks[0].hosts)
        if base == 0:
            raise SpecError(f"block {blocks[0].name} has no hosts left", source=source, line=blocks[0].line)
        levels = list(range(5))  # slurmctld's default: 1, 2, 4, 8 and 16 base blocks
    else:
        base, levels = _parse_sizes(token, source)
    for block in blocks:
        if len(block.hosts) < base and not relaxed:
            raise SpecError(f"Block configuration ({block.name}) children count lower than the base block "
                            f"size: {len(block.hosts)} hosts, base blocks have {base} (Slurm 25.05 "
                            "allows smaller blocks: --slurm-version 25.05)", source=source,
                            line=block.line, key=f"BlockName={block.name}")
    used = []
    for level in levels:  # slurmctld stops at the first level that covers every block
        used.append(level)
        if 2 ** level >= len(blocks):
            break
    if token is not None and len(used) < len(levels):
        unused = ",".join(str(base * 2 ** lv) for lv in levels[len(used):])
        diags.warn(f"BlockSizes {unused} exceed the {len(blocks)} blocks: slurmctld ignores them",
                   source=source, line=token.line, key=token.text)
    return tuple(base * 2 ** lv for lv in used)


def _parse_sizes(token: Token, source: str) -> tuple[int, list[int]]:
    """``BlockSizes=4,8,16`` -> base size 4 and levels [0, 1, 2] (log2 of base blocks)."""
    base, levels = 0, []
    for v in (v.strip() for v in token.value.split(",")):
        if not v.isdigit() or int(v) <= 0:
            raise SpecError(f"Invalid BlockSizes value: {v!r} (expected positive integers)",
                            source=source, line=token.line, key=token.text)
        size = int(v)
        base = base or size
        ratio, rest = divmod(size, base)
        if rest or ratio & (ratio - 1) or ratio.bit_length() - 1 > _MAX_LEVEL:
            raise SpecError(f"Invalid BlockSizes value: {size} is not the base block size {base} "
                            f"times a power of two up to 2**{_MAX_LEVEL}", source=source,
                            line=token.line, key=token.text)
        levels.append(ratio.bit_length() - 1)
    if levels != sorted(set(levels)):
        raise SpecError(f"Invalid BlockSizes value: {token.value!r} must be ascending without repeats",
                        source=source, line=token.line, key=token.text)
    return base, levels


def export_slurm_block(cluster: Cluster, slurm_version: str = SLURM_VERSION) -> str:
    """Write a topology/block topology.conf; ``parse_slurm_block`` reads the same blocks back.

    ToR groups become base blocks in group order. A cluster without block sizes gets
    sizes of 1, 2, 4, ... base blocks of its smallest group, up to all groups.

    Raises
    ------
    SpecError
        If the cluster has islands (blocks cannot keep them apart), an empty group, a
        group smaller than the base block size, or a name Slurm cannot read.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: b1, hosts: 'n[1-2]'}, {name: b2, hosts: 'n[3-4]'}]")
    >>> print(export_slurm_block(c), end="")
    # topology.conf (topology/block) for cluster 'cluster', written by rankmap
    BlockName=b1 Nodes=n[1-2]
    BlockName=b2 Nodes=n[3-4]
    BlockSizes=2,4
    """
    islands = cluster.islands()
    if len(islands) > 1:
        raise SpecError(f"cluster {cluster.name!r} has {len(islands)} islands; topology/block cannot keep "
                        "them apart (export with --to slurm)")
    if not cluster.tor_groups:
        raise SpecError(f"cluster {cluster.name!r} has no ToR groups: refusing to write an empty topology.conf")
    out = [f"# topology.conf (topology/block) for cluster {cluster.name!r}, written by rankmap"]
    sizes, rows = block_lines(cluster, slurm_version)
    for name, nodes in rows:
        out.append((f"BlockName={name}" + (f" Nodes={nodes}" if nodes else "")).replace("#", "\\#"))
    out.append("BlockSizes=" + ",".join(map(str, sizes)))
    return "\n".join(out) + "\n"


def mixed_blocks(cluster: Cluster, slurm_version: str = SLURM_VERSION) -> list[str]:
    """Why the block topology :func:`export_slurm_block` writes misleads slurmctld: one line
    per aggregation level that joins parts of different domains of a tier (pods), naming the
    level, the block and the domains it cuts.

    topology/block treats each aggregated block as one locality (slurmctld packs a job into
    the smallest block level that holds it, topology.conf(5)); blocks are runs of ``2**k``
    base blocks in order. When a pod holds a number of ToR groups that is not such a run
    (6 of them), a level's block takes part of one pod and part of the next, so Slurm would
    pack a job across the tier above pods believing it local. A block that holds whole
    domains only (all of two pods) is what a higher level means, and is not reported.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: a, hosts: x1}, {name: b, hosts: x2}, {name: c, hosts: x3}, "
    ...                   "{name: d, hosts: x4}]\\nswitches: [{name: p1, children: [a, b, c]}, "
    ...                   "{name: p2, children: [d]}, {name: top, children: [p1, p2]}]")
    >>> mixed_blocks(c)
    ["BlockSizes level 2 hosts: 1 of 2 blocks joins parts of different p1, p2 domains across tier 'tier2', \
e.g. c+d: part of p1 (c), p2 (d)"]
    """
    levels = structure(cluster)
    if len(levels) < 2:
        return []  # one tier above the ToR groups: every block is inside its one domain
    sizes, _ = block_lines(cluster, slurm_version)
    out = []
    for size, blocks in block_runs([g.name for g in cluster.tor_groups], sizes)[1:]:
        for lv, nodes in enumerate(levels[:-1], 1):
            cuts = [(block, _cut(block, levels, nodes)) for block in blocks]
            cuts = [(block, why) for block, why in cuts if why]
            if cuts:
                block, why = cuts[0]
                names = ", ".join(n.name for n in nodes) if len(nodes) <= 4 else f"{len(nodes)} level-{lv}"
                out.append(f"BlockSizes level {size} hosts: {len(cuts)} of {len(blocks)} block{'s' * (len(blocks) != 1)} "
                           f"join{'s' * (len(cuts) == 1)} parts of different {names} domains across tier "
                           f"{cluster.fabric_tiers[lv].name!r}, e.g. {'+'.join(block)}: {why}")
                break
    return out


def _cut(block: tuple[str, ...], levels, nodes) -> str:
    """How ``block`` cuts the domains ``nodes`` of one level: '' unless it touches several and
    holds one only in part."""
    inside = set(block)
    touched = [(n, groups_under(levels, n)) for n in nodes if inside & set(groups_under(levels, n))]
    if len(touched) < 2 or all(set(g) <= inside for _, g in touched):
        return ""
    return ", ".join(f"{'part of ' * (not set(groups) <= inside)}{n.name} ({', '.join(g for g in groups if g in inside)})"
                     for n, groups in touched)


def block_lines(cluster: Cluster, slurm_version: str = SLURM_VERSION) -> tuple[tuple[int, ...], list[tuple[str, str]]]:
    """``(block sizes, [(block name, hostlist or "")])`` of a cluster, checked as slurmctld
    ``slurm_version`` would check them (also for topology.yaml's ``block``).

    Raises
    ------
    SpecError
        A name Slurm cannot read; before 25.05, a group smaller than the base block size or
        without hosts.
    """
    relaxed = slurm_release(slurm_version) >= BLOCK_RELAXED_SINCE
    sizes = cluster.block_sizes or _default_sizes(cluster)
    rows = []
    for group in cluster.tor_groups:
        why = check_switch_name(group.name)
        if why:
            raise SpecError(f"cannot write {group.name!r} as a Slurm block name: {why}")
        if len(group.hosts) < sizes[0] and not relaxed:
            raise SpecError(f"ToR group {group.name!r} has {len(group.hosts)} hosts, fewer than the base "
                            f"block size {sizes[0]}: slurmctld {slurm_version} would refuse it (25.05 accepts it)")
        rows.append((group.name, compress_names(group.hosts) if group.hosts else ""))
    return sizes, rows


def _default_sizes(cluster: Cluster) -> tuple[int, ...]:
    base = min((len(g.hosts) for g in cluster.tor_groups if g.hosts), default=0)
    if base == 0:
        raise SpecError(f"cluster {cluster.name!r} has no hosts: a Slurm block needs nodes")
    sizes, n = [base], 1
    while n < len(cluster.tor_groups):
        n *= 2
        sizes.append(base * n)
    return tuple(sizes)
