"""The ``topo`` commands: import a scheduler's topology file, summarise one, export a cluster."""

from __future__ import annotations

from pathlib import Path

from rankmap.errors import RankmapError
from rankmap.topology.model import Cluster
from rankmap.topology.spec import parse_cluster

__all__ = ["topo_import", "topo_show", "topo_export", "topo_export_warnings"]


def topo_import(path: str | Path, fmt: str, options=None) -> tuple:
    """Import a topology file (Slurm tree/block, k8s labels, Volcano, hostfile) as a cluster spec.

    Parameters
    ----------
    path : path
        The file.
    fmt : str
        One of :data:`rankmap.topology.importers.IMPORT_FORMATS`.
    options : ImportOptions, optional
        GPUs, rails, speeds, known hosts, label levels, strictness.

    Returns
    -------
    (ImportResult, str, list of str)
        The import (cluster, warnings, notes), the cluster spec YAML to write, and the summary lines.

    Raises
    ------
    SpecError
        The file is malformed (FILE:LINE, key and value named), or warnings with ``strict``.
    """
    from rankmap.topology.importers import import_file
    from rankmap.topology.spec import cluster_to_yaml
    from rankmap.topology.summary import summarize

    result = _with_identity(import_file(fmt, path, options), path, options)
    text = f"# Imported by rankmap topo import --from {fmt} from {Path(path).name}\n" + cluster_to_yaml(result.cluster)
    if parse_cluster(text, "<import>") != result.cluster:  # the spec must carry everything imported
        raise RuntimeError("cluster spec does not read back as the imported cluster")
    return result, text, summarize(result)


def topo_show(path: str | Path, fmt: str | None = None, options=None) -> tuple:
    """Read a cluster spec or topology file (format guessed when ``fmt`` is None) and summarise it.

    Returns ``(ImportResult, summary lines)``; raises :class:`SpecError` for a malformed file.
    """
    from rankmap.topology.importers import load_any
    from rankmap.topology.summary import summarize

    result = load_any(path, fmt, options)
    if result.format != "cluster":
        result = _with_identity(result, path, options)
    return result, summarize(result)


def _with_identity(result, path, options):
    """The exported cluster's name, group names and hash back, when the file carries them
    (:mod:`rankmap.topology.identity`)."""
    from rankmap.fileio import read_text
    from rankmap.topology.identity import restore

    return restore(result, read_text(path), keep_name=bool(options is not None and options.name))


def topo_export(cluster: Cluster, fmt: str, levels: tuple | None = None, slurm_version: str | None = None) -> str:
    """A cluster's topology as a scheduler reads it: Slurm topology.conf (tree or block) or k8s node labels.

    Raises
    ------
    RankmapError
        ``levels`` given for a format other than ``k8s-labels``.
    """
    from rankmap.topology.importers import export_cluster

    if levels and fmt != "k8s-labels":
        raise RankmapError("--levels applies to --to k8s-labels only")
    if slurm_version and fmt not in ("slurm-block", "slurm-yaml"):
        raise RankmapError("--slurm-version applies to --to slurm-block and --to slurm-yaml only")
    from rankmap.topology.identity import stamp

    kwargs = {"levels": levels} if levels else {"slurm_version": slurm_version} if slurm_version else {}
    return stamp(fmt, cluster, export_cluster(fmt, cluster, **kwargs))


def topo_export_warnings(cluster: Cluster, fmt: str, slurm_version: str | None = None) -> list[str]:
    """What an export of ``cluster`` to ``fmt`` would get wrong, one line each (empty: nothing):
    kept Slurm topologies the format leaves out
    (:func:`rankmap.topology.slurm_yaml.dropped_topologies`) and, for ``slurm-block``, block
    levels that join parts of different pods (:func:`rankmap.topology.slurm_block.mixed_blocks`;
    slurmctld packs a job into a block as if it were local, topology.conf(5)).

    ``rankmap topo export`` prints them as warnings, or with ``--strict`` refuses the export.
    """
    from rankmap.topology.slurm_block import mixed_blocks
    from rankmap.topology.slurm_yaml import dropped_topologies
    from rankmap.topology.sources import SLURM_VERSION

    dropped = dropped_topologies(cluster, fmt)
    out = [dropped] if dropped else []
    if fmt == "slurm-block":
        out += [f"{line}: Slurm would pack a job there as if it were local"
                for line in mixed_blocks(cluster, slurm_version or SLURM_VERSION)]
    return out
