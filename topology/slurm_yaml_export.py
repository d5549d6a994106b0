"""Cluster -> Slurm topology.yaml (Slurm 25.05 and later).

The writer behind ``rankmap topo export --to slurm-yaml``: the cluster as one ``tree`` or
``block`` topology, and the other topologies of the file it was imported from at their
places, so that :func:`~rankmap.topology.slurm_yaml.parse_slurm_yaml` reads the same
cluster back. Scalars are written plain where YAML reads them back as the same string,
else double-quoted.

References
----------
topology.yaml(5), https://slurm.schedmd.com/topology.yaml.html
"""

from __future__ import annotations

import json

import yaml

from rankmap.errors import SpecError
from rankmap.topology.model import Cluster, SlurmTopology, Switch
from rankmap.topology.slurm_block import block_lines
from rankmap.topology.slurmconf import check_switch_name, compress_names
from rankmap.topology.sources import SLURM_VERSION, slurm_release

__all__ = ["export_slurm_yaml", "TOPOLOGY_YAML_SINCE", "ITEM_KEYS"]

#: The first Slurm release that reads topology.yaml (25.05).
TOPOLOGY_YAML_SINCE = (25, 5, 0)
#: Per topology kind: the key of its item list, and each item key with its topology.conf name.
ITEM_KEYS = {"tree": ("switches", {"switch": "SwitchName", "children": "Switches", "nodes": "Nodes",
                                    "link_speed": "LinkSpeed"}),
              "block": ("blocks", {"block": "BlockName", "nodes": "Nodes"})}


def export_slurm_yaml(cluster: Cluster, slurm_version: str = SLURM_VERSION) -> str:
    """Write a topology.yaml: the cluster as a topology named after it, and the other
    topologies of the file it was imported from (``Cluster.slurm_topologies``) at their
    places. The cluster's topology is ``cluster_default`` unless a kept one is.

    A cluster with block sizes is written as a ``block`` topology (groups are blocks, in
    order), else as a ``tree`` (leaves in group order, then the switches above; a cluster
    without a switch tree gets one root ``spine`` over all groups, as
    :func:`~rankmap.topology.slurm.export_slurm_tree` does). :func:`~rankmap.topology.slurm_yaml.parse_slurm_yaml`
    reads the same cluster back.

    Raises
    ------
    SpecError
        ``slurm_version`` before 25.05, a name Slurm cannot read, an empty cluster, or
        block rules the target release refuses.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("name: f\\ntor_groups: [{name: l1, hosts: 'n[08-09]'}, {name: l2, hosts: n10}]")
    >>> print(export_slurm_yaml(c), end="")
    # topology.yaml (Slurm 25.05+) for cluster 'f', written by rankmap
    - topology: f
      cluster_default: true
      tree:
        switches:
          - switch: l1
            nodes: n[08-09]
          - switch: l2
            nodes: n10
          - switch: spine
            children: l[1-2]
    """
    if slurm_release(slurm_version) < TOPOLOGY_YAML_SINCE:
        raise SpecError(f"Slurm {slurm_version} does not read topology.yaml (25.05 and later do): "
                        "export topology.conf (--to slurm or --to slurm-block)")
    if not cluster.tor_groups:
        raise SpecError(f"cluster {cluster.name!r} has no ToR groups: refusing to write an empty topology.yaml")
    why = check_switch_name(cluster.name)
    if why:
        raise SpecError(f"cannot write {cluster.name!r} as a Slurm topology name: {why}")
    own_default = not any(t.default for t in cluster.slurm_topologies)
    own = [f"- topology: {_scalar(cluster.name)}", f"  cluster_default: {'true' if own_default else 'false'}"]
    if cluster.block_sizes is not None:
        if len(cluster.islands()) > 1:
            raise SpecError(f"cluster {cluster.name!r} has islands; a block topology cannot keep them apart")
        sizes, rows = block_lines(cluster, slurm_version)
        own += ["  block:", f"    block_sizes: [{', '.join(map(str, sizes))}]", "    blocks:"]
        items = [{"block": name, **({"nodes": nodes} if nodes else {})} for name, nodes in rows]
    else:
        own += ["  tree:", "    switches:"]
        items = _tree_items(cluster)
    own += _item_lines(items)
    kept = {t.position: _kept_lines(t) for t in cluster.slurm_topologies}
    place = next(i for i in range(len(kept) + 1) if i not in kept)
    blocks = [lines for _, lines in sorted({**kept, place: own}.items())]
    header = f"# topology.yaml (Slurm 25.05+) for cluster {cluster.name!r}, written by rankmap"
    return "\n".join([header] + [line for lines in blocks for line in lines]) + "\n"


def _item_lines(items) -> list[str]:
    out = []
    for item in items:
        for i, (key, value) in enumerate(item.items()):
            out.append(("      - " if i == 0 else "        ") + f"{key}: {_scalar(value)}")
    return out


def _kept_lines(t: SlurmTopology) -> list[str]:
    why = check_switch_name(t.name)
    if why:
        raise SpecError(f"cannot write {t.name!r} as a Slurm topology name: {why}")
    out = [f"- topology: {_scalar(t.name)}", f"  cluster_default: {'true' if t.default else 'false'}"]
    if t.kind == "flat":
        return out + ["  flat: true"]
    out.append(f"  {t.kind}:")
    if t.block_sizes is not None:
        out.append(f"    block_sizes: [{', '.join(map(str, t.block_sizes))}]")
    out.append(f"    {ITEM_KEYS[t.kind][0]}:")
    return out + _item_lines([dict(item) for item in t.items])


def _scalar(value) -> str:
    """``value`` as a YAML scalar: plain when it reads back as the same string, else double-quoted."""
    if isinstance(value, int):
        return str(value)
    try:
        plain = yaml.safe_load(value) == value and ": " not in value and " #" not in value
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value)


def _tree_items(cluster: Cluster) -> list[dict]:
    switches = cluster.switches
    if switches is None:
        taken = {g.name for g in cluster.tor_groups}
        root = next(n for n in ("spine", *(f"spine{i}" for i in range(1, len(taken) + 2))) if n not in taken)
        switches = (Switch(name=root, children=tuple(g.name for g in cluster.tor_groups)),)
    items = []
    for group in cluster.tor_groups:
        item = {"switch": _name(group.name)}
        if group.hosts:
            item["nodes"] = compress_names(group.hosts)
        if group.link_speed is not None:
            item["link_speed"] = group.link_speed
        items.append(item)
    for sw in switches:
        item = {"switch": _name(sw.name), "children": compress_names(_name(c) for c in sw.children)}
        if sw.link_speed is not None:
            item["link_speed"] = sw.link_speed
        items.append(item)
    return items


def _name(name: str) -> str:
    why = check_switch_name(name)
    if why:
        raise SpecError(f"cannot write {name!r} as a Slurm switch name: {why}")
    return name
