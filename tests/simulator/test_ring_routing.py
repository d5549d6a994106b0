"""A ring's routing from its host segments (flows between hosts, NVLink rows, connections
for the rate cap) equals the routing of its full flow table, array for array; the table
itself is never built on the way."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import sparse

from rankmap.simulator.collectives import CollectiveConfig, collective_flows, run_flows, simulate_collective
from rankmap.simulator.connections import connection_caps
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import FLOW_FIELDS, LazyFlowSet, RankPlacement

S = 1e9


def _placements(net, seed: int):
    """Ranks on every host in cluster order (8 per host), in a shuffled host order, and 3 per
    host on a shuffled half of the hosts (local ranks 0-2 on GPUs and NICs 0-2)."""
    rng = np.random.default_rng(seed)
    hosts = [h.name for h in net.cluster.hosts]
    shuffled = list(rng.permutation(hosts))
    return [RankPlacement.on_hosts(net, hosts, 8), RankPlacement.on_hosts(net, shuffled, 8),
            RankPlacement.on_hosts(net, shuffled[:len(hosts) // 2], 3)]


def _groups(world: int, seed: int):
    """One group of every rank, groups of ranks 8 apart (data parallel across hosts), and
    four groups of shuffled ranks (most hosts hold one rank of a group)."""
    rng = np.random.default_rng(seed)
    w = world - world % 8
    return [np.arange(world)[None, :], np.arange(w).reshape(-1, 8).T.copy(), rng.permutation(w).reshape(4, -1)]


def _full(flows):
    """The same flows as an ordinary flow set (reading every field builds the table)."""
    return dataclasses.replace(flows)


def _same(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and (a == b).all()


@pytest.mark.parametrize("routing", [EcmpConfig(seed=2), EcmpConfig(seed=1, qps_per_connection=2),
                                     EcmpConfig(mode="spray")])
@pytest.mark.parametrize("seed", range(2))
def test_ring_routing_equals_the_flow_table_routing(synth, routing, seed):
    """Matrix and cap rows (data, indices, row pointers), hashed uplinks and levels, and the
    entries per coflow FairShare reads, on 4 ToR groups of 4 hosts of 8 GPUs and 8 rails."""
    net = synth.network(4, 4, gpus=8, nics=8, uplinks=4, spines=2)
    config = CollectiveConfig(channels=3 if seed else None)
    for pl in _placements(net, seed):
        for groups in _groups(pl.world_size, seed):
            flows = collective_flows(pl, groups, "allreduce", S, config=config, comm="dp")
            assert isinstance(flows, LazyFlowSet)
            full = _full(flows)
            picked = np.arange(flows.n_coflows)[::2]                # a row for every other coflow
            extra = sparse.csr_array((np.ones(picked.size), (np.arange(picked.size), picked)),
                                     shape=(picked.size, flows.n_coflows))
            ours, want = net.route(flows, routing, extra_rows=extra), net.route(full, routing, extra_rows=extra)
            for name in ("indptr", "indices", "data"):
                assert _same(getattr(ours.constraints, name), getattr(want.constraints, name))
                assert _same(getattr(ours.matrix, name), getattr(want.matrix, name))
            assert ours.constraints.has_canonical_format and ours.matrix.has_canonical_format
            for name in ("uplink", "uplink_coflow", "coflow_level"):
                assert _same(getattr(ours, name), getattr(want, name))
            entries = np.bincount(want.constraints.indices, minlength=flows.n_coflows)
            assert (ours.column_entries == entries).all() and want.column_entries is None
            between = flows.between_set()
            for name in FLOW_FIELDS:
                assert _same(getattr(between, name), getattr(full, name)[full.between_hosts])
            assert _same(flows.between_hosts, full.between_hosts)


@pytest.mark.parametrize("channels", (None, 1, 3, 5, 16))
@pytest.mark.parametrize("seed", range(3))
def test_ring_connections_equal_the_sorted_grouping(synth, seed, channels):
    """The cap rows a ring's segments give (channels alike modulo the lcm of two segments'
    lengths share a hop) equal those of grouping its full flow table by sender, NIC and
    receiver, array for array, on hosts holding 1 to 8 ranks of a group."""
    net = synth.network(4, 4, gpus=8, nics=8, uplinks=4, spines=2)
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 9, size=12)                        # ranks on each of the 12 hosts
    node = np.repeat(np.arange(12), counts)
    gpu = np.concatenate([rng.permutation(8)[:k] for k in counts])
    pl = RankPlacement(node, node, gpu, gpu)
    w = node.size - node.size % 3
    config = CollectiveConfig(channels=channels)
    for groups in (np.arange(w)[None, :], np.sort(rng.permutation(w).reshape(3, -1), axis=1),
                   rng.permutation(w).reshape(3, -1)):
        flows = collective_flows(pl, groups, "allreduce", S, config=config, comm="dp")
        assert flows.connection_groups(net.gpus) is not None
        ours, cap = connection_caps(net, flows, config)
        want, want_cap = connection_caps(net, _full(flows), config)
        assert ours.shape[0] > 0 and ours.shape == want.shape and (cap == want_cap).all()
        for name in ("indptr", "indices", "data"):
            assert _same(getattr(ours, name), getattr(want, name))


def test_the_flow_table_is_not_built_to_simulate_a_ring(synth):
    """Routing, caps, filling and events read the flows between hosts and the NVLink rows
    only; the per-flow arrays are built when read, with the values an ordinary set has."""
    net = synth.network(2, 4, gpus=8, nics=8, uplinks=4, spines=2)
    pl = synth.place(net, 8, 8)
    flows = collective_flows(pl, np.arange(64)[None, :], "allreduce", S, comm="allreduce")
    result = run_flows(net, flows, EcmpConfig(), CollectiveConfig())
    assert "_build" in flows.__dict__ and flows.n_flows == 16 * 64     # 16 channels of 64 edges, unbuilt
    want = run_flows(net, _full(flows), EcmpConfig(), CollectiveConfig())
    assert _same(result.finish_s, want.finish_s) and _same(result.link_bytes, want.link_bytes)
    assert flows.src_host.size == 1024 and "_build" not in flows.__dict__
    assert simulate_collective(net, pl, "allreduce", S).time_s == pytest.approx(result.time_s)


def test_ranks_sharing_a_gpu_route_through_the_flow_table(synth):
    """Two ranks on one GPU (a placement the NVLink rows cannot key by GPU): routing falls
    back to the flow table and gives the same matrix."""
    net = synth.network(1, 2, gpus=2, nics=2, uplinks=2, spines=2)
    pl = RankPlacement(np.array([0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 1]), np.array([0, 1, 0, 1, 1]),
                       np.array([0, 1, 0, 1, 1]))
    flows = collective_flows(pl, np.arange(5)[None, :], "allreduce", S)
    assert flows.nvlink_rows(net.gpus) is None
    ours, want = net.route(flows, EcmpConfig()), net.route(_full(flows), EcmpConfig())
    for name in ("indptr", "indices", "data"):
        assert _same(getattr(ours.matrix, name), getattr(want.matrix, name))
