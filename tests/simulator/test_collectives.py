"""Collectives against the closed forms of nccl-tests' definitions (NVIDIA/nccl-tests doc/PERFORMANCE.md).

Every connection between hosts moves at most CAP = 0.8 of its NIC's line rate (the default
``connection_rate_fraction``, an assumption; see CollectiveConfig), so a closed form's
bandwidth is ``min(bottleneck share, CAP x NIC rate)``: ``CAP * B`` for a ring, whose ranks
each send over one connection per NIC.
"""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.simulator.collectives import CollectiveConfig, bus_factor, collective_flows, simulate_collective
from rankmap.simulator.connections import connection_caps, rate_constraints
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement

B = 25e9          # 200 Gb/s NIC, bytes/s
CAP = 0.8         # the default per-connection cap, a fraction of B
S = 1e9
NO_ALPHA = CollectiveConfig(alpha_s=0.0)
SIZES = (2, 3, 4, 5, 8, 17, 64, 100, 257, 1024, 4096)


@pytest.fixture(scope="module")
def fabric(synth):
    """64 non-blocking ToR groups of 64 single-GPU hosts (64 x 200G down, 32 x 400G up)."""
    return synth.network(64, 64)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op, factor, steps", [("allreduce", lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1)),
                                               ("allgather", lambda n: (n - 1) / n, lambda n: n - 1),
                                               ("reducescatter", lambda n: (n - 1) / n, lambda n: n - 1)])
def test_ring_matches_closed_form(fabric, synth, n, op, factor, steps):
    pl = synth.place(fabric, n)
    alpha = 5e-6
    got = simulate_collective(fabric, pl, op, S, config=CollectiveConfig(alpha_s=alpha))
    want = factor(n) * S / (CAP * B) + steps(n) * alpha
    assert got.time_s == pytest.approx(want, rel=0.005)
    bare = simulate_collective(fabric, pl, op, S, config=NO_ALPHA)
    assert bare.time_s == pytest.approx(factor(n) * S / (CAP * B), rel=0.005)
    assert bare.busbw_gb_s == pytest.approx(CAP * B / 1e9, rel=0.005)
    assert bare.algbw_gb_s == pytest.approx(S / bare.time_s / 1e9)


def test_worked_example_1024_ranks(fabric, synth):
    """2 * 1023/1024 * 1 GB / (0.8 * 25 GB/s) = 99.902 ms (79.92 ms at line rate)."""
    got = simulate_collective(fabric, synth.place(fabric, 1024), "allreduce", 1e9, config=NO_ALPHA)
    assert got.time_s * 1e3 == pytest.approx(99.902, abs=0.0005)


def test_multi_rail_hosts_use_every_nic(synth):
    """8 GPUs and 8 NICs per host: 16 channels, two per rail, so a host's bottleneck is 8 NICs' worth,
    each NIC's one connection (its two channels) capped at 0.8 B."""
    net = synth.network(2, 4, gpus=8, nics=8)
    for hosts in (2, 8):
        n = 8 * hosts
        got = simulate_collective(net, synth.place(net, hosts, 8), "allreduce", S, config=NO_ALPHA)
        assert got.time_s == pytest.approx(2 * (n - 1) / n * S / (8 * CAP * B), rel=1e-9)


def test_single_host_ring_runs_on_nvlink(synth):
    net = synth.network(1, 1, gpus=8, nics=8, nvlink_gbps=2400)
    got = simulate_collective(net, synth.place(net, 1, 8), "allreduce", S, config=NO_ALPHA)
    assert got.time_s == pytest.approx(2 * 7 / 8 * S / 300e9, rel=1e-9)


@pytest.mark.parametrize("n", (5, 64, 1024))
def test_tree_allreduce_moves_2S_per_rank(fabric, synth, n):
    """Double binary tree, sprayed: every host is interior in one tree, so its NIC carries
    4 flows of S/2 -> t = 2S/B; busbw = (n-1)/n B."""
    got = simulate_collective(fabric, synth.place(fabric, n), "allreduce", S,
                              config=CollectiveConfig(alpha_s=0.0, algorithm="tree"), routing=EcmpConfig(mode="spray"))
    assert got.time_s == pytest.approx(2 * S / B, rel=0.005)
    assert got.busbw_gb_s == pytest.approx((n - 1) / n * B / 1e9, rel=0.005)


def test_tree_on_two_hosts_equals_ring(fabric, synth):
    """Both trees' channels cross the one edge each way: one connection per direction, capped."""
    tree = simulate_collective(fabric, synth.place(fabric, 2), "allreduce", S,
                               config=CollectiveConfig(alpha_s=0.0, algorithm="tree"))
    assert tree.time_s == pytest.approx(S / (CAP * B), rel=1e-9)
    ring = simulate_collective(fabric, synth.place(fabric, 2), "allreduce", S, config=NO_ALPHA)
    assert ring.time_s == pytest.approx(tree.time_s, rel=1e-9)


