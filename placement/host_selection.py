"""The hosts a user names for a plan (``rankmap plan --hosts``): a Slurm hostlist, a file of hostlists,
or the pods of a Kubernetes job (``kubectl get pods -o json``), checked against the cluster.

The common case on a scheduler: the nodes are already allocated (``$SLURM_JOB_NODELIST``, or the
nodes a JobSet's pods landed on) and only the rank order is free.
"""

from __future__ import annotations

from rankmap.errors import SpecError
from rankmap.fileio import parse_json, read_text
from rankmap.names import check_host, host_identity, host_problem
from rankmap.placement.constraints import PlacementConstraints
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster

__all__ = ["read_host_names", "select_hosts", "own_allocation"]


def read_host_names(expr: str, key: str = "--hosts") -> list[str]:
    """Host names from a Slurm hostlist, or ``@FILE``: a hostlist per line (``#`` comments), the
    JSON of ``kubectl get pods -o json`` (each pod's ``spec.nodeName``, in the listed order) or
    of ``kubectl get nodes -o json`` (each node's ``metadata.name``).

    A host named twice (host names ignore case, RFC 4343), in one hostlist, on two lines of a
    file, by two pods or two node items, is refused: a duplicate usually means a wrong list.

    Raises
    ------
    SpecError
        An unreadable file, a bad hostlist, a host named twice (FILE:LINE), pods not yet
        scheduled, or no hosts (key ``--hosts``).

    Examples
    --------
    >>> read_host_names("n[1-3],m7")
    ['n1', 'n2', 'n3', 'm7']
    """
    if not expr.startswith("@"):
        names = expand_hostlist(expr, key=key)
    else:
        path = expr[1:]
        text = read_text(path)
        try:
            names = _names_from_json(text, path) if text.lstrip().startswith("{") else _names_from_lines(text, path)
        except SpecError as exc:
            if exc.key == "--hosts" and key != "--hosts":
                raise SpecError(exc.message, source=exc.source, line=exc.line, key=key) from None
            raise
    if not names:
        raise SpecError(f"no hosts in {expr[1:]} (it is empty, or only comments)" if expr.startswith("@")
                        else "no hosts given", key=key)
    return names


def _names_from_lines(text: str, path: str) -> list[str]:
    """A hostlist per line; a host on two lines is refused, naming both lines."""
    first_line: dict[str, int] = {}
    names = []
    for number, line in enumerate(text.splitlines(), start=1):
        expr = line.split("#", 1)[0].strip()
        if not expr:
            continue
        for name in expand_hostlist(expr, source=path, line=number, key="--hosts"):
            seen = first_line.setdefault(host_identity(name), number)
            if seen != number:
                raise SpecError(f"host {name!r} is listed twice (line {seen} too; host names ignore case)",
                                source=path, line=number, key="--hosts")
            names.append(name)
    return names


