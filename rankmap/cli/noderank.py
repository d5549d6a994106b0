"""``rankmap node-rank``: this host's node rank in a rank map and its torchrun flags (Kubernetes pods)."""

from __future__ import annotations

import argparse
import shlex
import socket

from rankmap.cli.common import add_json_arg, hostname_arg, path_arg, port
from rankmap.errors import EXIT_OK

__all__ = ["add_parser", "run_node_rank"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``node-rank`` command to the CLI's subparsers."""
    p = subparsers.add_parser(
        "node-rank", help="print this host's node rank in a rank map and the torchrun flags for it",
        description="Print the node rank of a host (default: this machine's name) in a rank map, then the "
                    "torchrun flags that start its agent (static rendezvous). Exact name first; a short name or "
                    "FQDN only when exactly one host of the map matches. For pods of a JobSet or PyTorchJob.")
    p.add_argument("--rankmap", type=path_arg, required=True, help="rankmap.json written by `rankmap plan`")
    p.add_argument("--host", type=hostname_arg,
                   help="host name (default: this machine's hostname); in a pod, the node's name")
    p.add_argument("--master-port", type=port, default=29500, help="rendezvous port (default 29500)")
    p.add_argument("--master-addr", type=hostname_arg, help="rendezvous address (default: the map's node 0 host)")
    p.add_argument("--flags-only", action="store_true", help="print only the torchrun flags (one line)")
    add_json_arg(p)
    p.set_defaults(func=run_node_rank)
    return p


def run_node_rank(args: argparse.Namespace) -> int:
    from rankmap import api
    from rankmap.launch.noderank import node_rank_flags

    rm = api.read_rankmap(args.rankmap)
    host = args.host or socket.gethostname()
    node, flags = node_rank_flags(rm, host, args.master_port, args.master_addr)
    if args.json:
        from rankmap.cli.report import print_json
        print_json({"host": host, "node_rank": node, "torchrun_flags": list(flags)})
        return EXIT_OK
    if not args.flags_only:
        print(node)
    print(shlex.join(flags))
    return EXIT_OK
