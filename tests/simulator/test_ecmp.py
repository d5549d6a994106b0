"""ECMP hashing: balls into bins over seeds, hash polarization, queue pairs, spraying."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.simulator.collectives import point_to_point_flows
from rankmap.simulator.ecmp import EcmpConfig, choose, flow_hash, mix64, roce_source_port, switch_salt
from rankmap.simulator.maxmin import max_min_rates
from rankmap.simulator.stats import balls_into_bins, ecmp_stats

SEEDS = range(1000)


def cross_flows(synth, m: int, k: int, nic_gbps: int, uplink_gbps: int, spines: int | None = None):
    """m flows from the m hosts of group 0 to the m hosts of group 1, k uplinks per ToR."""
    net = synth.network(2, m, uplinks=k, uplink_gbps=uplink_gbps, nic_gbps=nic_gbps, spines=spines)
    pl = synth.place(net)
    return net, point_to_point_flows(pl, np.arange(m), np.arange(m, 2 * m), 1e9)


def test_mix64_is_fmix64_and_leaves_input_alone():
    x = np.array([1, 2], dtype=np.uint64)
    assert hex(int(mix64(x)[0])) == "0xb456bcfc34c2cb2c"
    assert x.tolist() == [1, 2]
    assert mix64(x).tolist() == mix64(np.array([1, 2], dtype=np.uint64)).tolist()


def test_hash_spreads_evenly_and_depends_on_every_field():
    h = flow_hash(np.arange(64_000), 7, 50_000, switch_salt(0, 3))
    counts = np.bincount(choose(h, 32), minlength=32)
    assert counts.min() > 0.9 * 2000 and counts.max() < 1.1 * 2000
    base = flow_hash(1, 2, 50_000, switch_salt(0, 3))
    for other in (flow_hash(1, 3, 50_000, switch_salt(0, 3)), flow_hash(1, 2, 50_001, switch_salt(0, 3)),
                  flow_hash(1, 2, 50_000, switch_salt(0, 4)), flow_hash(1, 2, 50_000, switch_salt(1, 3))):
        assert int(other[0]) != int(base[0])


def test_source_ports_are_roce_range_and_seeded():
    ports = roce_source_port(np.arange(1000), 0, seed=5)
    assert ports.min() >= 0xC000 and ports.max() <= 0xFFFF
    assert ports.tolist() == roce_source_port(np.arange(1000), 0, seed=5).tolist()
    assert ports.tolist() != roce_source_port(np.arange(1000), 0, seed=6).tolist()


@pytest.mark.parametrize("kwargs, message", [({"mode": "flowlet"}, "routing mode"), ({"seed": -1}, "seed"),
                                             ({"qps_per_connection": 0}, "qps_per_connection")])
def test_config_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EcmpConfig(**kwargs)


def test_balls_into_bins_32_flows_on_32_uplinks(synth):
    """Every flow at one uplink's line rate (400G NICs, 400G uplinks)."""
    net, flows = cross_flows(synth, 32, 32, 400, 400)
    st = ecmp_stats(net, flows, SEEDS)
    want = balls_into_bins(32, 32)
    assert st.idle_uplink_fraction.mean() == pytest.approx(want["idle_fraction"], rel=0.02)
    assert 1 - st.bandwidth_lost.mean() == pytest.approx(want["throughput"], rel=0.02)
    assert want["throughput"] == pytest.approx(0.638, abs=5e-4)
    assert st.max_flows_per_uplink.mean() == pytest.approx(3.53, rel=0.02)


def test_share_probability_over_seeds(synth):
    net, flows = cross_flows(synth, 32, 32, 400, 400)
    shared = []
    for seed in range(300):
        up = net.route(flows, EcmpConfig(seed=seed)).uplink
        counts = np.bincount(up)
        shared.append((counts[up] > 1).mean())
    assert np.mean(shared) == pytest.approx(balls_into_bins(32, 32)["share_probability"], rel=0.02)


