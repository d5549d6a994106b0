"""Cluster spec files (YAML) <-> :class:`~rankmap.topology.model.Cluster`.

Format (every key but ``tor_groups`` is optional; defaults shown)::

    name: my-cluster
    hosts: {gpus: 8, nics: 8}          # defaults for every host
    links:
      nic_gbps: 200                    # one rail NIC
      tor_downlink_gbps: 200           # one host-facing ToR port
      tor_uplinks: 32                  # uplinks per rail ToR switch
      tor_uplink_gbps: 400
      nvlink_gbps: 2400
    spine: {switches: 32}
    tor_groups:
      - name: tg00
        capacity: 64                   # host ports per rail ToR
        hosts: "node[001-064]"         # hostlist, or a list of hostlists or
                                       # {hosts: HOSTLIST, gpus: N, nics: N}
        link_speed: 100                # optional: Slurm LinkSpeed of this leaf switch
    switches:                          # optional: the switch tree above the ToR groups
      - name: spine1                   # (from a tree topology; islands stay apart)
        children: [tg00, tg01]         # ToR groups or switches
        link_speed: 100                # optional
    block_sizes: [64, 128]             # optional: Slurm topology/block BlockSizes (hosts)
    slurm_topologies:                  # optional: the other topologies of an imported Slurm
      - topology: nvl                  # topology.yaml (same grammar, plus position: the place
        position: 1                    # in the file), written back by topo export --to slurm-yaml
        cluster_default: false
        block: {block_sizes: [2], blocks: [{block: b1, nodes: "node[001-002]"}]}
    tiers:                             # optional: switch tiers above the rail ToRs, lowest first,
      - name: spine                    # one per level of the switch tree (or block levels, or
        switches: 32                   # the one spine); switches per domain (per rail plane)
        down_ports: 32                 # ports per switch facing the tier below
        up_ports: 32                   # ports per switch facing the tier above (default 0: top)
        down_gbps: 400                 # default links.tor_uplink_gbps
        up_gbps: 400                   # default down_gbps
        planes: shared                 # shared (rails share the switches) or rail (one plane per rail)
    availability:
      busy: "node[003,017]"            # hostlists
      failed: "node042"

Unknown keys and bad values raise :class:`~rankmap.errors.SpecError` naming FILE:LINE
and the key path.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import yaml

from rankmap.errors import SpecError, TopologyError
from rankmap.names import host_budget
from rankmap.topology.hostnames import compress_hostlist, expand_hostlist
from rankmap.topology.model import MAX_HOST_GPUS, Cluster, Host, Links, Spine, Switch, TorGroup
from rankmap.topology.tiers import PLANES, Tier, tier_name_problem
from rankmap.topology.tree import find_cycle, name_key
from rankmap.yamlio import Fields, parse_yaml, read_yaml

__all__ = ["load_cluster", "parse_cluster", "cluster_from_data", "cluster_to_yaml"]


def load_cluster(path: str | Path) -> Cluster:
    """Read a cluster spec YAML file; see the module docstring for the format.

    Raises
    ------
    SpecError
        Unreadable file, bad YAML, unknown key or bad value (message names FILE:LINE and key).
    """
    return cluster_from_data(read_yaml(path), str(path))


def parse_cluster(text: str, source: str = "<string>") -> Cluster:
    """Parse a cluster spec from YAML text."""
    return cluster_from_data(parse_yaml(text, source), source)


def cluster_from_data(data, source: str) -> Cluster:
    """Build a Cluster from parsed YAML (``LocMap``) or a plain dict."""
    with host_budget():  # every hostlist of the file counts against one host limit
        return _cluster_from_data(data, source)


def _cluster_from_data(data, source: str) -> Cluster:
    top = Fields(data, source).only("name", "hosts", "links", "spine", "tor_groups", "switches",
                                    "block_sizes", "tiers", "availability", "slurm_topologies")
    name = top.name("name", "cluster name", "cluster")
    defaults = top.sub("hosts")
    gpus = defaults.int("gpus", 8, minimum=1, maximum=MAX_HOST_GPUS)
    nics = defaults.int("nics", gpus, minimum=1, maximum=MAX_HOST_GPUS)
    defaults.done()
    links = _links(top.sub("links"))
    spine_f = top.sub("spine")
    spine = Spine(switches=spine_f.int("switches", links.tor_uplinks, minimum=1))
    spine_f.done()
    groups, hosts = _tor_groups(top, gpus, nics)
    switches = _switches(top, {g.name for g in groups})
    block_sizes = _block_sizes(top)
    tiers, tier_lines = _tiers(top, links.tor_uplink_gbps)
    states = _availability(top.sub("availability"), {h.name for h in hosts})
    lines = _availability_lines(top)
    kept = _slurm_topologies(top)
    top.done()
    hosts = [Host(name=h.name, gpus=h.gpus, nics=h.nics, tor_group=h.tor_group,
                  state=states.get(h.name, "free")) for h in hosts]
    try:
        cluster = Cluster(name=name, tor_groups=tuple(groups), hosts=tuple(hosts), links=links, spine=spine,
                          switches=switches, block_sizes=block_sizes, slurm_topologies=kept, source=source,
                          lines=lines)
    except TopologyError as exc:
        raise SpecError(str(exc), source=source) from None
    if tiers is None:
        return cluster
    try:  # checked apart, so a tier that does not fit the fabric is reported at tiers:
        return dataclasses.replace(cluster, tiers=tiers)
    except TopologyError as exc:  # located at the tier the message names first, else at tiers:
        named = re.search(r"tier ('[^']*')", str(exc))
        i = next((i for i, t in enumerate(tiers) if named and repr(t.name) == named.group(1)), None)
        if i is None:
            raise top.error("tiers", str(exc)) from None
        raise SpecError(str(exc), source=source, line=tier_lines[i], key=f"tiers[{i}]") from None


def _slurm_topologies(top: Fields) -> tuple:
    if not top.has("slurm_topologies"):
        return ()
    from rankmap.topology.slurm_yaml import slurm_topologies_from_data  # it reads topology.yaml: import on use

    return slurm_topologies_from_data(top.seq("slurm_topologies"), top.source)


def _links(f: Fields) -> Links:
    d = Links()
    links = Links(
        nic_gbps=float(f.number("nic_gbps", d.nic_gbps)),
        tor_downlink_gbps=float(f.number("tor_downlink_gbps", d.tor_downlink_gbps)),
        tor_uplinks=f.int("tor_uplinks", d.tor_uplinks, minimum=1),
        tor_uplink_gbps=float(f.number("tor_uplink_gbps", d.tor_uplink_gbps)),
        nvlink_gbps=float(f.number("nvlink_gbps", d.nvlink_gbps)),
    )
    f.done()
    return links


def _tor_groups(top: Fields, gpus: int, nics: int) -> tuple[list[TorGroup], list[Host]]:
    entries = top.seq("tor_groups")
    if not entries:
        raise top.error("tor_groups", "needs at least one ToR group")
    groups: list[TorGroup] = []
    hosts: list[Host] = []
    where: dict[str, str] = {}
    named: set[str] = set()
    for i, entry in enumerate(entries):
        line = entries.item_lines[i] if hasattr(entries, "item_lines") else None
        f = Fields(entry, top.source, f"tor_groups[{i}]", line).only("name", "capacity", "hosts", "link_speed")
        gname = f.name("name", "ToR group name", f"tg{i:02d}")
        capacity = f.int("capacity", 64, minimum=1)
        link_speed = f.int("link_speed", None, minimum=0)
        # A group's hosts are kept in natural name order: the order inside a hostlist
        # carries no meaning, and a canonical order makes export -> import exact. Names
        # equal in natural order (n0, n00) are ordered by their text.
        members = sorted(_group_hosts(f, gpus, nics), key=lambda m: name_key(m[0]))
        f.done()
        if gname in named:
            raise f.error("name", f"ToR group {gname!r} is defined twice")
        named.add(gname)
        for name, g, n in members:
            if name in where:
                raise f.error("hosts", f"host {name!r} is already in ToR group {where[name]!r}")
            where[name] = gname
            hosts.append(Host(name=name, gpus=g, nics=n, tor_group=gname))
        if len(members) > capacity:
            raise f.error("hosts", f"{len(members)} hosts exceed the group's capacity of {capacity}")
        groups.append(TorGroup(name=gname, index=i, hosts=tuple(m[0] for m in members), capacity=capacity,
                               link_speed=link_speed))
    return groups, hosts


def _switches(top: Fields, groups: set[str]) -> tuple[Switch, ...] | None:
    """The optional switch tree; children are kept in natural name order (export -> import exact)."""
    if not top.has("switches"):
        return None
    entries = top.seq("switches")
    switches: list[Switch] = []
    where: dict[str, Fields] = {}
    for i, entry in enumerate(entries):
        f = Fields(entry, top.source, f"switches[{i}]", entries.item_lines[i] if hasattr(entries, "item_lines")
                   else None).only("name", "children", "link_speed")
        name = f.name("name", "switch name")
        if name in where or name in groups:
            raise f.error("name", f"switch {name!r} is defined twice (or is also a ToR group)")
        kids = f.raw("children")
        if isinstance(kids, str):
            kids = expand_hostlist(kids, source=f.source, line=f.line_of("children"), key=f.path("children"))
        if not isinstance(kids, list) or not kids or not all(isinstance(k, str) and k for k in kids):
            raise f.error("children", "expected a non-empty list of switch or ToR group names")
        if len(set(kids)) != len(kids):
            raise f.error("children", "a child is listed twice")
        link_speed = f.int("link_speed", None, minimum=0)
        f.done()
        where[name] = f
        switches.append(Switch(name=name, children=tuple(sorted(kids, key=name_key)), link_speed=link_speed))
    for sw in switches:
        for child in sw.children:
            if child == sw.name or (child not in where and child not in groups):
                raise where[sw.name].error("children", f"unknown switch or ToR group {child!r}")
    cycle = find_cycle({sw.name: sw.children for sw in switches})
    if cycle:
        raise where[cycle[0]].error("children", "switch tree has a cycle: " + " -> ".join(cycle))
    return tuple(switches)


def _block_sizes(top: Fields) -> tuple[int, ...] | None:
    if not top.has("block_sizes"):
        return None
    sizes = top.seq("block_sizes")
    if not sizes or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes):
        raise top.error("block_sizes", f"expected a non-empty list of positive integers, got {sizes!r}")
    return tuple(sizes)


def _tiers(top: Fields, uplink_gbps: float) -> tuple[tuple[Tier, ...] | None, list]:
    """The optional ``tiers:`` list, lowest tier first, and each entry's line (the model checks the fabric)."""
    if not top.has("tiers"):
        return None, []
    entries = top.seq("tiers")
    tiers: list[Tier] = []
    for i, entry in enumerate(entries):
        f = Fields(entry, top.source, f"tiers[{i}]", entries.item_lines[i] if hasattr(entries, "item_lines")
                   else None).only("name", "switches", "down_ports", "up_ports", "down_gbps", "up_gbps", "planes")
        name = f.str("name")
        if name.lower() in {t.name.lower() for t in tiers}:
            raise f.error("name", f"tier {name!r} is listed twice")
        if tier_name_problem(name):
            raise f.error("name", tier_name_problem(name))
        down_gbps = float(f.number("down_gbps", uplink_gbps))
        tiers.append(Tier(name=name, switches=f.int("switches", minimum=1), down_ports=f.int("down_ports", minimum=1),
                          up_ports=f.int("up_ports", 0, minimum=0), down_gbps=down_gbps,
                          up_gbps=float(f.number("up_gbps", down_gbps)), planes=f.choice("planes", PLANES, "shared")))
        f.done()
    return tuple(tiers), [getattr(entries, "item_lines", [None] * len(entries))[i] for i in range(len(entries))]


