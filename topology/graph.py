"""A networkx view of a cluster, for algorithms that want a graph.

Nodes: hosts (``kind="host"``), rail ToR switches ``("tor", group, rail)``
(``kind="tor"``) and spine switches ``("spine", i)`` (``kind="spine"``). Edges carry
``links`` (parallel cables) and ``gbps`` (their total bandwidth, one direction).
"""

from __future__ import annotations

import networkx as nx

from rankmap.topology.model import Cluster

__all__ = ["to_networkx"]


def to_networkx(cluster: Cluster) -> nx.Graph:
    """Build the host - rail ToR - spine graph of ``cluster``.

    Host NIC ``i`` connects to rail ToR ``i`` of its group at ``min(nic_gbps,
    tor_downlink_gbps)``; rail ToR uplink ``u`` goes to spine ``u % spine.switches``.

    Returns
    -------
    networkx.Graph
        Undirected; ``len(G)`` = hosts + groups x rails + spine switches.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("hosts: {gpus: 8, nics: 2}\\nlinks: {tor_uplinks: 4}\\n"
    ...                   "spine: {switches: 2}\\ntor_groups: [{name: a, hosts: 'h[1-2]'}]")
    >>> g = to_networkx(c)
    >>> g.number_of_nodes(), g.edges[("tor", "a", 0), ("spine", 1)]["links"]
    (6, 2)
    """
    links = cluster.links
    graph = nx.Graph(name=cluster.name)
    for s in range(cluster.spine.switches):
        graph.add_node(("spine", s), kind="spine")
    down_gbps = min(links.nic_gbps, links.tor_downlink_gbps)
    for group in cluster.tor_groups:
        for rail in range(cluster.rails):
            tor = ("tor", group.name, rail)
            graph.add_node(tor, kind="tor", tor_group=group.name, rail=rail)
            for u in range(links.tor_uplinks):
                spine = ("spine", u % cluster.spine.switches)
                if graph.has_edge(tor, spine):
                    graph.edges[tor, spine]["links"] += 1
                    graph.edges[tor, spine]["gbps"] += links.tor_uplink_gbps
                else:
                    graph.add_edge(tor, spine, links=1, gbps=links.tor_uplink_gbps)
    for host in cluster.hosts:
        graph.add_node(host.name, kind="host", tor_group=host.tor_group, gpus=host.gpus, state=host.state)
        for nic in range(host.nics):
            graph.add_edge(host.name, ("tor", host.tor_group, nic), links=1, gbps=down_gbps, rail=nic)
    return graph
