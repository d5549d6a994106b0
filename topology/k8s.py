"""Kubernetes node topology labels (``kubectl get nodes -o json``) -> Cluster (the writer back is
:mod:`rankmap.topology.k8s_export`).

Clouds and schedulers label each node with the network domains above it, top level
first:

- AWS: ``topology.k8s.aws/network-node-layer-1`` (top) ... ``-3``, and ``-4`` on some
  instance types. Layers are aligned from the top; the deepest layer a node has is its
  leaf, so a four-layer node is never taken to share a third-layer switch with a
  three-layer one.
- GKE: ``cloud.google.com/gce-topology-block``, ``-subblock``, ``-host``.
- Kueue Topology Aware Scheduling: any label keys, listed as the ``levels`` of a
  ``Topology`` object (:func:`parse_kueue_levels`) or given as ``ImportOptions.levels``.

A label value is only unique under its parent, so a domain is named by its whole path
of values joined with ``/`` (``nn-top0001/nn-mid0001/nn-bot0001``). The deepest domain
of a node becomes its ToR group; the domains above become switches. Levels that name
the host itself (``kubernetes.io/hostname``, ``gce-topology-host``) are not switches and
are dropped. GPUs come from ``status.allocatable`` (``nvidia.com/gpu``, ``amd.com/gpu``):
what the scheduler can hand out, which the device plugin lowers below ``status.capacity``
when a GPU is unhealthy [1]_, [2]_; a node whose allocatable count is below its capacity
(or its ``nvidia.com/gpu.count`` label) gets the allocatable count and a warning naming it.
Without ``allocatable`` the capacity, then the label, is used.

References
----------
.. [1] Kubernetes documentation, "Node Allocatable" and Node status ("Capacity and Allocatable").
   https://kubernetes.io/docs/reference/node/node-status/#capacity
.. [2] Kubernetes device plugins: a device reported Unhealthy is not allocatable.
   https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/

AWS EC2 instance topology, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology.html ;
Kueue Topology Aware Scheduling, https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/
"""

from __future__ import annotations

from rankmap.errors import SpecError
from rankmap.fileio import parse_json
from rankmap.topology.hostnames import check_hostname
from rankmap.topology.k8s_export import export_k8s_labels
from rankmap.topology.k8s_labels import AWS_LAYER, GKE_LEVELS, GPU_LABEL, GPU_RESOURCES, HOST_LEVELS
from rankmap.topology.kubectl_json import JsonLines, json_item_lines
from rankmap.topology.model import Switch
from rankmap.topology.sources import (
    Diagnostics,
    ImportOptions,
    ImportResult,
    Leaf,
    build_cluster,
    file_stem,
    join_top_domains,
    name_tiers,
    note_tiers,
    warn_odd_names,
)
from rankmap.topology.tiers import structure
from rankmap.topology.tree import name_key
from rankmap.yamlio import Fields, parse_yaml

__all__ = ["parse_k8s_nodes", "export_k8s_labels", "parse_kueue_levels", "json_item_lines", "LevelKey", "AWS_LAYER",
           "GKE_LEVELS"]



class LevelKey(str):
    """A level's label key that remembers where it was given (a Kueue file, line and key
    path), so that a key no node carries is reported there. A plain ``str`` level counts
    as given by the ``--levels`` flag.

    >>> k = LevelKey("blk", source="t.yaml", line=4, key="spec.levels[0].nodeLabel")
    >>> k, k.line
    ('blk', 4)
    """

    source: str | None
    line: int | None
    key: str

    def __new__(cls, value: str, *, source: str | None = None, line: int | None = None, key: str = "--levels"):
        self = super().__new__(cls, value)
        self.source, self.line, self.key = source, line, key
        return self


