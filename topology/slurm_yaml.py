"""Slurm topology.yaml (Slurm 25.05 and later) -> :class:`~rankmap.topology.model.Cluster` (the writer
back is :mod:`rankmap.topology.slurm_yaml_export`).

From 25.05 slurmctld reads ``topology.yaml`` beside slurm.conf and then ignores
topology.conf. The file is a list of named topologies, each ``tree``, ``block`` or
``flat``; the first with ``cluster_default: true`` serves partitions that name none::

    - topology: fabric
      cluster_default: true
      tree:
        switches:
          - switch: spine
            children: leaf[1-2]
          - switch: leaf1
            nodes: gpu-[001-004]
          - switch: leaf2
            nodes: gpu-[005-008]
    - topology: nvl
      block:
        block_sizes: [2, 4]
        blocks:
          - block: b1
            nodes: gpu-[001-002]

One topology becomes one cluster: the default one, or the one ``ImportOptions.topology``
names. The others are checked as well (slurmctld refuses the whole file for one bad
topology) and kept in ``Cluster.slurm_topologies``, so that :func:`~rankmap.topology.slurm_yaml_export.export_slurm_yaml`
writes every topology of the file back, in file order. A tree's switches and a block topology's blocks are read with the same checks
as topology.conf lines (:func:`~rankmap.topology.slurm.tree_from_records`,
:func:`~rankmap.topology.slurm_block.block_from_records`), located at the YAML line of
each item. A ``flat`` topology lists no nodes: it needs ``ImportOptions.hosts``.

Grammar (topology.yaml(5)): ``topology`` (the name, first key), ``cluster_default``
(bool, default false), exactly one of ``tree`` (``switches``: items with ``switch``,
``children`` or ``nodes``, optional ``link_speed``), ``block`` (``block_sizes``: list of
sizes; ``blocks``: items with ``block`` and optional ``nodes``) or ``flat: true``.
slurmctld 25.05 is not installed here (Debian's 22.05 has no topology.yaml), so the tests
check the documented grammar.

References
----------
topology.yaml(5), https://slurm.schedmd.com/topology.yaml.html;
topology.conf(5), https://slurm.schedmd.com/topology.conf.html;
Slurm 25.05 release notes, https://slurm.schedmd.com/archive/slurm-25.05.0/release_notes.html
"""

from __future__ import annotations

import dataclasses

from rankmap.errors import SpecError
from rankmap.fileio import iter_lines
from rankmap.topology.model import Cluster, SlurmTopology
from rankmap.topology.slurm import tree_from_records
from rankmap.topology.slurm_block import block_from_records
from rankmap.topology.slurm_yaml_export import ITEM_KEYS, TOPOLOGY_YAML_SINCE, export_slurm_yaml
from rankmap.topology.slurmconf import Record, Token, check_switch_name
from rankmap.topology.sources import (
    ImportOptions,
    ImportResult,
    Leaf,
    build_cluster,
    slurm_release,
)
from rankmap.yamlio import Fields, parse_yaml

__all__ = ["parse_slurm_yaml", "export_slurm_yaml", "looks_like_topology_yaml", "TOPOLOGY_YAML_SINCE",
           "slurm_topologies_from_data", "slurm_topology_data", "dropped_topologies"]

_KINDS = ("tree", "block", "flat")


def looks_like_topology_yaml(text: str) -> bool:
    """True when ``text`` starts like a topology.yaml (a list whose first item is ``- topology:``).

    Examples
    --------
    >>> looks_like_topology_yaml("# c\\n- topology: f\\n  flat: true"), looks_like_topology_yaml("SwitchName=s")
    (True, False)
    """
    for line in iter_lines(text):  # lazily: only the first line that says something is read
        body = line.split("#", 1)[0].strip()
        if body:
            return body.replace(" ", "").startswith("-topology:")
    return False


