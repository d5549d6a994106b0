"""Cluster spec files (YAML) <-> :class:`~topology.model.Cluster`.

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
    availability:
      busy: "node[003,017]"            # hostlists
      failed: "node042"

Unknown keys and bad values raise :class:`~topology.errors.SpecError` naming FILE:LINE
and the key path.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import SpecError, TopologyError
from .hostnames import compress_hostlist, expand_hostlist, natural_key
from .model import Cluster, Host, Links, Spine, TorGroup
from .yamlio import Fields, parse_yaml, read_yaml

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
    top = Fields(data, source).only("name", "hosts", "links", "spine", "tor_groups", "availability")
    name = top.str("name", "cluster")
    defaults = top.sub("hosts")
    gpus = defaults.int("gpus", 8, minimum=1)
    nics = defaults.int("nics", gpus, minimum=1)
    defaults.done()
    links = _links(top.sub("links"))
    spine_f = top.sub("spine")
    spine = Spine(switches=spine_f.int("switches", links.tor_uplinks, minimum=1))
    spine_f.done()
    groups, hosts = _tor_groups(top, gpus, nics)
    states = _availability(top.sub("availability"), {h.name for h in hosts})
    top.done()
    hosts = [Host(name=h.name, gpus=h.gpus, nics=h.nics, tor_group=h.tor_group,
                  state=states.get(h.name, "free")) for h in hosts]
    try:
        return Cluster(name=name, tor_groups=tuple(groups), hosts=tuple(hosts), links=links, spine=spine)
    except TopologyError as exc:
        raise SpecError(str(exc), source=source) from None


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
    for i, entry in enumerate(entries):
        line = entries.item_lines[i] if hasattr(entries, "item_lines") else None
        f = Fields(entry, top.source, f"tor_groups[{i}]", line).only("name", "capacity", "hosts")
        gname = f.str("name", f"tg{i:02d}")
        capacity = f.int("capacity", 64, minimum=1)
        # A group's hosts are kept in natural name order: the order inside a hostlist
        # carries no meaning, and a canonical order makes export -> import exact.
        members = sorted(_group_hosts(f, gpus, nics), key=lambda m: natural_key(m[0]))
        f.done()
        if gname in {g.name for g in groups}:
            raise f.error("name", f"ToR group {gname!r} is defined twice")
        for name, g, n in members:
            if name in where:
                raise f.error("hosts", f"host {name!r} is already in ToR group {where[name]!r}")
            where[name] = gname
            hosts.append(Host(name=name, gpus=g, nics=n, tor_group=gname))
        if len(members) > capacity:
            raise f.error("hosts", f"{len(members)} hosts exceed the group's capacity of {capacity}")
        groups.append(TorGroup(name=gname, index=i, hosts=tuple(m[0] for m in members), capacity=capacity))
    return groups, hosts


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
            g = sub.int("gpus", gpus, minimum=1)
            n = sub.int("nics", nics if g == gpus else min(nics, g), minimum=1)
            sub.done()
            names = expand_hostlist(expr, source=f.source, line=sub.line_of("hosts"), key=sub.path("hosts"))
        else:
            names = expand_hostlist(item, source=f.source, line=lines[j], key=key)
            g, n = gpus, nics
        out.extend((name, g, n) for name in names)
    return out


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
    common_gpus = max((h.gpus for h in cluster.hosts), key=[h.gpus for h in cluster.hosts].count)
    common_nics = max((h.nics for h in cluster.hosts), key=[h.nics for h in cluster.hosts].count)
    doc: dict = {
        "name": cluster.name,
        "hosts": {"gpus": common_gpus, "nics": common_nics},
        "links": {k: (int(v) if float(v).is_integer() else v) for k, v in vars(cluster.links).items()},
        "spine": vars(cluster.spine),
        "tor_groups": [],
    }
    for group in cluster.tor_groups:
        doc["tor_groups"].append({"name": group.name, "capacity": group.capacity,
                                  "hosts": _hosts_entry(cluster, group.hosts, common_gpus, common_nics)})
    avail = {}
    for state in ("busy", "failed"):
        names = [h.name for h in cluster.hosts if h.state == state]
        if names:
            avail[state] = compress_hostlist(names)
    if avail:
        doc["availability"] = avail
    return yaml.safe_dump(doc, sort_keys=False, width=100)


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
    for (g, n), run in runs:
        expr = compress_hostlist(run)
        if sorted(expand_hostlist(expr)) != sorted(run):
            exprs = run
        else:
            exprs = [expr]
        for e in exprs:
            items.append(e if (g, n) == (gpus, nics) else {"hosts": e, "gpus": g, "nics": n})
    return items[0] if len(items) == 1 else items
