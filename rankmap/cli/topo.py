"""``rankmap topo``: import topology from what admins keep, show it, export it back.

::

    rankmap topo import --from slurm topology.conf --rails 8 --out cluster.yaml
    rankmap topo show topology.conf            # or a cluster.yaml; --from when unsure
    rankmap topo export --to slurm cluster.yaml --out topology.conf
    rankmap topo export --to slurm-block cluster.yaml --out topology.conf --strict   # warnings refuse

``add_parser`` adds the subcommand to the main parser and ``run_topo`` runs it;
errors are raised as :class:`~rankmap.errors.RankmapError` for the caller to print.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rankmap.cli.common import add_json_arg, hostlist_arg, labels, out_file, path_arg, positive_float, positive_int
from rankmap.errors import SpecError, UsageError

__all__ = ["add_parser", "run_topo"]

IMPORT_FORMATS = ("slurm", "slurm-block", "slurm-yaml", "k8s-labels", "volcano", "hostfile")
EXPORT_FORMATS = ("slurm", "slurm-block", "slurm-yaml", "k8s-labels")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``topo`` with its verbs ``import``, ``show`` and ``export`` to ``subparsers``."""
    topo = subparsers.add_parser(
        "topo", help="import topology from Slurm, Kubernetes, Volcano or hostfiles; show it; export it",
        description="Read the topology admins already keep, say what was found, and write it back.")
    topo.set_defaults(func=run_topo)
    verbs = topo.add_subparsers(dest="topo_command", metavar="VERB", required=True)

    imp = verbs.add_parser("import", help="write a cluster spec YAML from a topology file",
                           description="Import a topology file into a cluster spec. Nothing is written "
                                       "if the import fails.")
    imp.add_argument("--from", dest="source_format", choices=IMPORT_FORMATS, required=True,
                     help="format of FILE")
    imp.add_argument("file", type=path_arg, metavar="FILE")
    _import_options(imp)
    imp.add_argument("--out", type=out_file, required=True, help="cluster spec YAML to write ('-': stdout)")
    add_json_arg(imp)

    show = verbs.add_parser("show", help="summarize a cluster spec or topology file",
                            description="Hosts, ToR groups and sizes, islands, depth, and warnings.")
    show.add_argument("file", type=path_arg, metavar="CLUSTER_OR_FILE")
    add_json_arg(show)
    show.add_argument("--from", dest="source_format", choices=IMPORT_FORMATS + ("cluster",),
                      help="format of the file (default: guessed)")
    _import_options(show)

    exp = verbs.add_parser("export", help="write a cluster spec's topology for a scheduler",
                           description="Export a cluster spec as Slurm topology.conf (tree or block) or "
                                       "Kubernetes node labels; importing the result gives the same cluster (name, ToR "
                                       "group names and spec hash: the spec rides along in # comments or a node "
                                       "annotation, so rank maps still verify).")
    exp.add_argument("--to", dest="target_format", choices=EXPORT_FORMATS, required=True)
    exp.add_argument("cluster", type=path_arg, metavar="CLUSTER.yaml")
    exp.add_argument("--out", type=out_file, required=True, help="file to write ('-': stdout)")
    add_json_arg(exp)
    exp.add_argument("--levels", type=labels, help="k8s-labels: label keys, top level first "
                                                   "(default: AWS network-node-layer-N)")
    exp.add_argument("--slurm-version", metavar="YY.MM[.N]", help="slurm-block, slurm-yaml: the Slurm release "
                                                                  "to write for (default 25.05)")
    exp.add_argument("--strict", action="store_true",
                     help="treat warnings as errors (exit 3, nothing written): slurm-block levels that join parts "
                          "of different pods, kept Slurm topologies the format leaves out")
    return topo


def _import_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=positive_int, default=8, help="GPUs per host where the file gives none (default 8)")
    p.add_argument("--rails", type=positive_int, help="rail NICs per host (default: one per GPU)")
    p.add_argument("--nic-gbps", type=positive_float, help="speed of one rail NIC and its ToR port, Gb/s")
    p.add_argument("--capacity", type=positive_int, default=64, help="host ports per rail ToR (default 64)")
    p.add_argument("--name", help="cluster name (default: the file name)")
    p.add_argument("--hosts", type=hostlist_arg,
                   help="every host the scheduler knows: a hostlist, or @FILE of hostlists; reports hosts under no "
                        "leaf, and Volcano regex members match these")
    p.add_argument("--levels", type=labels, help="k8s-labels: topology label keys, top level first")
    p.add_argument("--kueue-topology", type=path_arg, help="k8s-labels: take --levels from a Kueue Topology YAML")
    p.add_argument("--separate-top-domains", action="store_true",
                   help="k8s-labels, volcano: keep several top-level domains as islands no job spans (default: "
                        "join them under an implied root, as Kueue/Volcano levels describe locality)")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument("--topology", metavar="NAME", help="slurm topology.yaml: the topology to read "
                                                       "(default: the cluster_default one)")
    p.add_argument("--slurm-version", default="25.05", metavar="YY.MM[.N]",
                   help="the Slurm release the file is for (default 25.05): hostlist forms, block rules")