def _group_hosts(f: Fields, gpus: int, nics: int) -> list[tuple[str, int, int]]:
    value = f.raw("hosts")
    items = value if isinstance(value, list) else [value]
    lines = getattr(value, "item_lines", None) or [f.line_of("hosts")] * len(items)
    out: list[tuple[str, int, int]] = []
    for j, item in enumerate(items):
        key = f.path("hosts") + (f"[{j}]" if isinstance(value, list) else "")
        if isinstance(item, dict):
            sub = Fields(item, f.source, key, lines[j]).only("hosts", "gpus", "nics")
            expr = sub.str("hosts")
            g = sub.int("gpus", gpus, minimum=1, maximum=MAX_HOST_GPUS)
            n = sub.int("nics", nics if g == gpus else min(nics, g), minimum=1, maximum=MAX_HOST_GPUS)
            sub.done()
            names = expand_hostlist(expr, source=f.source, line=sub.line_of("hosts"), key=sub.path("hosts"))
        else:
            names = expand_hostlist(item, source=f.source, line=lines[j], key=key)
            g, n = gpus, nics
        out.extend((name, g, n) for name in names)
    return out


def _availability_lines(top: Fields) -> dict[str, int]:
    """Lines of ``availability`` and its ``busy``/``failed`` keys, for messages about host states."""
    if not top.has("availability"):
        return {}
    avail = top.sub("availability")
    keys = [("availability", top, "availability")] + [(f"availability.{k}", avail, k) for k in ("busy", "failed")]
    return {path: f.line_of(key) for path, f, key in keys if f.has(key) and f.line_of(key)}


