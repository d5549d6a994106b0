"""Which importer or exporter handles which format, and reading topology files.

The formats modules parse and write text; this module reads files (the only place
importers touch the file system), picks the parser by name, and guesses a format
from a file's first lines when none is given.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from rankmap.errors import SpecError
from rankmap.fileio import check_numbers, read_text
from rankmap.names import host_budget
from rankmap.topology.hostfile import parse_hostfile
from rankmap.topology.k8s import parse_k8s_nodes
from rankmap.topology.k8s_export import export_k8s_labels
from rankmap.topology.model import Cluster
from rankmap.topology.slurm import export_slurm_tree, parse_slurm_tree
from rankmap.topology.slurm_block import export_slurm_block, parse_slurm_block
from rankmap.topology.slurm_yaml import looks_like_topology_yaml, parse_slurm_yaml
from rankmap.topology.slurm_yaml_export import export_slurm_yaml
from rankmap.topology.sources import ImportOptions, ImportResult
from rankmap.topology.spec import parse_cluster
from rankmap.topology.volcano import parse_hypernodes

__all__ = ["IMPORT_FORMATS", "EXPORT_FORMATS", "import_text", "import_file", "detect_format",
           "export_cluster", "load_any"]

IMPORTERS: dict[str, Callable[..., ImportResult]] = {
    "slurm": parse_slurm_tree,
    "slurm-block": parse_slurm_block,
    "slurm-yaml": parse_slurm_yaml,
    "k8s-labels": parse_k8s_nodes,
    "volcano": parse_hypernodes,
    "hostfile": parse_hostfile,
}
EXPORTERS: dict[str, Callable[..., str]] = {
    "slurm": export_slurm_tree,
    "slurm-block": export_slurm_block,
    "slurm-yaml": export_slurm_yaml,
    "k8s-labels": export_k8s_labels,
}
IMPORT_FORMATS = tuple(IMPORTERS)
EXPORT_FORMATS = tuple(EXPORTERS)


def import_text(fmt: str, text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Parse ``text`` as format ``fmt`` (one of :data:`IMPORT_FORMATS`).

    ``"slurm"`` given a topology.yaml reads it as ``"slurm-yaml"`` (Slurm 25.05 reads
    topology.yaml in place of topology.conf).

    Examples
    --------
    >>> r = import_text("hostfile", "n1 slots=4\\n", "hosts")
    >>> r.format, r.cluster.gpus
    ('hostfile', 4)
    """
    if fmt not in IMPORTERS:
        raise SpecError(f"unknown topology format {fmt!r} (expected one of: {', '.join(IMPORT_FORMATS)})")
    if fmt == "slurm" and looks_like_topology_yaml(text):
        fmt = "slurm-yaml"
    check_numbers(text, source)  # int() of 4,300+ digits raises ValueError in every parser
    with host_budget():  # every hostlist of the file counts against one host limit
        return IMPORTERS[fmt](text, source, options or ImportOptions())


def import_file(fmt: str, path: str | Path, options: ImportOptions | None = None) -> ImportResult:
    """Read and parse a topology file of format ``fmt``."""
    return import_text(fmt, read_text(path), str(path), options)


_FIRST_KEY = re.compile(r"^\s*([A-Za-z]+)\s*=", re.M)
_HOSTFILE_LINE = re.compile(r"^\s*[A-Za-z0-9:][A-Za-z0-9.:-]*(?::\d+)?(?:\s+[A-Za-z_-]+=\S*)*\s*$")


DETECT_CHARS = 1 << 16  # characters of a file that detect_format reads


def detect_format(text: str) -> str | None:
    """Guess the format of a topology file: an import format, ``"cluster"`` for a
    rankmap cluster spec, or None when unsure.

    Examples
    --------
    >>> detect_format("# tree\\nswitchname=s1 nodes=n[1-4]"), detect_format("n1 slots=8\\nn2 slots=8")
    ('slurm', 'hostfile')
    """
    if len(text) > DETECT_CHARS:  # the first 64 KiB decide: a huge file costs no more to guess
        text = text[:text.rfind("\n", 0, DETECT_CHARS) + 1] or text[:DETECT_CHARS]
    body = [ln for ln in (line.split("#", 1)[0].strip() for line in text.splitlines()) if ln]
    if not body:
        return None
    if body[0][:1] in "{[":
        return "k8s-labels"
    if looks_like_topology_yaml(text):
        return "slurm-yaml"
    first = _FIRST_KEY.match(body[0])
    if first:
        key = first.group(1).lower()
        return {"switchname": "slurm", "blockname": "slurm-block", "blocksizes": "slurm-block"}.get(key)
    if re.search(r"^\s*kind:\s*HyperNode\s*$", text, re.M):
        return "volcano"
    if re.search(r"^tor_groups\s*:", text, re.M) and re.match(r"^[A-Za-z_]+\s*:", body[0]):
        return "cluster"
    if re.search(r"^\s*kind:\s*(Node|List|NodeList)\s*$", text, re.M):
        return "k8s-labels"
    if all(_HOSTFILE_LINE.match(ln) for ln in body):
        return "hostfile"
    return None


def load_any(path: str | Path, fmt: str | None = None, options: ImportOptions | None = None) -> ImportResult:
    """A cluster spec or any importable file, as an ImportResult (for ``rankmap topo show``).

    ``fmt`` None guesses the format (:func:`detect_format`); ``"cluster"`` reads a spec.
    """
    text = read_text(path)
    fmt = fmt or detect_format(text)
    if fmt is None:
        raise SpecError("cannot tell the format of this file: pass --from", source=str(path), line=1)
    if fmt == "cluster":
        return ImportResult(cluster=parse_cluster(text, str(path)), format="cluster", source=str(path))
    return import_text(fmt, text, str(path), options)


def export_cluster(fmt: str, cluster: Cluster, **kwargs) -> str:
    """Write ``cluster`` in format ``fmt`` (one of :data:`EXPORT_FORMATS`)."""
    if fmt not in EXPORTERS:
        raise SpecError(f"cannot export to {fmt!r} (expected one of: {', '.join(EXPORT_FORMATS)})")
    return EXPORTERS[fmt](cluster, **kwargs)
