"""Kubernetes node topology labels (``kubectl get nodes -o json``) <-> Cluster.

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

import json
import re
from bisect import bisect_left

from rankmap.errors import SpecError
from rankmap.fileio import parse_json
from rankmap.topology.hostnames import check_hostname
from rankmap.topology.model import Cluster, Switch
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
from rankmap.topology.tree import name_key, path_to
from rankmap.yamlio import Fields, parse_yaml

__all__ = ["parse_k8s_nodes", "export_k8s_labels", "parse_kueue_levels", "json_item_lines", "LevelKey", "AWS_LAYER",
           "GKE_LEVELS"]

AWS_LAYER = "topology.k8s.aws/network-node-layer-"
GKE_LEVELS = ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
              "cloud.google.com/gce-topology-host")
HOST_LEVELS = ("kubernetes.io/hostname", "cloud.google.com/gce-topology-host")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
GPU_LABEL = "nvidia.com/gpu.count"
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


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
        lines = _JsonLines(text, doc).item_line
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


def json_item_lines(text: str, doc) -> list[int]:
    """The line of each item of a kubectl List (``kubectl get nodes/pods -o json``), parsed from
    ``text`` as ``doc``: where its ``metadata.name`` is written, so that of two items with one
    name the second is cited at its own line, not at the first's.

    >>> text = '{"items": [\\n {"metadata": {"name": "n1"}},\\n {"metadata": {"name": "n1"}}]}'
    >>> json_item_lines(text, json.loads(text))
    [2, 3]
    """
    items = doc.get("items") if isinstance(doc, dict) and "items" in doc else doc
    lines = _JsonLines(text, doc)
    return [lines.item_line(i) for i in range(len(items) if isinstance(items, list) else 1)]


class _JsonLines:
    """Line of each node item. Fast path: the line of the item's ``"name": "..."`` found by
    searching forward in item order. Items without a usable name fall back (only for the
    message) to a slower parse that keeps the position of every object."""

    def __init__(self, text: str, doc):
        self.text = text
        self.doc = doc
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.pos = 0
        self.cache: dict[int, int] = {}
        self.slow: list[int] | None = None

    def item_line(self, index: int) -> int:
        if index not in self.cache:
            items = self.doc.get("items") if isinstance(self.doc, dict) and "items" in self.doc else self.doc
            item = items[index] if isinstance(items, list) else self.doc
            name = item.get("metadata", {}).get("name") if isinstance(item, dict) and \
                isinstance(item.get("metadata"), dict) else None
            found = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(name))).search(self.text, self.pos) \
                if isinstance(name, str) else None
            if found:
                self.pos = found.end()
                self.cache[index] = bisect_left(self.newlines, found.start()) + 1
            else:
                self.cache[index] = self._slow_lines()[index] if index < len(self._slow_lines()) else 1
        return self.cache[index]

    def _slow_lines(self) -> list[int]:
        if self.slow is None:
            line_of: dict[int, int] = {}
            decoder = json.JSONDecoder()

            def parse_object(s_and_end, *args):
                obj, end = json.decoder.JSONObject(s_and_end, *args)
                line_of[id(obj)] = bisect_left(self.newlines, s_and_end[1]) + 1
                return obj, end

            decoder.parse_object = parse_object
            decoder.scan_once = json.scanner.py_make_scanner(decoder)
            doc = decoder.decode(self.text)  # kept alive so that the ids above stay valid
            items = doc.get("items", []) if isinstance(doc, dict) and "items" in doc else doc
            items = items if isinstance(items, list) else [doc]
            self.slow = [line_of.get(id(item), 1) for item in items]
        return self.slow


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


def export_k8s_labels(cluster: Cluster, levels: tuple[str, ...] | None = None) -> str:
    """Nodes with topology labels as a ``kubectl``-style JSON List; reads back with
    :func:`parse_k8s_nodes`.

    Each host gets one label per domain above it, top first (AWS layer labels unless
    ``levels`` names the keys), and ``nvidia.com/gpu.count``. A domain named by a path
    (``a/b``) writes its last part. Without a switch tree, one ``spine`` domain joins
    all ToR groups; islands stay separate top-level domains, and so do the children of an
    implied root (``root``, joined again on import).

    Raises
    ------
    SpecError
        If a domain has several parents, the tree is deeper than ``levels``, or a name is
        not a valid label value.
    """
    records = []
    for group in cluster.tor_groups:
        try:
            path = path_to(cluster, group.name) if cluster.switches is not None else ("spine", group.name)
        except ValueError as exc:
            raise SpecError(f"cannot write labels for ToR group {group.name!r}: {exc}; labels describe "
                            "a single-parent tree") from None
        if len(path) > 1 and _implied_root(path[0]) and not path[1].startswith(path[0] + "/"):
            path = path[1:]  # the root an import implied: no label names it, a re-import implies it again
        values = [_label_value(path[i], path[i - 1] if i else None) for i in range(len(path))]
        keys = levels or tuple(f"{AWS_LAYER}{i + 1}" for i in range(len(values)))
        if len(keys) < len(values):
            raise SpecError(f"ToR group {group.name!r} is {len(values)} levels deep, more than the "
                            f"{len(keys)} label keys given")
        for host in group.hosts:
            labels = dict(zip(keys, values)) | {GPU_LABEL: str(cluster.host(host).gpus)}
            records.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": host, "labels": labels}})
    if not records:
        raise SpecError(f"cluster {cluster.name!r} has no hosts: refusing to write an empty node list")
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": records}, indent=1) + "\n"


def _implied_root(name: str) -> bool:
    """Whether ``name`` is one :func:`~rankmap.topology.sources.join_top_domains` gives."""
    return name.rstrip("'") == "root"


def _label_value(name: str, parent: str | None) -> str:
    value = name[len(parent) + 1:] if parent and name.startswith(parent + "/") else name
    if not _LABEL_VALUE.match(value):
        raise SpecError(f"{value!r} is not a valid Kubernetes label value (63 characters at most: letters, "
                        "digits, '-', '_', '.', starting and ending with a letter or digit)")
    return value