@pytest.mark.parametrize("n", (2, 8, 100))
def test_alltoall_and_sendrecv(fabric, synth, n):
    """All-to-all: each pair is one connection; a rank's n-1 of them share its NIC, so each
    moves min(B / (n-1), 0.8 B): the cap binds only for n = 2. Send/recv: one connection
    per rank, 0.8 B."""
    pl = synth.place(fabric, n)
    spray = EcmpConfig(mode="spray")
    a2a = simulate_collective(fabric, pl, "alltoall", S, config=NO_ALPHA, routing=spray)
    assert a2a.time_s == pytest.approx(S / n / min(B / (n - 1), CAP * B), rel=1e-6)
    assert a2a.busbw_gb_s == pytest.approx({2: 20.0, 8: 25.0, 100: 25.0}[n], rel=1e-6)
    p2p = simulate_collective(fabric, pl, "sendrecv", S, config=NO_ALPHA, routing=spray)
    assert p2p.time_s == pytest.approx(S / (CAP * B), rel=1e-9) and p2p.busbw_gb_s == pytest.approx(20.0)


def test_efficiency_scales_bandwidth_term(fabric, synth):
    pl = synth.place(fabric, 16)
    got = simulate_collective(fabric, pl, "allgather", S, config=CollectiveConfig(alpha_s=0.0, efficiency=0.8))
    assert got.time_s == pytest.approx(15 / 16 * S / (0.8 * CAP * B), rel=1e-9)


def test_two_rail_groups_on_one_nic_take_1_6x_as_long(synth):
    """7 NICs for 8 GPUs: GPUs 0 and 1 share NIC 0 (GPU g uses NIC g*7//8), so the rail groups
    of local ranks 0 and 1 share it, B/2 each, where the six others, alone on theirs, reach
    the cap 0.8 B: 1.6x, not 2x."""
    net = synth.network(2, 4, gpus=8, nics=7)
    pl = synth.place(net, 8, 8)
    groups = np.arange(64).reshape(8, 8).T                     # group l: local rank l of every host
    assert pl.nic[groups[:, 0]].tolist() == [0, 0, 1, 2, 3, 4, 5, 6]
    got = simulate_collective(net, pl, "allreduce", S, groups=groups, config=NO_ALPHA,
                              routing=EcmpConfig(mode="spray"))
    t = got.group_times_s
    assert t[0] == pytest.approx(t[1]) and t[0] / t[2] == pytest.approx(1.6, rel=1e-9)
    assert np.ptp(t[2:]) == pytest.approx(0.0, abs=1e-12)
    assert t[2] == pytest.approx(2 * 7 / 8 * S / (CAP * B), rel=1e-9)
    assert t[0] == pytest.approx(2 * 7 / 8 * S / (B / 2), rel=1e-9)


def test_rail_aligned_groups_take_equal_time(synth):
    net = synth.network(2, 4, gpus=8, nics=8)
    groups = np.arange(64).reshape(8, 8).T
    got = simulate_collective(net, synth.place(net, 8, 8), "reducescatter", S, groups=groups, config=NO_ALPHA,
                              routing=EcmpConfig(mode="spray"))
    assert np.ptp(got.group_times_s) == pytest.approx(0.0, abs=1e-12)
    assert got.time_s == pytest.approx(7 / 8 * S / (CAP * B), rel=1e-9)


def test_ring_channel_edges_stay_on_rails(synth):
    """Channel c enters each host at its c-th rank and leaves through that rank's NIC
    (one channel per NIC here; the default's duplicate channels are tested below)."""
    net = synth.network(1, 3, gpus=4, nics=4)
    pl = synth.place(net, 3, 4)
    flows = collective_flows(pl, np.arange(12)[None, :], "allreduce", S,
                             config=CollectiveConfig(alpha_s=0.0, channels_per_nic=1))
    inter = flows.src_host != flows.dst_host
    assert flows.n_coflows == 4 and inter.sum() == 4 * 3
    assert (flows.src_nic[inter] == flows.dst_nic[inter]).all()
    assert sorted(np.bincount(flows.src_nic[inter]).tolist()) == [3, 3, 3, 3]
    assert np.allclose(flows.coflow_bytes, 2 * 11 / 12 * S / 4)


def test_bus_factor_rejects_unknown_op():
    assert bus_factor("reducescatter", 8) == 7 / 8
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        bus_factor("broadcast", 8)


@pytest.mark.parametrize("kwargs, message", [({"alpha_s": -1.0}, "alpha_s"), ({"efficiency": 0.0}, "efficiency"),
                                             ({"algorithm": "nvls"}, "algorithm"), ({"channels": 0}, "channels")])
def test_config_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CollectiveConfig(**kwargs)