def test_megascale_2x_uplinks(synth):
    """64 x 200G flows on 32 x 400G uplinks: E[max] ~ 5.41 flows, slowest ~2.70x, aggregate ~73.4%."""
    net, flows = cross_flows(synth, 64, 32, 200, 400)
    st = ecmp_stats(net, flows, SEEDS)
    assert st.max_flows_per_uplink.mean() == pytest.approx(5.41, rel=0.02)
    assert st.slowest_slowdown.mean() == pytest.approx(2.70, rel=0.02)
    assert 1 - st.bandwidth_lost.mean() == pytest.approx(0.734, rel=0.02)


def test_spraying_loses_nothing(synth):
    net, flows = cross_flows(synth, 64, 32, 200, 400)
    route = net.route(flows, EcmpConfig(mode="spray"))
    assert route.uplink.size == 0
    rates = max_min_rates(route.matrix, net.capacity_bps)
    assert np.allclose(rates, 25e9)                             # every flow at its NIC's line rate
    assert route.matrix.sum() == pytest.approx(64 * 4)          # NIC up, 32 x 1/32 up, 32 x 1/32 down, NIC down


def test_more_queue_pairs_shorten_the_slowest_connection(synth):
    """Meta (SIGCOMM 2024): several queue pairs per connection spread a connection over paths. A
    connection splits its bytes evenly over its queue pairs, so it moves at the pace of its worst
    one; with 4 the worst uplink holds fewer flow-equivalents and the slowest connection gains."""
    net, flows = cross_flows(synth, 32, 32, 400, 400)
    one = ecmp_stats(net, flows, range(200), EcmpConfig(qps_per_connection=1))
    four = ecmp_stats(net, flows, range(200), EcmpConfig(qps_per_connection=4))
    assert four.slowest_slowdown.mean() < 0.75 * one.slowest_slowdown.mean()
    assert four.flows_per_used_uplink.mean() > one.flows_per_used_uplink.mean()  # 128 sub-flows on 32 uplinks


def test_two_tier_polarization_generic():
    """Tier 1 hashes m flows onto k tier-2 switches, each hashes onto its k uplinks. With one salt
    everywhere a tier-2 switch only receives flows with hash = p (mod k) and sends them all to
    uplink p: 1/k of tier-2 uplinks used. Salting per switch uses them all."""
    k, m = 4, 400
    src, dst, sport = np.arange(m), np.arange(m) + 10_000, 50_000 + np.arange(m) % 7
    for per_switch, used_fraction in ((False, 1 / k), (True, 1.0)):
        tier1 = choose(flow_hash(src, dst, sport, switch_salt(0, 0, per_switch)), k)
        tier2 = choose(flow_hash(src, dst, sport, switch_salt(0, 1 + tier1, per_switch)), k)
        used = {(int(a), int(b)) for a, b in zip(tier1, tier2)}
        assert len(used) / (k * k) == pytest.approx(used_fraction)


def test_polarization_in_the_fabric(synth):
    """8 uplinks per rail ToR on 4 spines: two cables from each spine down to each ToR. The spine
    hashes among them; with the ToR's salt it picks cable index u % 2 = s % 2 every time, so half
    the down cables of the destination ToR stay idle. Per-switch salts use nearly all of them."""
    net, flows = cross_flows(synth, 32, 8, 200, 400, spines=4)
    down = net.link_range("tor-down")
    dest = slice(down.start + 8, down.start + 16)               # group 1, rail 0: cables 0..7
    idle = {}
    for per_switch in (False, True):
        fractions = []
        for seed in range(50):
            route = net.route(flows, EcmpConfig(seed=seed, per_switch_salt=per_switch))
            load = route.matrix.sum(axis=1)[dest]
            fractions.append((load == 0).mean())
        idle[per_switch] = np.mean(fractions)
    assert idle[False] == pytest.approx(0.5, abs=0.01)
    assert idle[True] == pytest.approx((7 / 8) ** 32, abs=0.03)
