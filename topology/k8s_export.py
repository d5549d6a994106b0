"""Cluster -> Kubernetes node topology labels (a ``kubectl``-style JSON List).

The writer behind ``rankmap topo export --to k8s-labels``; :func:`rankmap.topology.k8s.parse_k8s_nodes`
reads its output back. Label values follow Kubernetes' syntax (63 characters at most, alphanumeric at
both ends, ``-``, ``_``, ``.`` inside).

Kubernetes, "Labels and Selectors", syntax and character set:
https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
"""

from __future__ import annotations

import json
import re

from rankmap.errors import SpecError
from rankmap.topology.k8s_labels import AWS_LAYER, GPU_LABEL
from rankmap.topology.model import Cluster
from rankmap.topology.tree import path_to

__all__ = ["export_k8s_labels"]

_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


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