def _availability(f: Fields, known: set[str]) -> dict[str, str]:
    states: dict[str, str] = {}
    for state in ("busy", "failed"):
        if not f.has(state):
            continue
        expr = f.raw(state)
        if expr in (None, ""):
            continue
        for name in expand_hostlist(expr, source=f.source, line=f.line_of(state), key=f.path(state)):
            if name not in known:
                raise f.error(state, f"host {name!r} is not in any ToR group")
            if name in states:
                raise f.error(state, f"host {name!r} is listed as both {states[name]} and {state}")
            states[name] = state
    f.done()
    return states


def cluster_to_yaml(cluster: Cluster) -> str:
    """Write a cluster back as spec YAML; ``parse_cluster(cluster_to_yaml(c)) == c``.

    Hosts are written per ToR group as compressed hostlists (python-hostlist keeps zero
    padding and never merges distinct hosts); a run that would not expand back to exactly
    the same hosts is written as a list of names.
    """
    common_gpus = _most_common(h.gpus for h in cluster.hosts)
    common_nics = _most_common(h.nics for h in cluster.hosts)
    doc: dict = {
        "name": cluster.name,
        "hosts": {"gpus": common_gpus, "nics": common_nics},
        "links": {k: _num(v) for k, v in vars(cluster.links).items()},
        "spine": vars(cluster.spine),
        "tor_groups": [],
    }
    for group in cluster.tor_groups:
        entry = {"name": group.name, "capacity": group.capacity,
                 "hosts": _hosts_entry(cluster, group.hosts, common_gpus, common_nics)}
        if group.link_speed is not None:
            entry["link_speed"] = group.link_speed
        doc["tor_groups"].append(entry)
    if cluster.switches is not None:
        doc["switches"] = [{"name": s.name, "children": list(s.children)}
                           | ({"link_speed": s.link_speed} if s.link_speed is not None else {})
                           for s in cluster.switches]
    if cluster.block_sizes is not None:
        doc["block_sizes"] = list(cluster.block_sizes)
    if cluster.tiers is not None:
        doc["tiers"] = [{"name": t.name, "switches": t.switches, "down_ports": t.down_ports, "up_ports": t.up_ports,
                         "down_gbps": _num(t.down_gbps), "up_gbps": _num(t.up_gbps), "planes": t.planes}
                        for t in cluster.tiers]
    if cluster.slurm_topologies:
        from rankmap.topology.slurm_yaml import slurm_topology_data

        doc["slurm_topologies"] = [slurm_topology_data(t) for t in cluster.slurm_topologies]
    avail = {}
    for state in ("busy", "failed"):
        names = [h.name for h in cluster.hosts if h.state == state]
        if names:
            avail[state] = compress_hostlist(names)
    if avail:
        doc["availability"] = avail
    return yaml.safe_dump(doc, sort_keys=False, width=100)


def _most_common(values, default: int = 8) -> int:
    """The value seen most often, the first seen among equals (``default`` if none), in one pass."""
    counts = Counter(values)
    return counts.most_common(1)[0][0] if counts else default


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _hosts_entry(cluster: Cluster, names: tuple[str, ...], gpus: int, nics: int):
    runs: list[list[str]] = []
    for name in names:
        h = cluster.host(name)
        shape = (h.gpus, h.nics)
        if runs and runs[-1][0] == shape:
            runs[-1][1].append(name)
        else:
            runs.append([shape, [name]])
    items = []
    if not names:
        return []
    for (g, n), run in runs:
        expr = compress_hostlist(run)
        if sorted(expand_hostlist(expr)) != sorted(run):
            exprs = run
        else:
            exprs = [expr]
        for e in exprs:
            items.append(e if (g, n) == (gpus, nics) else {"hosts": e, "gpus": g, "nics": n})
    return items[0] if len(items) == 1 else items