def _ring_edges_by_definition(pl, groups, channels):
    """Ring flows the slow way, one channel and group at a time: hosts (runs of one node)
    in group order, each rotated to start at its ``c mod k``-th rank, sending through
    that entry rank's NIC. Rows: src host, gpu, nic, dst host, gpu, nic, coflow."""
    rows = []
    for c in range(channels):
        for g, group in enumerate(groups):
            node = pl.node[group]
            starts = [j for j in range(len(group)) if j == 0 or node[j] != node[j - 1]]
            ends = starts[1:] + [len(group)]
            order, entry_rank = [], {}
            for s, e in zip(starts, ends):
                k = e - s
                cols = [s + (c % k + o) % k for o in range(k)]
                order += cols
                entry_rank.update({col: group[s + c % k] for col in cols})
            for p, col in enumerate(order):
                a, b = group[col], group[order[(p + 1) % len(order)]]
                rows.append((pl.host[a], pl.gpu[a], pl.nic[entry_rank[col]], pl.host[b], pl.gpu[b], pl.nic[b],
                             g * channels + c))
    return np.array(rows).T


@pytest.mark.parametrize("seed", range(4))
def test_ring_flows_equal_their_definition_on_uneven_hosts(seed):
    """Hosts holding 1 to 4 ranks of a group, a host split into two runs of a group, and
    three groups at once (int32 or int64 placement arrays): every channel's edges are the
    definition's."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 5, size=12)                        # ranks on each of the 12 hosts
    node = np.repeat(np.arange(12), counts)
    gpu = np.concatenate([rng.permutation(4)[:k] for k in counts])
    dtype = np.int32 if seed % 2 else np.int64                   # placements need not be int64
    pl = RankPlacement(*(a.astype(dtype) for a in (node, node, gpu, gpu)))
    w = node.size - node.size % 3
    groups = np.sort(rng.permutation(w).reshape(3, -1), axis=1)  # rank order inside each group
    groups[0, [1, 2]] = groups[0, [2, 1]]                        # a run of one host broken in two
    channels = 3
    flows = collective_flows(pl, groups, "allreduce", S, config=CollectiveConfig(channels=channels))
    got = np.stack([flows.src_host, flows.src_gpu, flows.src_nic, flows.dst_host, flows.dst_gpu, flows.dst_nic,
                    flows.coflow])
    want = _ring_edges_by_definition(pl, groups, channels)
    order = np.lexsort(got[::-1])                                # channel-major in ours, group-major there
    assert got.shape == want.shape and (got[:, order] == want[:, np.lexsort(want[::-1])]).all()
    assert (flows.conn.reshape(channels, -1) == flows.conn.reshape(channels, -1)[:, :1]).all()
    assert flows.conn.dtype == np.uint64 and np.unique(flows.conn).size == channels


@pytest.mark.parametrize("routing", [EcmpConfig(seed=3), EcmpConfig(seed=1, qps_per_connection=2),
                                     EcmpConfig(mode="spray")])
def test_cap_rows_routed_with_the_links_equal_stacked_ones(synth, routing):
    """run_flows routes the per-connection cap rows with the links; the result is the
    link matrix with the cap rows stacked below it, array for array, and the link matrix
    is the one a plain route gives. 4 groups of 4 hosts x 8 GPUs, 16 channels: each NIC's
    hop carries channels c and c + 8, host after host, so 8 rows per group of 2 coflows,
    each capped at 0.8 B whatever the queue pairs."""
    net = synth.network(4, 4, gpus=8, nics=8, uplinks=4, spines=2)
    pl = synth.place(net, 16, 8)
    groups = np.arange(pl.world_size).reshape(-1, 32)
    config = CollectiveConfig()
    flows = collective_flows(pl, groups, "allreduce", S, config=config, comm="dp")
    rows, cap = connection_caps(net, flows, config)
    assert rows.shape == (4 * 8, flows.n_coflows) and np.allclose(cap, CAP * B)
    got = sorted(tuple(rows.indices[rows.indptr[k]:rows.indptr[k + 1]].tolist()) for k in range(rows.shape[0]))
    assert got == sorted((16 * g + c, 16 * g + c + 8) for g in range(4) for c in range(8))
    assert (rows.data == 1.0).all()
    plain, with_caps = net.route(flows, routing), net.route(flows, routing, extra_rows=rows)
    stacked, capacity = rate_constraints(net, flows, plain, config)
    full, capacity2 = rate_constraints(net, flows, with_caps, config)
    assert full is with_caps.constraints and (capacity == capacity2).all()
    for name in ("indptr", "indices", "data"):
        assert (getattr(full, name) == getattr(stacked, name)).all()
        assert (getattr(with_caps.matrix, name) == getattr(plain.matrix, name)).all()
    assert full.shape == (net.n_links + rows.shape[0], flows.n_coflows)