def _names_from_json(text: str, path: str) -> list[str]:
    """Node names of a pod List (scheduled pods) or of a node List (``kind: NodeList`` or items of
    ``kind: Node``)."""
    try:
        doc = parse_json(text, path)  # strict: duplicate keys, huge integers, deep nesting refused
        items = doc.get("items", []) if isinstance(doc, dict) else None
        if not isinstance(items, list) or not all(isinstance(p, dict) for p in items):
            raise SpecError("expected a List of pods or nodes (kubectl get pods/nodes -o json)", source=path,
                            key="--hosts")
    except SpecError as exc:
        raise SpecError(exc.message, source=path, line=exc.line, key="--hosts") from None
    from rankmap.topology.kubectl_json import json_item_lines

    def line_of(i: int) -> int:  # the item's own line (where its metadata.name is written)
        return json_item_lines(text, doc)[i]

    what = "pod"
    if doc.get("kind") == "NodeList" or (items and all(item.get("kind") == "Node" for item in items)):
        what = "node item"
        names = [(item.get("metadata") or {}).get("name") for item in items]
        bad = [i for i, n in enumerate(names) if not (isinstance(n, str) and n)]
        if bad:
            raise SpecError(f"node item items[{bad[0]}] has no metadata.name", source=path, line=line_of(bad[0]),
                            key="--hosts")
    else:
        names = [(pod.get("spec") or {}).get("nodeName") for pod in items]
        if None in names:
            i = names.index(None)
            pod = (items[i].get("metadata") or {}).get("name", f"items[{i}]")
            raise SpecError(f"pod {pod} is not scheduled yet (no spec.nodeName)", source=path, line=line_of(i),
                            key="--hosts")
    for i, name in enumerate(names):
        if host_problem(name):
            check_host(name, source=path, line=line_of(i), key="--hosts")
    first: dict[str, int] = {}
    for i, name in enumerate(names):  # the rule of hostlists: a host named twice is refused
        j = first.setdefault(host_identity(name), i)
        if j != i:
            lines = json_item_lines(text, doc)  # the duplicate is cited at its own line, the first named
            who = [str((items[k].get("metadata") or {}).get("name", f"items[{k}]")) for k in (j, i)]
            raise SpecError(f"host {name!r} is named twice, by {what}s {who[0]} (line {lines[j]}) and {who[1]} "
                            f"(one {what} per host; host names ignore case)", source=path, line=lines[i],
                            key="--hosts")
    return names


def select_hosts(cluster: Cluster, expr: str, constraints: PlacementConstraints | None = None,
                 allocated: bool = False) -> set[str]:
    """The hosts of ``expr`` (:func:`read_host_names`), each checked to be in ``cluster`` and usable.

    Names match in any letter case (host names ignore case); the set holds the cluster's spelling.
    With ``allocated`` the hosts are this job's scheduler allocation (``rankmap plan --allocation
    "$SLURM_JOB_NODELIST"``): a host the cluster spec marks busy is taken as this job's own -- a
    spec refreshed from the scheduler while the job runs marks every allocated node busy (Slurm's
    ``sinfo`` state ``allocated``) -- so only failed, excluded and reserved hosts are refused
    (see :func:`own_allocation` for the cluster to plan on).

    Raises
    ------
    SpecError
        A host not in the cluster, or not free (its state, or excluded/reserved), named (key
        ``--hosts``, or ``--allocation`` with ``allocated``).
    """
    key = "--allocation" if allocated else "--hosts"
    constraints = constraints or PlacementConstraints()
    taken = ({host_identity(h): "excluded" for h in constraints.exclude}
             | {host_identity(h): "reserved by a running job" for h in constraints.reserve})
    chosen = set()
    for name in read_host_names(expr, key):
        if not cluster.has_host(name):
            raise SpecError(f"host {name!r} is not in cluster {cluster.name!r}", key=key)
        host = cluster.host(name)
        usable = host.state == "free" or (allocated and host.state == "busy")
        if not usable or host_identity(name) in taken:
            why = taken.get(host_identity(name)) or f"its state is {host.state!r}"
            if allocated:
                raise SpecError(f"host {name!r} of the allocation cannot run ranks ({why}): ask the scheduler "
                                f"for other nodes (Slurm: sbatch --exclude={host.name})", key=key)
            raise SpecError(f"host {name!r} is not free ({why}): plan on free hosts only (hosts of this job's "
                            f"own allocation, marked busy: --allocation)", key=key)
        chosen.add(host.name)
    return chosen


def own_allocation(cluster: Cluster, hosts: set[str]) -> Cluster:
    """``cluster`` with the busy hosts among ``hosts`` (this job's allocation, from
    :func:`select_hosts` with ``allocated``) marked free, so the planner may use them; the
    spec hash (which ignores states) is unchanged, so the map still belongs to the spec.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: a, hosts: 'x[1-3]'}]\\navailability: {busy: 'x[1-2]'}")
    >>> [h.state for h in own_allocation(c, {"x1"}).hosts]
    ['free', 'busy', 'free']
    """
    return cluster.with_states({h: "free" for h in sorted(hosts) if cluster.host(h).state == "busy"})
