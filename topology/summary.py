"""What an imported topology holds, in a few lines of text (``rankmap topo show``).

Hosts and GPUs, ToR groups and their sizes, the switch tiers above them, islands (parts
no job may span), Slurm block levels, and every note and warning of the import.
"""

from __future__ import annotations

from collections import Counter

from rankmap.topology.model import Cluster
from rankmap.topology.sources import ImportResult
from rankmap.topology.tiers import groups_under, structure
from rankmap.topology.tree import block_levels, parents, tiers

__all__ = ["summarize", "island_names", "tier_lines", "ratio_text"]

_FORMAT_WORDS = {
    "slurm": "Slurm topology/tree", "slurm-block": "Slurm topology/block", "k8s-labels": "Kubernetes node labels",
    "volcano": "Volcano HyperNodes", "hostfile": "hostfile", "cluster": "rankmap cluster spec",
}
_LIST_AT_MOST = 8


def summarize(result: ImportResult) -> list[str]:
    """Summary lines for an import result.

    Examples
    --------
    >>> from rankmap.topology.slurm import parse_slurm_tree
    >>> r = parse_slurm_tree("SwitchName=a Nodes=x[1-2]\\nSwitchName=b Nodes=y1", "t.conf")
    >>> print("\\n".join(summarize(r)))
    t.conf: Slurm topology/tree, cluster 't'
    hosts: 3, 24 GPUs (8 GPUs and 8 rails per host)
    ToR groups: 2: a 2 hosts, b 1 host
    tiers: 1 (leaf switches only, no switch above them)
    islands: 2: a 2 hosts, b 1 host
    note: no switch can reach all nodes: 2 islands of 2, 1 hosts, kept as separate fabrics (no job may span two)
    warnings: none
    """
    c = result.cluster
    out = [f"{result.source}: {_FORMAT_WORDS.get(result.format, result.format)}, cluster {c.name!r}",
           f"hosts: {len(c.hosts)}, {c.gpus} GPUs ({_per_host(c)})",
           f"ToR groups: {len(c.tor_groups)}: {_groups(c)}",
           f"tiers: {_tiers(c)}"]
    if c.fabric_tiers:  # derived tiers too: a flat spine or a tree without tiers: still has its figures
        out.extend(tier_lines(c))
    islands = c.islands()
    names = island_names(c)
    out.append(f"islands: {len(islands)}: " + ", ".join(
        f"{name} {_hosts(sum(len(c.tor_group(g).hosts) for g in isl))}" for name, isl in zip(names, islands)))
    for size, runs in block_levels(c):
        shown = ", ".join("+".join(r) for r in runs[:_LIST_AT_MOST]) + (", ..." if len(runs) > _LIST_AT_MOST else "")
        out.append(f"block level of {size} hosts: {len(runs)} aggregated block{'s' * (len(runs) != 1)}: {shown}")
    out.extend(f"note: {n}" for n in result.notes)
    out.append(f"warnings: {len(result.warnings) or 'none'}")
    out.extend(f"warning: {w}" for w in result.warnings)
    return out


def _hosts(n: int) -> str:
    return f"{n} host{'s' * (n != 1)}"


def _per_host(c: Cluster) -> str:
    shapes = Counter((h.gpus, h.nics) for h in c.hosts)
    if len(shapes) == 1:
        (gpus, nics), = shapes
        return f"{gpus} GPUs and {nics} rails per host"
    return "GPUs/rails per host: " + ", ".join(f"{g}/{n} on {_hosts(k)}" for (g, n), k in
                                               sorted(shapes.items(), reverse=True))


def _groups(c: Cluster) -> str:
    if len(c.tor_groups) <= _LIST_AT_MOST:
        return ", ".join(f"{g.name} {_hosts(len(g.hosts))}" for g in c.tor_groups)
    sizes = Counter(len(g.hosts) for g in c.tor_groups)
    return ", ".join(f"{k} of {_hosts(n)}" for n, k in sorted(sizes.items(), reverse=True))


