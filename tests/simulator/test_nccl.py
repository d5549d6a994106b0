"""NCCL fidelity: double binary tree layout, duplicate channels, per-connection rate cap, alpha per hop kind.

Sources: NCCL ``src/graph/trees.cc`` (``ncclGetBtree``/``ncclGetDtree``), ``src/graph/search.cc``
(``ncclTopoDupChannels``), NCCL environment-variable docs (``NCCL_IB_QPS_PER_CONNECTION``
default 1, ``NCCL_NCHANNELS_PER_NET_PEER`` default 2), nccl-tests doc/PERFORMANCE.md
(busbw), ``src/transport/net_ib/connect.cc`` (queue pairs of a connection). The 0.8
per-connection cap is an assumption (see CollectiveConfig).
"""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.simulator.collectives import (
    CollectiveConfig,
    collective_flows,
    pipeline_flows,
    run_flows,
    simulate_collective,
)
from rankmap.simulator.connections import connection_caps
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.tree_flows import btree_parents

B = 25e9          # 200 Gb/s NIC, bytes/s
S = 1e9
TREE = CollectiveConfig(alpha_s=0.0, algorithm="tree")


@pytest.mark.parametrize("k", (2, 3, 5, 8, 16, 63, 100, 1000))
def test_double_binary_tree_shape(k):
    """Both trees span all k nodes from one root; no node has two children in both trees."""
    children = []
    for t in (0, 1):
        p = btree_parents(k, t)
        assert (p < 0).sum() == 1 and (p < k).all()
        counts = np.bincount(p[p >= 0], minlength=k)
        assert counts.max() <= 2
        node = np.arange(k)
        for _ in range(k):
            node = np.where(p[node] >= 0, p[node], node)
        assert (node == np.flatnonzero(p < 0)[0]).all()          # every node reaches the root
        children.append(counts)
    assert not ((children[0] == 2) & (children[1] == 2)).any()


@pytest.mark.parametrize("routing", ("ecmp", "spray"))
def test_tree_across_tor_groups_takes_2S_over_B(synth, routing):
    """The issue's case: 1000 single-GPU hosts in 16 ToR groups (non-blocking: 63 x 200G down,
    32 x 400G up). A heap-shaped tree took 190 ms under ECMP; NCCL's tree takes 2S/B = 80 ms."""
    net = synth.network(16, 63)
    got = simulate_collective(net, synth.place(net, 1000), "allreduce", S, config=TREE,
                              routing=EcmpConfig(mode=routing))
    assert got.time_s == pytest.approx(2 * S / B, rel=0.05)


@pytest.mark.parametrize("hosts", (32, 256))
def test_multi_gpu_tree_across_groups(synth, hosts):
    """8 GPUs and 8 NICs per host, 4 groups: 2S/(8B) from the NICs, each host one edge per tree and channel."""
    net = synth.network(4, 64, gpus=8, nics=8)
    got = simulate_collective(net, synth.place(net, hosts, 8), "allreduce", S, config=TREE)
    assert got.time_s == pytest.approx(2 * S / (8 * B), rel=0.05)
    flows = collective_flows(synth.place(net, hosts, 8), np.arange(hosts * 8)[None, :], "allreduce", S, config=TREE)
    inter = flows.src_host != flows.dst_host
    up = inter & (flows.coflow % 2 == 0)                         # tree 0, every channel: one edge up per host
    assert inter.sum() == 2 * 16 * 2 * (hosts - 1)               # 16 channels x 2 trees x (up + down) per edge
    assert np.bincount(flows.src_host[up]).max() <= 16 * 3


TWO_RINGS = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])     # two groups over the same 4 single-NIC hosts


