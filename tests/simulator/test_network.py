"""The link table and the paths flows take over it."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.simulator.collectives import point_to_point_flows
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.network import LINK_KINDS, Network
from rankmap.topology.graph import to_networkx
from rankmap.topology.spec import parse_cluster


@pytest.fixture(scope="module")
def net(synth):
    """2 ToR groups of 4 hosts, 8 GPUs and 8 rails each; 4 uplinks per rail ToR on 2 spines."""
    return synth.network(2, 4, gpus=8, nics=8, uplinks=4, spines=2)


def test_links_match_the_networkx_view(net):
    """Every cable of rankmap.topology.graph appears once per direction with its bandwidth."""
    graph = to_networkx(net.cluster)
    kinds = net.link_kind
    bps = net.capacity_bps
    host_links = sum(d["links"] for u, v, d in graph.edges(data=True) if "rail" in d)
    tor_links = sum(d["links"] for u, v, d in graph.edges(data=True) if "rail" not in d)
    assert (kinds == LINK_KINDS.index("nic-up")).sum() == host_links == 8 * 8
    assert (kinds == LINK_KINDS.index("tor-up")).sum() == tor_links == 2 * 8 * 4
    up_gbps = sum(d["gbps"] for u, v, d in graph.edges(data=True) if "rail" not in d)
    assert bps[kinds == LINK_KINDS.index("tor-up")].sum() * 8 / 1e9 == pytest.approx(up_gbps)
    assert bps[kinds == LINK_KINDS.index("nvlink-out")].max() == 2400e9 / 8


def path(net, src_host, src_gpu, dst_host, dst_gpu, routing=EcmpConfig()):
    from rankmap.simulator.flows import RankPlacement
    pl = RankPlacement.on_hosts(net, [h.name for h in net.cluster.hosts], 8)
    flows = point_to_point_flows(pl, [src_host * 8 + src_gpu], [dst_host * 8 + dst_gpu], 1.0)
    matrix = net.route(flows, routing).matrix
    rows = matrix.tocoo().coords[0]
    return sorted(net.describe(int(r)).split()[0] for r in rows), matrix


def test_paths(net):
    assert path(net, 0, 1, 0, 5)[0] == ["nvlink-in", "nvlink-out"]
    assert path(net, 0, 3, 1, 3)[0] == ["nic-down", "nic-up"]                  # same group, same rail: ToR turns
    assert path(net, 0, 3, 5, 3)[0] == ["nic-down", "nic-up", "tor-down", "tor-up"]  # other group: spine
    assert path(net, 0, 3, 1, 4)[0] == ["nic-down", "nic-up", "tor-down", "tor-up"]  # other rail: spine too


def test_spray_spreads_over_every_uplink(net):
    names, matrix = path(net, 0, 2, 6, 2, EcmpConfig(mode="spray"))
    assert names.count("tor-up") == 4 and names.count("tor-down") == 4
    up = net.link_range("tor-up")
    assert matrix.toarray()[up.start:up.stop].sum() == pytest.approx(1.0)


def test_hashed_uplink_reaches_its_spine(net):
    """Uplink cable u goes to spine u % 2; the down cable comes from that spine."""
    for seed in range(20):
        _, matrix = path(net, 0, 2, 6, 2, EcmpConfig(seed=seed))
        rows = matrix.tocoo().coords[0]
        cables = [int(net.describe(int(r)).split("uplink")[1].split()[0]) for r in rows
                  if net.describe(int(r)).startswith("tor-")]
        assert len(cables) == 2 and cables[0] % 2 == cables[1] % 2


def test_describe_and_index_arithmetic(net):
    assert net.describe(net.nic_up(5, 3)) == "nic-up g01n002/nic3"
    assert net.describe(net.tor_down(1, 7, 2)) == "tor-down g01/rail7/uplink2 <- spine0"
    assert net.describe(net.nvlink_in(0, 6)) == "nvlink-in g00n001/gpu6"
    assert net.n_links == sum(len(net.link_range(k)) for k in LINK_KINDS)


def test_host_with_fewer_nics_shares_them():
    text = ("hosts: {gpus: 8, nics: 8}\ntor_groups: [{name: a, hosts: [{hosts: 'h1', nics: 2}, 'h2']}]\n")
    net = Network(parse_cluster(text))
    assert net.host_nics.tolist() == [2, 8] and net.rails == 8
    from rankmap.simulator.flows import RankPlacement
    pl = RankPlacement.on_hosts(net, ["h1", "h2"], 8)
    assert pl.nic[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] and pl.nic[8:].tolist() == list(range(8))
    assert np.array_equal(pl.host, np.repeat([0, 1], 8))