def _tiers(c: Cluster) -> str:
    if c.tiers:  # given or imported tiers are what the tier lines below list, whatever the structure
        return (f"{1 + len(c.tiers)} (rail ToRs and {len(c.tiers)} tier{'s' * (len(c.tiers) != 1)} above: "
                + ", ".join(t.name for t in c.tiers) + ")")
    if c.block_sizes is not None:
        n = c.depth
        return f"{1 + n} (rail ToRs in base blocks and {n} block level{'s' * (n != 1)} above)"
    if c.switches is None:
        return f"2 (ToR groups joined by one spine layer of {c.spine.switches} switches)"
    n = tiers(c)
    if n == 1:
        return "1 (leaf switches only, no switch above them)"
    k = len(c.switches)
    return f"{n} (leaf switches and {n - 1} level{'s' * (n > 2)} above, {k} switch{'es' * (k != 1)})"


def tier_lines(c: Cluster) -> list[str]:
    """One line per level, rail ToRs first: domains, switches, down vs up bandwidth per domain,
    the ratio (oversubscription) and whether rails share the tier's switches.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: a, hosts: 'x[1-64]'}]\\nlinks: {tor_uplinks: 16}\\n"
    ...                   "tiers: [{name: spine, switches: 4, down_ports: 32}]")
    >>> print("\\n".join(tier_lines(c)))
    tier 0 ToR: 1 ToR group, 8 switches (one per rail), per domain down 102.4 Tb/s, up 51.2 Tb/s, 2:1
    tier 1 spine: 1 domain, 4 switches (rails share them), per domain down 51.2 Tb/s, top tier (no uplinks)
    """
    out = []
    for f in c.tier_figures():
        what = f"{f.domains} ToR group{'s' * (f.domains != 1)}" if f.level == 0 else \
            f"{f.domains} domain{'s' * (f.domains != 1)}"
        planes = "one per rail" if f.level == 0 else ("rails share them" if f.planes == "shared" else "a plane per rail")
        cabled = f" ({_tbps(f.cabled_gbps)} cabled)" if f.cabled_gbps < f.down_gbps else ""
        bw = f"per domain down {_tbps(f.down_gbps)}{cabled}" + (f", up {_tbps(f.up_gbps)}, {ratio_text(f.ratio)}"
                                                        if f.ratio is not None else ", top tier (no uplinks)")
        out.append(f"tier {f.level} {f.name}: {what}, {f.switches} switch{'es' * (f.switches != 1)} ({planes}), {bw}")
    return out


def _tbps(gbps: float) -> str:
    return f"{gbps / 1000:g} Tb/s" if gbps >= 1000 else f"{gbps:g} Gb/s"


def ratio_text(ratio: float) -> str:
    """``3:1``, ``1:1``, ``1:2`` (more up than down), or ``1.5:1``."""
    if ratio >= 1:
        return f"{round(ratio, 2):g}:1"
    return f"1:{round(1 / ratio, 2):g}"


def island_names(c: Cluster) -> list[str]:
    """A name per island: its top switch (climbing first parents) in a tree, else the top
    node of :func:`~rankmap.topology.tiers.structure` holding it (the top block of a block
    topology, "spine" for the flat spine).

    Examples
    --------
    >>> from rankmap.topology.slurm_block import parse_slurm_block
    >>> c = parse_slurm_block("BlockName=b1 Nodes=n[1-4]\\nBlockName=b2 Nodes=n[5-8]\\nBlockSizes=4,8",
    ...                       "t.conf").cluster
    >>> island_names(c)
    ['8-host block 1']
    """
    if c.switches is None:
        levels = structure(c)
        if not levels:
            return [island[0] for island in c.islands()]
        top = {g: node.name for node in levels[-1] for g in groups_under(levels, node)}
        return [top.get(island[0], island[0]) for island in c.islands()]
    up = parents(c)
    names = []
    for island in c.islands():
        node = island[0]
        while node in up:
            node = up[node][0]
        names.append(node)
    return names

