"""A cluster's identity through an export and an import: its name, ToR group names, link
speeds and spec hash ride along in the exported file, so ``topo export`` then ``topo import``
gives back the same cluster and a rank map made for it still verifies.

The scheduler formats carry only part of a cluster spec (a Slurm topology.conf has switch
and node names, no GPUs, link speeds or cluster name; Kubernetes labels rename groups after
their label path). :func:`stamp` adds the whole spec, as one-line JSON (a cluster spec is
YAML, and JSON is YAML), where the format keeps it unread by the scheduler:

- topology.conf / topology.yaml and other ``#``-comment formats: comment lines
  ``# rankmap-cluster-spec: <part>`` of at most :data:`PART` characters each (Slurm reads
  ``#`` to the end of a line as a comment, slurm.conf(5) and topology.conf(5),
  https://slurm.schedmd.com/topology.conf.html);
- Kubernetes node lists (JSON): the annotation ``rankmap.io/cluster-spec`` on the first node
  (annotations are free-form metadata that Kubernetes stores and ignores,
  https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/).

:func:`restore` uses it only when the imported file still describes the same fabric (same
hosts in the same ToR groups and domains, same GPU counts): then the imported cluster *is*
the exported one (host states as imported). When the file was edited since, only the name
is kept and a note says why the hash differs.
"""

from __future__ import annotations

import dataclasses
import json
import re

import yaml

from rankmap.errors import SpecError
from rankmap.topology.model import Cluster

__all__ = ["stamp", "restore", "same_fabric", "embedded_spec", "PART", "ANNOTATION"]

PART = 200                                  # characters of JSON per comment line
ANNOTATION = "rankmap.io/cluster-spec"
_TAG = "# rankmap-cluster-spec: "
_LINE = re.compile(r"^# rankmap-cluster-spec: (.*)$", re.MULTILINE)


def _spec_json(cluster: Cluster) -> str:
    from rankmap.topology.spec import cluster_to_yaml
    return json.dumps(yaml.safe_load(cluster_to_yaml(cluster)), sort_keys=True, separators=(",", ":"))


def stamp(fmt: str, cluster: Cluster, text: str) -> str:
    """``text`` (``cluster`` exported as ``fmt``) with the cluster spec embedded (see module doc).

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("name: lab\\ntor_groups: [{name: a, hosts: 'x[1-2]'}]")
    >>> stamp("slurm", c, "SwitchName=a Nodes=x[1-2]\\n").splitlines()[0][:40]
    '# rankmap-cluster-spec: {"hosts":{"gpus"'
    """
    spec = _spec_json(cluster)
    if fmt == "k8s-labels":
        doc = json.loads(text)
        items = doc.get("items") or []
        if items:
            meta = items[0].setdefault("metadata", {})
            meta.setdefault("annotations", {})[ANNOTATION] = spec
        return json.dumps(doc, indent=1) + "\n"
    parts = [spec[i:i + PART] for i in range(0, len(spec), PART)]
    return "".join(_TAG + p + "\n" for p in parts) + text


def embedded_spec(text: str, source: str) -> Cluster | None:
    """The cluster spec :func:`stamp` embedded in ``text``, or None when there is none.

    Raises
    ------
    SpecError
        The embedded spec is damaged (names ``source``).
    """
    spec = None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
            spec = (((doc.get("items") or [{}])[0].get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
        except (ValueError, AttributeError, IndexError, TypeError):
            return None
    else:
        parts = _LINE.findall(text)
        spec = "".join(parts) if parts else None
    if not spec:
        return None
    from rankmap.topology.spec import parse_cluster
    try:
        return parse_cluster(spec, f"{source} (rankmap-cluster-spec)")
    except SpecError as exc:
        raise SpecError(f"the embedded rankmap cluster spec is damaged: {exc.message}", source=source) from None


def _partitions(c: Cluster) -> tuple:
    groups = frozenset(frozenset(g.hosts) for g in c.tor_groups)
    islands = frozenset(frozenset(h for g in isl for h in c.tor_group(g).hosts) for isl in c.islands())
    return groups, islands, {h.name: h.gpus for h in c.hosts}


def same_fabric(a: Cluster, b: Cluster) -> bool:
    """Same hosts with the same GPUs, in the same ToR groups and the same islands (names of
    groups and switches may differ). Levels in between are not compared: a format may describe
    them its own way (a topology/block export states block sizes that a flat spine lacks)."""
    return _partitions(a) == _partitions(b)


def restore(result, text: str, keep_name: bool = False):
    """An ImportResult with the exported cluster's identity back, when ``text`` carries it.

    ``keep_name``: the user named the cluster (``--name``); their name wins.
    """
    embedded = embedded_spec(text, result.source)
    if embedded is None:
        return result
    imported = result.cluster
    if same_fabric(imported, embedded):
        # States the file reports (k8s unschedulable nodes) win; formats without states (topology.conf)
        # report every host free, which must not wipe the exported spec's busy and failed hosts.
        states = {h.name: h.state for h in imported.hosts if h.state != "free" and h.state != embedded.host(h.name).state}
        cluster = embedded.with_states(states) if states else embedded
        if keep_name:
            cluster = dataclasses.replace(cluster, name=imported.name)
        note = (f"cluster {cluster.name!r} as exported (name, ToR group names and link speeds from the file's "
                f"rankmap-cluster-spec; spec sha256 {cluster.spec_hash()[:12]}...)")
        return dataclasses.replace(result, cluster=cluster, notes=(note,))  # the import's notes were about its guesses
    if keep_name:
        return result
    note = (f"the fabric differs from the one exported as {embedded.name!r} (hosts, groups or GPUs changed): "
            f"kept its name only, so rank maps made for it do not verify against this spec")
    return dataclasses.replace(result, cluster=dataclasses.replace(imported, name=embedded.name),
                               notes=tuple(result.notes) + (note,))
