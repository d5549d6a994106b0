"""topology: the cluster model (hosts, rail NICs, ToR groups, spine, links) and its files.

The lowest domain layer of rankmap: it imports only the plumbing (:mod:`rankmap.errors`,
:mod:`rankmap.fileio`, :mod:`rankmap.yamlio`). Its exceptions live in :mod:`rankmap.errors`.
"""

from rankmap.topology.hostnames import check_hostname, compress_hostlist, expand_hostlist, natural_key
from rankmap.topology.model import Cluster, Host, Links, Spine, TorGroup
from rankmap.topology.spec import cluster_to_yaml, load_cluster, parse_cluster

__all__ = [
    "Cluster", "Host", "Links", "Spine", "TorGroup",
    "check_hostname", "compress_hostlist", "expand_hostlist", "natural_key",
    "cluster_to_yaml", "load_cluster", "parse_cluster",
]