def parse_k8s_nodes(text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Read nodes with topology labels (JSON or YAML from ``kubectl get nodes``).

    Examples
    --------
    >>> import json
    >>> doc = {"items": [{"metadata": {"name": n, "labels": {AWS_LAYER + "1": "t", AWS_LAYER + "2": m}}}
    ...                  for n, m in [("a", "x"), ("b", "x"), ("c", "y")]]}
    >>> r = parse_k8s_nodes(json.dumps(doc), "nodes.json", ImportOptions(gpus=4))
    >>> [(g.name, g.hosts) for g in r.cluster.tor_groups]
    [('t/x', ('a', 'b')), ('t/y', ('c',))]
    """
    options = options or ImportOptions()
    diags = Diagnostics(options.strict)
    items, lines = _load(text, source)
    nodes = [_node(item, i, lines, source) for i, item in enumerate(items)]
    seen: dict[str, int] = {}
    for name, _, _, line in nodes:
        if name in seen:
            raise SpecError(f"node {name} is listed twice (first on line {seen[name]})", source=source,
                            line=line, key=f"metadata.name={name}")
        seen[name] = line
    levels = _levels(nodes, options, diags, source)
    leaves, switches = _domains(nodes, levels, options, diags, source)
    warn_odd_names(leaves, diags, source, seen, what="domain")
    keys = levels or _aws_keys(nodes)
    switches, root = join_top_domains(leaves, switches, options, diags, what=f"top-level domains ({keys[0]} values)")
    cluster = build_cluster(leaves, options, default_name=file_stem(source), source=source, switches=switches,
                            host_lines=seen)
    cluster = name_tiers(cluster, _tier_names(cluster, keys, root, diags))
    note_tiers(cluster, diags)
    if len(cluster.islands()) > 1:
        diags.note(f"{len(cluster.islands())} top-level domains: kept as separate islands "
                   "(--separate-top-domains)")
    return ImportResult(cluster=cluster, format="k8s-labels", source=source, warnings=tuple(diags.warnings),
                        notes=tuple(diags.notes))


def _tier_names(cluster, keys: tuple[str, ...], root: str | None, diags: Diagnostics):
    """Name each tier by the label key of the domains at that level, when they all share one.

    A domain is named by its path of label values, so its depth gives its key. Nodes of
    unequal depth (AWS: 3 layers on some, 4 on others) put domains of different label
    levels at one tier: that tier keeps its default name and a note says what it holds.
    """
    levels = structure(cluster)

    def key_of(domain: str) -> str:
        return "root" if domain == root else keys[domain.count("/")]

    def name(level: int) -> str | None:
        found = sorted({key_of(n.name) for n in levels[level - 1]})
        if len(found) > 1:
            diags.note(f"tier {level} holds domains of label levels {', '.join(found)} (nodes have unequal "
                       f"depth): named tier{level}")
        return found[0] if len(found) == 1 else None
    return name


def _domains(nodes, levels, options: ImportOptions, diags: Diagnostics,
             source: str) -> tuple[list[Leaf], tuple[Switch, ...]]:
    """Each node's deepest domain as a leaf; the domains above as switches. A domain is
    named by its whole path of label values (values are unique only under a parent)."""
    leaves: dict[str, Leaf] = {}
    children: dict[str, list[str]] = {}
    deeper: dict[str, str] = {}   # domain -> the first node under a domain below it
    for name, labels, capacity, line in nodes:
        path = _path(name, labels, levels, source, line)
        if not path:
            diags.warn(f"node {name} has no topology labels: left out", source=source, line=line, key=name)
            continue
        gpus = _gpus(name, labels, capacity, options, diags, source, line)
        if not gpus:
            continue
        ids = ["/".join(path[:k + 1]) for k in range(len(path))]
        for parent, child in zip(ids, ids[1:]):
            deeper.setdefault(parent, name)
            kids = children.setdefault(parent, [])
            if child not in kids:
                kids.append(child)
        leaves.setdefault(ids[-1], Leaf(name=ids[-1], hosts=[], line=line)).hosts.append((name, gpus))
    for leaf in leaves.values():
        if leaf.name in children:
            first = leaf.hosts[0][0]
            depth = leaf.name.count("/") + 1
            keys = levels or _aws_keys(nodes)
            missing = f" (it has no {keys[depth]} label)" if depth < len(keys) else ""
            raise SpecError(f"node {first} ends at domain {leaf.name}{missing} but node {deeper[leaf.name]} has "
                            "domains below it: a leaf cannot have children; label every node down to the same "
                            "level", source=source, line=leaf.line, key=first)
    switches = tuple(Switch(name=k, children=tuple(sorted(v, key=name_key))) for k, v in children.items())
    return list(leaves.values()), switches


def _load(text: str, source: str):
    """The node items and a function giving each item's line."""
    if not text.strip():
        raise SpecError("empty file: expected kubectl get nodes output", source=source, line=1)
    if text.lstrip()[:1] in "{[":
        doc = parse_json(text, source)  # strict: duplicate keys, huge integers, deep nesting refused
        lines = JsonLines(text, doc).item_line
    else:
        doc = parse_yaml(text, source)
        lines = None
    if isinstance(doc, dict) and "items" in doc:
        items = doc["items"]
    elif isinstance(doc, dict) and doc.get("kind") == "Node":
        items = [doc]
    else:
        items = doc
    if not isinstance(items, list):
        raise SpecError("expected a List of nodes (kubectl get nodes -o json)", source=source,
                        line=getattr(doc, "line", 1), key="items")
    if lines is None:
        item_lines = getattr(items, "item_lines", None) or [getattr(items, "line", 1)] * len(items)
        lines = item_lines.__getitem__
    return items, lines


def _node(item, index: int, lines, source: str):
    line = lines(index)
    where = f"items[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
        raise SpecError("expected a node with metadata", source=source, line=line, key=where)
    meta = item["metadata"]
    name = meta.get("name")
    if not isinstance(name, str) or check_hostname(name):
        why = check_hostname(name) if isinstance(name, str) else "missing"
        raise SpecError(f"bad node name {name!r}: {why}", source=source, line=line, key=f"{where}.metadata.name")
    labels = meta.get("labels") or {}
    status = item.get("status") or {}
    resources = {part: status.get(part) or {} for part in ("capacity", "allocatable")} if isinstance(status, dict) \
        else None
    if not isinstance(labels, dict) or resources is None or not all(isinstance(v, dict) for v in resources.values()):
        raise SpecError("labels, status.capacity and status.allocatable must be mappings", source=source, line=line,
                        key=name)
    return name, {str(k): str(v) for k, v in labels.items()}, resources, line


def _levels(nodes, options: ImportOptions, diags: Diagnostics, source: str) -> tuple[str, ...] | None:
    """Label keys top first; None means AWS layers (numbered, aligned per node)."""
    levels = options.levels
    if levels is None:
        keys = {k for _, labels, _, _ in nodes for k in labels}
        if any(k.startswith(AWS_LAYER) for k in keys):
            return None
        if GKE_LEVELS[0] in keys:
            levels = GKE_LEVELS
        else:
            raise SpecError(f"no topology labels found (AWS {AWS_LAYER}N or GKE {GKE_LEVELS[0]}): "
                            "pass --levels with the label keys, top level first", source=source, line=1)
    else:
        _check_levels_used(nodes, levels, source)
    dropped = [lv for lv in levels if lv in HOST_LEVELS]
    if dropped:
        diags.note(f"level {', '.join(dropped)} names the host itself, not a switch: not used")
    return tuple(str(lv) for lv in levels if lv not in HOST_LEVELS)  # plain str: tier names are written out


def _check_levels_used(nodes, levels, source: str) -> None:
    """Refuse a given level key that no node carries (a typo would silently merge every
    domain below the level above it), naming where the key was given."""
    keys = {k for _, labels, _, _ in nodes for k in labels}
    for level in levels:
        if level in HOST_LEVELS or level in keys:
            continue
        where = getattr(level, "source", None)
        raise SpecError(f"label key {level!r} is on no node of {source} ({len(nodes)} nodes): check its spelling "
                        "(kubectl get nodes --show-labels)", source=where,
                        line=getattr(level, "line", None), key=getattr(level, "key", "--levels"))


def _aws_keys(nodes) -> tuple[str, ...]:
    """AWS layer label keys 1..N, N the deepest layer any node has."""
    depth = max((int(k[len(AWS_LAYER):]) for _, labels, _, _ in nodes for k in labels
                 if k.startswith(AWS_LAYER) and k[len(AWS_LAYER):].isdigit()), default=0)
    return tuple(f"{AWS_LAYER}{i}" for i in range(1, depth + 1))


def _path(name: str, labels: dict, levels, source: str, line: int) -> list[str]:
    if levels is None:
        layers = {int(k[len(AWS_LAYER):]): v for k, v in labels.items()
                  if k.startswith(AWS_LAYER) and k[len(AWS_LAYER):].isdigit()}
        levels = tuple(f"{AWS_LAYER}{i}" for i in range(1, max(layers, default=0) + 1))
    path: list[str] = []
    for key in levels:
        value = labels.get(key, "")
        if not value:
            below = next((k for k in levels[len(path) + 1:] if labels.get(k)), None)
            if below:
                raise SpecError(f"node {name} has {below} but no {key}: levels must be filled from the top",
                                source=source, line=line, key=name)
            break
        if "/" in value:
            raise SpecError(f"label value {value!r} contains '/'", source=source, line=line, key=f"{key}={value}")
        path.append(value)
    return path


def _gpus(name, labels, resources, options, diags, source, line) -> int:
    """GPUs the scheduler can give on node ``name``: allocatable, else capacity, else the label."""
    found = {}
    for part in ("allocatable", "capacity"):
        for key in GPU_RESOURCES:
            if key in resources[part]:
                found[f"{part} {key}"] = resources[part][key]
    if GPU_LABEL in labels:
        found[f"label {GPU_LABEL}"] = labels[GPU_LABEL]
    counts = {}
    for where, value in found.items():
        text = str(value).strip()
        if not text.isdigit():
            raise SpecError(f"GPU count must be a whole number, got {value!r}", source=source, line=line,
                            key=f"{name} {where}")
        counts[where] = int(text)
    if not counts:
        diags.warn(f"node {name} says nothing about GPUs: assuming {options.gpus}", source=source, line=line,
                   key=name)
        return options.gpus
    gpus = next(iter(counts.values()))
    if len(set(counts.values())) > 1:
        first = next(iter(counts))
        why = (" (an unhealthy or reserved GPU: the scheduler cannot give the others)"
               if first.startswith("allocatable") and gpus < max(counts.values()) else "")
        diags.warn(f"node {name}: GPU counts differ ({', '.join(f'{k}={v}' for k, v in counts.items())}); "
                   f"using {first} = {gpus}{why}", source=source, line=line, key=name)
    if gpus == 0:
        diags.warn(f"node {name} has no GPUs: left out", source=source, line=line, key=name)
    return gpus


def parse_kueue_levels(text: str, source: str) -> tuple[str, ...]:
    """Label keys of a Kueue ``Topology`` object (``spec.levels[].nodeLabel``), top first.

    A label key given twice is refused (SpecError at the second's line, naming the first's), as
    Kueue's API server refuses the object (``TopologySpec.levels``: "must be unique",
    ``apis/kueue/v1alpha1/topology_types.go``) and as ``--levels a,a`` is refused.

    Examples
    --------
    >>> parse_kueue_levels("kind: Topology\\nspec:\\n  levels:\\n  - nodeLabel: blk\\n"
    ...                    "  - nodeLabel: kubernetes.io/hostname\\n", "t.yaml")
    ('blk', 'kubernetes.io/hostname')
    """
    doc = Fields(parse_yaml(text, source), source).only("apiVersion", "kind", "metadata", "spec")
    if doc.raw("kind", None) != "Topology":
        raise doc.error("kind", "expected a Kueue Topology object (kind: Topology)")
    spec = doc.sub("spec", required=True).only("levels")
    levels = spec.seq("levels")
    out = []
    first: dict[str, int] = {}
    for i, entry in enumerate(levels):
        f = Fields(entry, source, f"spec.levels[{i}]", levels.item_lines[i]).only("nodeLabel")
        label = f.str("nodeLabel")
        if label in first:
            j = first[label]
            raise f.error("nodeLabel", f"label key {label!r} is given twice (spec.levels[{j}], line "
                                       f"{levels.item_lines[j]}): each level needs its own key (Kueue: must be unique)")
        first[label] = i
        out.append(LevelKey(label, source=source, line=levels.item_lines[i], key=f"spec.levels[{i}].nodeLabel"))
    if not out:
        raise spec.error("levels", "needs at least one level")
    return tuple(out)