@pytest.mark.parametrize("channels", (None, 1, 2, 4))
def test_two_rings_sharing_a_nic_run_1_6x_slower(synth, channels):
    """Default channels (2 per NIC) and 1, 2, 4: alone, a ring's hop (all its channels, one
    connection) reaches the cap 0.8 B; two rings on one NIC share B, 0.5 B each, so each is
    0.8 / 0.5 = 1.6x slower than alone, not 2x. Without the cap: line rate alone, 2x."""
    net = synth.network(1, 4)
    pl = synth.place(net, 4)
    one = CollectiveConfig(alpha_s=0.0, channels=channels)
    alone = simulate_collective(net, pl, "allreduce", S, config=one)
    assert alone.time_s == pytest.approx(1.5 * S / (0.8 * B), rel=1e-9)
    assert alone.busbw_gb_s == pytest.approx(0.8 * 25.0, rel=1e-9)
    two = simulate_collective(net, pl, "allreduce", S, config=one, groups=TWO_RINGS)
    assert two.time_s == pytest.approx(1.5 * S / (0.5 * B), rel=1e-9)
    assert two.time_s / alone.time_s == pytest.approx(1.6, rel=1e-9)
    uncapped = CollectiveConfig(alpha_s=0.0, channels=channels, connection_rate_fraction=None)
    free = simulate_collective(net, pl, "allreduce", S, config=uncapped)
    assert free.time_s == pytest.approx(1.5 * S / B, rel=1e-9) and free.busbw_gb_s == pytest.approx(25.0)
    shared = simulate_collective(net, pl, "allreduce", S, config=uncapped, groups=TWO_RINGS)
    assert shared.time_s / free.time_s == pytest.approx(2.0, rel=1e-9)


@pytest.mark.parametrize("fraction, busbw", [(0.8, 20.0), (0.5, 12.5), (1.0, 25.0), (None, 25.0)])
def test_lone_ring_busbw_is_the_cap_times_line_rate(synth, fraction, busbw):
    """busbw of a ring alone on 200G NICs (25 GB/s) = fraction x 25 GB/s; 1 or None: line
    rate, what nccl-tests shows on an idle fabric. Queue pairs do not raise the cap."""
    net = synth.network(1, 8)
    for qps in (1, 4):
        got = simulate_collective(net, synth.place(net, 8), "allreduce", S,
                                  config=CollectiveConfig(alpha_s=0.0, connection_rate_fraction=fraction),
                                  routing=EcmpConfig(qps_per_connection=qps))
        assert got.busbw_gb_s == pytest.approx(busbw, rel=1e-9)
        assert got.time_s == pytest.approx(2 * 7 / 8 * S / (busbw * 1e9), rel=1e-9)


def test_pipeline_hops_and_their_wrap_share_a_connection(synth):
    """Two stages on two hosts: forward 0 -> 1 and backward 1 -> 0 are two connections (one
    per sending NIC), each capped at 0.8 B: 2 sends of 100 MB take 200 MB / 20 GB/s = 10 ms.
    Interleaved, the wrap hop (last stage -> first, first -> last) takes the same two hops:
    the same connections, so 100 MB more each way shares 0.8 B, 15 ms in all. Latency: 2
    messages each way x alpha."""
    net = synth.network(1, 2)
    pl = synth.place(net, 2)
    config = CollectiveConfig(alpha_s=5e-6)
    msg = 100e6
    hops = run_flows(net, pipeline_flows(pl, np.array([[0, 1]]), msg, 2, config=config), EcmpConfig(), config)
    assert hops.time_s == pytest.approx(2 * msg / (0.8 * B) + 2 * 2 * 5e-6, rel=1e-9)
    wrapped = pipeline_flows(pl, np.array([[0, 1]]), msg, 2, wrap_sends=1, config=config)
    both = run_flows(net, wrapped, EcmpConfig(), config)
    assert both.finish_s.max() == pytest.approx(3 * msg / (0.8 * B) + 2 * 2 * 5e-6, rel=1e-9)
    rows, cap = connection_caps(net, wrapped, config)
    assert rows.toarray().tolist() == [[1.0, 1.0]] and cap.tolist() == [0.8 * B]   # both directions: one row