def parse_slurm_yaml(text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Read one topology of a topology.yaml as a cluster.

    Parameters
    ----------
    text : str
        File contents.
    source : str
        File name, for messages.
    options : ImportOptions, optional
        ``topology`` picks a topology by name (default: the first ``cluster_default:
        true``, else the first); ``slurm_version`` must be 25.05 or later. The cluster is
        named after the topology unless ``name`` is given.

    Returns
    -------
    ImportResult
        Format ``"slurm-yaml"``; a note names the topology read and the others in the file.

    Raises
    ------
    SpecError
        At ``FILE:LINE`` with the key: not a list of topologies, an unknown key, a topology
        with none or several of tree/block/flat, a repeated or unknown topology name, and
        everything topology.conf's tree and block readers refuse; two ``cluster_default: true``
        topologies when ``topology`` names none.

    Examples
    --------
    >>> text = ("- topology: f\\n  cluster_default: true\\n  tree:\\n    switches:\\n"
    ...         "      - switch: s\\n        children: l[1-2]\\n      - switch: l1\\n        nodes: a[1-2]\\n"
    ...         "      - switch: l2\\n        nodes: b1\\n")
    >>> r = parse_slurm_yaml(text, "topology.yaml")
    >>> r.cluster.name, [(g.name, g.hosts) for g in r.cluster.tor_groups]
    ('f', [('l1', ('a1', 'a2')), ('l2', ('b1',))])

    Two topologies with ``cluster_default: true`` are refused, naming both lines, unless
    ``topology`` picks one: slurmctld would take the first without a word (topology.yaml(5)).
    """
    options = options or ImportOptions()
    if slurm_release(options.slurm_version) < TOPOLOGY_YAML_SINCE:
        raise SpecError(f"topology.yaml is read by Slurm 25.05 and later, the target is {options.slurm_version}: "
                        "export topology.conf for it (--to slurm or --to slurm-block)", source=source, line=1)
    data = parse_yaml(text, source)
    if not isinstance(data, list) or not data:
        raise SpecError("expected a list of topologies (- topology: NAME ...)", source=source,
                        line=getattr(data, "line", None) or 1)
    entries = [_entry(item, source, i, _line(data, i)) for i, item in enumerate(data)]
    chosen = _choose(entries, options.topology, source)
    named = dataclasses.replace(options, name=options.name or chosen.name)
    result = _import_one(chosen, source, named)
    kept = []
    for i, e in enumerate(entries):
        if e is not chosen:
            if e.kind != "flat":  # checked as slurmctld would; a flat one lists no nodes to check
                _import_one(e, source, dataclasses.replace(options, name=e.name))
            kept.append(_kept(e, i, source))
    result = dataclasses.replace(result, cluster=dataclasses.replace(result.cluster, slurm_topologies=tuple(kept)))
    others = ", ".join(f"{e.name} ({e.kind})" for e in entries if e is not chosen)
    why = ("named by --topology" if options.topology else
           "cluster_default" if chosen.default else "the first; none has cluster_default: true")
    note = f"topology.yaml: read topology {chosen.name!r} ({chosen.kind}, {why})" + (
        f"; also in the file: {others}" if others else "")
    return dataclasses.replace(result, format="slurm-yaml", notes=(note,) + result.notes)


@dataclasses.dataclass(frozen=True)
class _Entry:
    name: str
    default: bool
    kind: str
    body: object
    fields: Fields
    line: int


def _line(seq, i: int) -> int:
    lines = getattr(seq, "item_lines", None)
    return lines[i] if lines and i < len(lines) else getattr(seq, "line", 1) or 1


def _entry(item, source: str, index: int, line: int, prefix: str = "", extra: tuple = ()) -> _Entry:
    f = Fields(item, source, prefix=f"{prefix}[{index}]", line=line)
    f.only("topology", "cluster_default", *_KINDS, *extra)
    if not extra and list(item)[0] != "topology":  # a kept topology in a cluster spec may list its keys in any order
        raise f.error(list(item)[0], "'topology' must be the first key of a topology")
    name = f.str("topology")
    why = check_switch_name(name)
    if why:
        raise f.error("topology", f"bad topology name {name!r}: {why}")
    kinds = [k for k in _KINDS if f.has(k)]
    if len(kinds) != 1:
        raise SpecError(f"topology {name!r} must define exactly one of tree, block or flat"
                        + (f" (got {', '.join(kinds)})" if kinds else ""), source=source, line=f.line_of("topology"),
                        key=f.path("topology"))
    default = f.bool("cluster_default", False)
    body = f.raw(kinds[0])
    if kinds[0] == "flat" and body is not True:
        raise f.error("flat", f"expected flat: true, got {body!r}")
    return _Entry(name=name, default=default, kind=kinds[0], body=body, fields=f, line=f.line_of(kinds[0]))


def _choose(entries: list[_Entry], wanted: str | None, source: str) -> _Entry:
    seen: dict[str, _Entry] = {}
    for e in entries:
        if e.name in seen:
            raise e.fields.error("topology", f"topology {e.name!r} is defined twice (first on line "
                                             f"{seen[e.name].fields.line_of('topology')})")
        seen[e.name] = e
    if wanted is not None:
        if wanted not in seen:
            raise SpecError(f"no topology named {wanted!r} (the file has: {', '.join(seen)})", source=source,
                            line=1, key="--topology")
        return seen[wanted]
    defaults = [e for e in entries if e.default]
    if len(defaults) > 1:  # slurmctld takes the first (topology.yaml(5)); which one was meant is a guess
        first, second = defaults[:2]
        raise second.fields.error("cluster_default", (
            f"topologies {first.name!r} (line {first.fields.line_of('cluster_default')}) and {second.name!r} "
            f"(line {second.fields.line_of('cluster_default')}) both have cluster_default: true; slurmctld would "
            f"use the first one silently: set it on one topology, or pick one with --topology NAME"))
    return next(iter(defaults), entries[0])


def _import_one(e: _Entry, source: str, options: ImportOptions) -> ImportResult:
    if e.kind == "flat":
        if not options.hosts:
            raise SpecError(f"topology {e.name!r} is flat: it lists no nodes; give them with --hosts",
                            source=source, line=e.line, key=e.fields.path("flat"))
        cluster = build_cluster([Leaf(name="flat", hosts=[(h, options.gpus) for h in options.hosts])], options,
                                default_name=e.name, source=source)
        return ImportResult(cluster=cluster, format="slurm-yaml", source=source)
    body = Fields(e.body, source, prefix=e.fields.path(e.kind), line=e.line)
    if e.kind == "tree":
        body.only("switches")
        records = _records(body, "switches", source, {"switch": "SwitchName", "children": "Switches",
                                                     "nodes": "Nodes", "link_speed": "LinkSpeed"})
        return tree_from_records(records, source, options, last_line=e.line, fmt="slurm-yaml")
    body.only("block_sizes", "blocks")
    records = _records(body, "blocks", source, {"block": "BlockName", "nodes": "Nodes"})
    if body.has("block_sizes"):
        sizes = body.seq("block_sizes")
        text = ",".join(str(v) for v in sizes)
        line = body.line_of("block_sizes")
        records.append(Record(line, (Token("BlockSizes", text, f"block_sizes: [{text}]", line),)))
    return block_from_records(records, source, options, fmt="slurm-yaml")




def _kept(e: _Entry, position: int, source: str) -> SlurmTopology:
    """A topology other than the imported one, as the cluster keeps it for export."""
    if e.kind == "flat":
        return SlurmTopology(name=e.name, position=position, default=e.default, kind="flat")
    body = Fields(e.body, source, prefix=e.fields.path(e.kind), line=e.line)
    key, keys = ITEM_KEYS[e.kind]
    names = {v: k for k, v in keys.items()}
    items = tuple(tuple((names[t.key], int(t.value) if t.key == "LinkSpeed" and t.value.isdigit() else t.value)
                        for t in r.tokens) for r in _records(body, key, source, keys))
    sizes = tuple(body.seq("block_sizes")) if e.kind == "block" and body.has("block_sizes") else None
    if sizes is not None and not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        raise body.error("block_sizes", f"expected positive integers, got {list(sizes)!r}")
    return SlurmTopology(name=e.name, position=position, default=e.default, kind=e.kind, items=items,
                         block_sizes=sizes)


def slurm_topologies_from_data(items, source: str, prefix: str = "slurm_topologies") -> tuple[SlurmTopology, ...]:
    """The ``slurm_topologies`` of a cluster spec: topology.yaml items, each with its
    ``position`` in the file; checked with the same grammar as topology.yaml itself.

    Raises
    ------
    SpecError
        At ``FILE:LINE`` with the key path: an unknown key, a bad kind, item or position.
    """
    out = []
    for i, item in enumerate(items):
        e = _entry(item, source, i, _line(items, i), prefix=prefix, extra=("position",))
        out.append(_kept(e, e.fields.int("position", minimum=0, maximum=10**6), source))
    positions = [t.position for t in out]
    if len(set(positions)) != len(positions):
        raise SpecError(f"two topologies at position {next(p for p in positions if positions.count(p) > 1)}",
                        source=source, line=_line(items, 0), key=prefix)
    return tuple(out)


def dropped_topologies(cluster: Cluster, fmt: str) -> str | None:
    """What an export to ``fmt`` leaves out of the cluster's kept topologies (None: nothing).

    >>> c = Cluster(name="c", tor_groups=(), hosts=(), slurm_topologies=(SlurmTopology(name="nvl", position=1),))
    >>> print(dropped_topologies(c, "slurm"))
    --to slurm writes one topology: nvl (flat) of the imported topology.yaml is left out (--to slurm-yaml keeps it)
    """
    if fmt == "slurm-yaml" or not cluster.slurm_topologies:
        return None
    names = ", ".join(f"{t.name} ({t.kind})" for t in cluster.slurm_topologies)
    them = "it" if len(cluster.slurm_topologies) == 1 else "them"
    return (f"--to {fmt} writes one topology: {names} of the imported topology.yaml "
            f"{'is' if them == 'it' else 'are'} left out (--to slurm-yaml keeps {them})")


def slurm_topology_data(t: SlurmTopology) -> dict:
    """A kept topology as cluster spec data (the inverse of :func:`slurm_topologies_from_data`)."""
    doc: dict = {"topology": t.name, "position": t.position, "cluster_default": t.default}
    if t.kind == "flat":
        return doc | {"flat": True}
    key = ITEM_KEYS[t.kind][0]
    body: dict = {"block_sizes": list(t.block_sizes)} if t.block_sizes is not None else {}
    return doc | {t.kind: body | {key: [dict(item) for item in t.items]}}


def _records(body: Fields, key: str, source: str, keys: dict[str, str]) -> list[Record]:
    """topology.yaml items as topology.conf records (one per switch or block, at its line)."""
    items = body.seq(key)
    records = []
    for i, item in enumerate(items):
        line = _line(items, i)
        f = Fields(item, source, prefix=f"{body.path(key)}[{i}]", line=line)
        f.only(*keys)
        first = next(iter(keys))
        tokens = [_token(f, first, keys[first])]
        for k in list(keys)[1:]:
            if f.has(k):
                tokens.append(_token(f, k, keys[k]))
        records.append(Record(line, tuple(tokens)))
    return records


def _token(f: Fields, key: str, conf_key: str) -> Token:
    value = f.raw(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise f.error(key, f"expected a name or hostlist, got {value!r}")
    return Token(conf_key, str(value).strip(), f"{key}: {value}", f.line_of(key))
