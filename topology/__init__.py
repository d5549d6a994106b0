"""topology: the cluster model (hosts, rail NICs, ToR groups, spine, links) and its files.

The lowest layer of rankmap: it imports nothing from the other layers.
"""

from rankmap.errors import RankmapError, SpecError, TopologyError
from rankmap.topology.hostnames import check_hostname, compress_hostlist, expand_hostlist, natural_key
from rankmap.topology.model import Cluster, Host, Links, Spine, TorGroup
from rankmap.topology.spec import cluster_to_yaml, load_cluster, parse_cluster

__all__ = [
    "Cluster", "Host", "Links", "Spine", "TorGroup",
    "RankmapError", "SpecError", "TopologyError",
    "check_hostname", "compress_hostlist", "expand_hostlist", "natural_key",
    "cluster_to_yaml", "load_cluster", "parse_cluster",
]