def test_tree_edge_carries_both_trees_channels_on_one_connection(synth):
    """Three single-GPU hosts, 2 channels: tree 0 is the chain 0 - 2 - 1 (root 0), tree 1 the
    chain 1 - 0 - 2 (root 1); coflow 2c + t is channel c of tree t. A directed edge is one
    connection for every tree and channel on it: 0 -> 2 and 2 -> 0 carry all four coflows,
    1 <-> 2 tree 0's {0, 2}, 0 <-> 1 tree 1's {1, 3}: three distinct rows. Each coflow
    carries S/4; host 0's NIC sends 2 + 2 + 2 coflows' flows (0 -> 2 and 0 -> 1), so every
    coflow gets B/6 and t = (S/4) / (B/6) = 1.5 S/B: the cap (4 x B/6 < 0.8 B) does not bind."""
    net = synth.network(1, 3)
    pl = synth.place(net, 3)
    assert btree_parents(3, 0).tolist() == [-1, 2, 0] and btree_parents(3, 1).tolist() == [1, -1, 0]
    flows = collective_flows(pl, np.arange(3)[None, :], "allreduce", S, config=TREE)
    rows, cap = connection_caps(net, flows, TREE)
    got = sorted(tuple(rows.indices[rows.indptr[k]:rows.indptr[k + 1]].tolist()) for k in range(rows.shape[0]))
    assert got == [(0, 1, 2, 3), (0, 2), (1, 3)] and np.allclose(cap, 0.8 * B)
    t = simulate_collective(net, pl, "allreduce", S, config=TREE).time_s
    assert t == pytest.approx(1.5 * S / B, rel=1e-9)


def test_nvlink_groups_are_not_capped(synth):
    """A ring inside one host opens no network connection: no cap rows, NVLink rate."""
    net = synth.network(1, 1, gpus=8, nics=8, nvlink_gbps=2400)
    flows = collective_flows(synth.place(net, 1, 8), np.arange(8)[None, :], "allreduce", S, config=TREE)
    assert connection_caps(net, flows, CollectiveConfig())[0].shape[0] == 0
    got = simulate_collective(net, synth.place(net, 1, 8), "allreduce", S, config=CollectiveConfig(alpha_s=0.0))
    assert got.time_s == pytest.approx(2 * 7 / 8 * S / 300e9, rel=1e-9)


def test_alpha_per_hop_kind(synth):
    """A ring inside one host pays alpha_nvlink per step; across hosts alpha_s; tree: depth network
    steps plus k-1 NVLink steps, each way."""
    net = synth.network(1, 4, gpus=8, nics=8, nvlink_gbps=2400)
    cfg = CollectiveConfig(alpha_s=10e-6, alpha_nvlink_s=1e-6)
    local = simulate_collective(net, synth.place(net, 1, 8), "allreduce", S, config=cfg)
    assert local.time_s == pytest.approx(2 * 7 / 8 * S / 300e9 + 14 * 1e-6, rel=1e-9)
    across = simulate_collective(net, synth.place(net, 4, 8), "allreduce", S, config=cfg)
    assert across.time_s == pytest.approx(2 * 31 / 32 * S / (8 * 0.8 * B) + 62 * 10e-6, rel=1e-9)
    tree = simulate_collective(net, synth.place(net, 4, 8), "allreduce", S,
                               config=CollectiveConfig(alpha_s=10e-6, alpha_nvlink_s=1e-6, algorithm="tree"))
    bare = simulate_collective(net, synth.place(net, 4, 8), "allreduce", S, config=TREE)
    assert tree.time_s - bare.time_s == pytest.approx(2 * (2 * 10e-6 + 7 * 1e-6), rel=1e-9)


@pytest.mark.parametrize("kwargs, message", [({"connection_rate_fraction": 0.0}, "connection_rate_fraction"),
                                             ({"connection_rate_fraction": 1.5}, "connection_rate_fraction"),
                                             ({"channels_per_nic": 0}, "channels_per_nic"),
                                             ({"alpha_nvlink_s": -1.0}, "alpha_nvlink_s"),
                                             ({"alpha_nvlink_s": float("nan")}, "alpha_nvlink_s"),
                                             ({"alpha_s": float("inf")}, "alpha_s")])
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CollectiveConfig(**kwargs)
