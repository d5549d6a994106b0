"""The switch tree above the ToR groups: parents, levels, hosts below a switch, blocks.

Tree-shaped topology sources (Slurm topology/tree, Kubernetes label layers, Volcano
HyperNodes) describe a fabric as switches over leaf switches. rankmap keeps the leaves as
ToR groups and the switches above them as :attr:`Cluster.switches
<rankmap.topology.model.Cluster.switches>`; these helpers read that tree. Levels follow Slurm's
``scontrol show topology``: a leaf (ToR group) is level 0, a switch one more than its
highest child.

Slurm's topology/block keeps no switches: the ToR groups are base blocks and
:func:`block_levels` aggregates contiguous runs of them as Slurm does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from rankmap.errors import TopologyError
from rankmap.topology.hostnames import natural_key

if TYPE_CHECKING:  # the model imports find_cycle from here
    from rankmap.topology.model import Cluster

__all__ = ["name_key", "find_cycle", "check_switch_tree", "check_block_sizes", "parents", "roots", "switch_levels", "tiers", "hosts_under",
           "path_to", "block_levels", "block_runs"]


def name_key(name: str) -> tuple:
    """Canonical order of host and switch names: natural order, then the text itself, so
    names that differ only in zero padding (``n0``, ``n00``) still have one order.

    Examples
    --------
    >>> sorted(["n10", "n00", "n9", "n0"], key=name_key)
    ['n0', 'n00', 'n9', 'n10']
    """
    return (natural_key(name), name)


def find_cycle(children: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle in a child graph, as ``[a, b, ..., a]``, or None if there is none.

    Examples
    --------
    >>> find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]})
    ['a', 'b', 'c', 'a']
    >>> find_cycle({"a": ["b", "c"], "b": ["c"]}) is None
    True
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in children:
        if state.get(start):
            continue
        path = [start]
        stack = [iter(children.get(start, ()))]
        state[start] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append(iter(children.get(child, ())))
    return None


def parents(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """``{name: parent switch names}`` for every ToR group and switch that has a parent."""
    out: dict[str, list[str]] = {}
    for sw in cluster.switches or ():
        for child in sw.children:
            out.setdefault(child, []).append(sw.name)
    return {k: tuple(v) for k, v in out.items()}


def roots(cluster: Cluster) -> tuple[str, ...]:
    """Switches and ToR groups without a parent, switches first, in cluster order."""
    has_parent = parents(cluster)
    names = [s.name for s in cluster.switches or ()] + [g.name for g in cluster.tor_groups]
    return tuple(n for n in names if n not in has_parent)


def switch_levels(cluster: Cluster) -> dict[str, int]:
    """Level of every ToR group (0) and switch (1 + its highest child), as slurmctld counts.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: l1, hosts: a1}, {name: l2, hosts: a2}]\\n"
    ...                   "switches: [{name: sp, children: [l1]}, {name: top, children: [sp, l2]}]")
    >>> switch_levels(c)
    {'l1': 0, 'l2': 0, 'sp': 1, 'top': 2}
    """
    level = {g.name: 0 for g in cluster.tor_groups}
    pending = {s.name: s.children for s in cluster.switches or ()}
    while pending:  # the model has no cycles, so every pass resolves at least one switch
        for name, kids in list(pending.items()):
            if all(k in level for k in kids):
                level[name] = 1 + max(level[k] for k in kids)
                del pending[name]
    return level


def tiers(cluster: Cluster) -> int:
    """Switch tiers: leaves plus the levels above them (2 when a spine joins all groups)."""
    if cluster.switches is None:
        return 2
    return 1 + max(switch_levels(cluster).values(), default=0)


def hosts_under(cluster: Cluster, name: str) -> tuple[str, ...]:
    """Hosts below switch or ToR group ``name``, in cluster host order."""
    kids = {s.name: s.children for s in cluster.switches or ()}
    groups: set[str] = set()
    todo, seen = [name], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in kids:
            todo.extend(kids[n])
        else:
            groups.add(n)
    return tuple(h.name for h in cluster.hosts if h.tor_group in groups)


def path_to(cluster: Cluster, group: str) -> tuple[str, ...]:
    """Switch names from the root down to ``group`` (included), for a single-parent tree.

    Raises
    ------
    ValueError
        If some switch on the way has more than one parent.
    """
    up = parents(cluster)
    path = [group]
    while path[-1] in up:
        above = up[path[-1]]
        if len(above) > 1:
            raise ValueError(f"{path[-1]!r} has {len(above)} parents ({', '.join(above)})")
        path.append(above[0])
    return tuple(reversed(path))


def block_levels(cluster: Cluster) -> list[tuple[int, list[tuple[str, ...]]]]:
    """Aggregated blocks of a topology/block cluster, per level, as slurmctld builds them.

    Level sizes are ``block_sizes[i] / block_sizes[0]`` base blocks; blocks are taken in
    order, ``n`` at a time, and a last partial run is kept only when it is larger than
    the level below.

    Returns
    -------
    list of (int, list of tuple of str)
        ``(size in hosts, [block names of each aggregated block])`` per level.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("block_sizes: [1, 2]\\ntor_groups: [{name: b1, hosts: n1}, "
    ...                   "{name: b2, hosts: n2}, {name: b3, hosts: n3}]")
    >>> block_levels(c)
    [(1, [('b1',), ('b2',), ('b3',)]), (2, [('b1', 'b2')])]
    """
    return block_runs([g.name for g in cluster.tor_groups], cluster.block_sizes or ())


def block_runs(names: list[str], sizes) -> list[tuple[int, list[tuple[str, ...]]]]:
    """:func:`block_levels` of base blocks ``names`` (in order) under ``sizes`` (BlockSizes)."""
    out: list[tuple[int, list[tuple[str, ...]]]] = []
    prev = 0
    for size in sizes:
        n = size // sizes[0]
        runs = []
        for start in range(0, len(names), n):
            run = tuple(names[start:start + n])
            if len(run) < n and prev >= len(run):
                continue
            runs.append(run)
        out.append((size, runs))
        prev = n
    return out


def check_switch_tree(switches, groups: set[str], has_blocks: bool) -> None:
    """Raise TopologyError unless ``switches`` (or None) is a valid tree over the ToR ``groups``:
    unique names, known children listed once, no cycle, and no block sizes beside it."""
    if switches is None:
        return
    if has_blocks:
        raise TopologyError("a cluster has either a switch tree or block sizes, not both")
    names = [s.name for s in switches]
    known = groups | set(names)
    seen: set[str] = set()
    for sw in switches:
        if sw.name in seen or sw.name in groups:
            raise TopologyError(f"switch {sw.name!r} is defined twice (or is also a ToR group)")
        seen.add(sw.name)
        if not sw.children:
            raise TopologyError(f"switch {sw.name!r} has no children")
        if len(set(sw.children)) != len(sw.children):
            raise TopologyError(f"switch {sw.name!r} lists a child twice")
        for child in sw.children:
            if child not in known or child == sw.name:
                raise TopologyError(f"switch {sw.name!r} has invalid child {child!r}")
    cycle = find_cycle({sw.name: sw.children for sw in switches})
    if cycle:
        raise TopologyError("switch tree has a cycle: " + " -> ".join(cycle))


def check_block_sizes(sizes) -> None:
    """Raise TopologyError unless ``sizes`` (or None) are Slurm BlockSizes: ascending, distinct,
    the base size times powers of two."""
    if sizes is None:
        return
    if not sizes or any(not isinstance(b, int) or b < 1 for b in sizes):
        raise TopologyError(f"block sizes must be positive integers, got {sizes!r}")
    for b in sizes:
        ratio, rest = divmod(b, sizes[0])
        if rest or ratio & (ratio - 1) or b < sizes[0]:
            raise TopologyError(f"block size {b} is not the base block size {sizes[0]} "
                                "times a power of two")
    if list(sizes) != sorted(set(sizes)):
        raise TopologyError(f"block sizes must be ascending and distinct, got {list(sizes)}")
