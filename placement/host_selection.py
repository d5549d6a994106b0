"""The hosts a user names for a plan (``rankmap plan --hosts``): a Slurm hostlist, a file of hostlists,
or the pods of a Kubernetes job (``kubectl get pods -o json``), checked against the cluster.

The common case on a scheduler: the nodes are already allocated (``$SLURM_JOB_NODELIST``, or the
nodes a JobSet's pods landed on) and only the rank order is free.
"""

from __future__ import annotations

from rankmap.errors import SpecError
from rankmap.fileio import parse_json, read_text
from rankmap.placement.constraints import PlacementConstraints
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster

__all__ = ["read_host_names", "select_hosts"]


def read_host_names(expr: str) -> list[str]:
    """Host names from a Slurm hostlist, or ``@FILE``: a hostlist per line (``#`` comments) or the
    JSON of ``kubectl get pods -o json`` (each pod's ``spec.nodeName``, in the listed order).

    Raises
    ------
    SpecError
        An unreadable file, a bad hostlist, pods not yet scheduled, or no hosts (key ``--hosts``).

    Examples
    --------
    >>> read_host_names("n[1-3],m7")
    ['n1', 'n2', 'n3', 'm7']
    """
    if not expr.startswith("@"):
        names = expand_hostlist(expr, key="--hosts")
    else:
        path = expr[1:]
        text = read_text(path)
        if text.lstrip().startswith("{"):
            try:
                doc = parse_json(text, path)  # strict: duplicate keys, huge integers, deep nesting refused
                pods = doc.get("items", []) if isinstance(doc, dict) else None
                if not isinstance(pods, list) or not all(isinstance(p, dict) for p in pods):
                    raise SpecError("expected a List of pods (kubectl get pods -o json)", source=path, key="--hosts")
            except SpecError as exc:
                raise SpecError(exc.message, source=path, line=exc.line, key="--hosts") from None
            names = [(pod.get("spec") or {}).get("nodeName") for pod in pods]
            if None in names:
                pod = pods[names.index(None)].get("metadata", {}).get("name", "?")
                raise SpecError(f"pod {pod} is not scheduled yet (no spec.nodeName)", source=path, key="--hosts")
        else:
            names = [h for line in text.splitlines() if line.split("#", 1)[0].strip()
                     for h in expand_hostlist(line.split("#", 1)[0].strip(), source=path, key="--hosts")]
    names = list(dict.fromkeys(names))
    if not names:
        raise SpecError("no hosts given", key="--hosts")
    return names


def select_hosts(cluster: Cluster, expr: str, constraints: PlacementConstraints | None = None) -> set[str]:
    """The hosts of ``expr`` (:func:`read_host_names`), each checked to be in ``cluster`` and usable.

    Raises
    ------
    SpecError
        A host not in the cluster, or not free (its state, or excluded/reserved), named.
    """
    constraints = constraints or PlacementConstraints()
    taken = {h: "excluded" for h in constraints.exclude} | {h: "reserved by a running job" for h in constraints.reserve}
    names = read_host_names(expr)
    for name in names:
        if not cluster.has_host(name):
            raise SpecError(f"host {name!r} is not in cluster {cluster.name!r}", key="--hosts")
        state = cluster.host(name).state
        if state != "free" or name in taken:
            why = taken.get(name) or f"its state is {state!r}"
            raise SpecError(f"host {name!r} is not free ({why}): plan on free hosts only", key="--hosts")
    return set(names)
