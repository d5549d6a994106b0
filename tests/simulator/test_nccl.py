"""NCCL fidelity: double binary tree layout, duplicate channels, per-connection rate cap, alpha per hop kind.

Sources: NCCL ``src/graph/trees.cc`` (``ncclGetBtree``/``ncclGetDtree``), ``src/graph/search.cc``
(``ncclTopoDupChannels``), NCCL environment-variable docs (``NCCL_IB_QPS_PER_CONNECTION``
default 1, ``NCCL_NCHANNELS_PER_NET_PEER`` default 2), nccl-tests doc/PERFORMANCE.md
(busbw). The 0.8 per-queue-pair cap is an assumption (see CollectiveConfig).
"""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.simulator.collectives import CollectiveConfig, collective_flows, simulate_collective
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


def test_two_rings_sharing_a_nic_run_1_6x_slower(synth):
    """One channel per ring: alone a ring's connection reaches 0.8 B (the cap); two rings on
    one NIC share B, so each is 2 x 0.8 = 1.6x slower than alone, not 2x."""
    net = synth.network(1, 4)
    pl = synth.place(net, 4)
    one = CollectiveConfig(alpha_s=0.0, channels=1)
    alone = simulate_collective(net, pl, "allreduce", S, config=one)
    assert alone.time_s == pytest.approx(1.5 * S / (0.8 * B), rel=1e-9)
    two = simulate_collective(net, pl, "allreduce", S, config=one, groups=np.array([[0, 1, 2, 3], [1, 2, 3, 0]]))
    assert two.time_s / alone.time_s == pytest.approx(1.6, rel=1e-9)
    uncapped = CollectiveConfig(alpha_s=0.0, channels=1, qp_rate_fraction=None)
    ratio = (simulate_collective(net, pl, "allreduce", S, config=uncapped, groups=np.array([[0, 1, 2, 3], [1, 2, 3, 0]]))
             .time_s / simulate_collective(net, pl, "allreduce", S, config=uncapped).time_s)
    assert ratio == pytest.approx(2.0, rel=1e-9)


def test_default_two_channels_per_nic_reach_line_rate(synth):
    """Default: 2 channels per NIC, so the cap does not bind and the closed form holds."""
    net = synth.network(1, 4)
    got = simulate_collective(net, synth.place(net, 4), "allreduce", S, config=CollectiveConfig(alpha_s=0.0))
    assert got.time_s == pytest.approx(1.5 * S / B, rel=1e-9)
    qps = simulate_collective(net, synth.place(net, 4), "allreduce", S, config=CollectiveConfig(alpha_s=0.0, channels=1),
                              routing=EcmpConfig(qps_per_connection=2))
    assert qps.time_s == pytest.approx(1.5 * S / B, rel=1e-9)


def test_alpha_per_hop_kind(synth):
    """A ring inside one host pays alpha_nvlink per step; across hosts alpha_s; tree: depth network
    steps plus k-1 NVLink steps, each way."""
    net = synth.network(1, 4, gpus=8, nics=8, nvlink_gbps=2400)
    cfg = CollectiveConfig(alpha_s=10e-6, alpha_nvlink_s=1e-6)
    local = simulate_collective(net, synth.place(net, 1, 8), "allreduce", S, config=cfg)
    assert local.time_s == pytest.approx(2 * 7 / 8 * S / 300e9 + 14 * 1e-6, rel=1e-9)
    across = simulate_collective(net, synth.place(net, 4, 8), "allreduce", S, config=cfg)
    assert across.time_s == pytest.approx(2 * 31 / 32 * S / (8 * B) + 62 * 10e-6, rel=1e-9)
    tree = simulate_collective(net, synth.place(net, 4, 8), "allreduce", S,
                               config=CollectiveConfig(alpha_s=10e-6, alpha_nvlink_s=1e-6, algorithm="tree"))
    bare = simulate_collective(net, synth.place(net, 4, 8), "allreduce", S, config=TREE)
    assert tree.time_s - bare.time_s == pytest.approx(2 * (2 * 10e-6 + 7 * 1e-6), rel=1e-9)


@pytest.mark.parametrize("kwargs, message", [({"qp_rate_fraction": 0.0}, "qp_rate_fraction"),
                                             ({"channels_per_nic": 0}, "channels_per_nic"),
                                             ({"alpha_nvlink_s": -1.0}, "alpha_nvlink_s")])
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CollectiveConfig(**kwargs)