def run_topo(args: argparse.Namespace) -> int:
    """Run ``rankmap topo VERB``; returns the exit status, raises RankmapError on bad input."""
    if args.topo_command == "import":
        return _import(args)
    if args.topo_command == "show":
        return _show(args)
    return _export(args)


def _options(args: argparse.Namespace):
    from rankmap.fileio import read_text
    from rankmap.topology.hostnames import expand_hostlist
    from rankmap.topology.k8s import parse_kueue_levels
    from rankmap.topology.sources import ImportOptions

    hosts = None
    if args.hosts:
        if args.hosts.startswith("@"):
            source = args.hosts[1:]
            hosts = []
            for number, line in enumerate(read_text(source).splitlines(), 1):
                for word in line.split("#", 1)[0].split():
                    hosts.extend(expand_hostlist(word, source=source, line=number, key=word))
        else:
            hosts = expand_hostlist(args.hosts, key="--hosts")
    levels = args.levels
    if args.kueue_topology:
        if levels:
            raise UsageError("give --levels or --kueue-topology, not both (both name the label keys of the levels)")
        levels = parse_kueue_levels(read_text(args.kueue_topology), str(args.kueue_topology))
    return ImportOptions(gpus=args.gpus, rails=args.rails, nic_gbps=args.nic_gbps, capacity=args.capacity,
                         name=args.name, hosts=tuple(hosts) if hosts is not None else None, levels=levels,
                         strict=args.strict, topology=args.topology, slurm_version=args.slurm_version,
                         separate_tops=args.separate_top_domains)


def _import(args: argparse.Namespace) -> int:
    from rankmap.api import topo_import
    from rankmap.cli.report import print_import_summary

    if str(args.out) != "-" and args.out.resolve() == args.file.resolve():
        raise UsageError(f"--out {args.out} is the input file: refusing to overwrite it")
    result, text, lines = topo_import(args.file, args.source_format, _options(args))

    def report():
        if args.json:
            _print_doc(result, args.out)
        else:
            print_import_summary(result, lines, sys.stderr if str(args.out) == "-" else None)

    _write(args.out, text, report)
    return 0


def _print_doc(result, out: Path) -> None:
    """``--json`` for import and show: the cluster's figures, warnings and notes (stderr when the
    spec itself goes to stdout)."""
    from rankmap.cli.report import cluster_doc, print_json

    doc = {"source": result.source, "format": result.format, "cluster": cluster_doc(result.cluster),
           "warnings": [str(w) for w in result.warnings], "notes": list(result.notes),
           **({"output": str(out)} if str(out) not in ("-", "") else {})}
    print_json(doc, sys.stderr if str(out) == "-" else None)


def _show(args: argparse.Namespace) -> int:
    from rankmap.api import topo_show
    from rankmap.cli.report import print_import_summary

    result, lines = topo_show(args.file, args.source_format, _options(args))
    if args.json:
        _print_doc(result, Path(""))
        return 0
    print_import_summary(result, lines)
    return 0


def _export(args: argparse.Namespace) -> int:
    from rankmap.api import load_cluster, topo_export
    from rankmap.api.topo import topo_export_warnings

    cluster = load_cluster(args.cluster)
    text = topo_export(cluster, args.target_format, args.levels, args.slurm_version)
    warnings = topo_export_warnings(cluster, args.target_format, args.slurm_version)
    if warnings and args.strict:
        more = f"; {len(warnings) - 1} more warning{'s' * (len(warnings) > 2)}" if len(warnings) > 1 else ""
        raise SpecError(f"{warnings[0]} (an error with --strict{more})",
                        source=str(args.cluster))
    for line in warnings:
        print(f"rankmap: warning: {line}", file=sys.stderr)

    def report():
        if args.json:  # with --out -, the file is stdout: the document goes to stderr
            from rankmap.cli.report import cluster_doc, print_json
            print_json({"output": str(args.out), "format": args.target_format, "cluster": cluster_doc(cluster),
                        "sha256": cluster.spec_hash()}, sys.stderr if str(args.out) == "-" else None)
        elif str(args.out) != "-":
            islands = len(cluster.islands())
            print(f"wrote {args.out}: {args.target_format} topology of cluster {cluster.name!r}, "
                  f"{len(cluster.hosts)} hosts in {len(cluster.tor_groups)} ToR groups, {islands} "
                  f"island{'s' * (islands != 1)}")

    _write(args.out, text, report)
    return 0


def _write(out: Path, text: str, report) -> None:
    """The spec to ``out`` (``-``: stdout, then ``report()``); to a file, ``report()`` runs while
    the file is staged, so a report that cannot be written leaves no file (exit 74)."""
    from rankmap.cli.common import report_before_commit
    from rankmap.fileio import atomic_write_files

    if str(out) == "-":
        sys.stdout.write(text)
        report()
    else:
        atomic_write_files(out.parent, {out.name: text}, before_commit=report_before_commit(lambda _: report()))
