"""Multi-tier fabrics in the simulator: climb only as high as needed, hash at every tier, rail planes."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.examples import example_path
from rankmap.simulator.collectives import collective_flows, point_to_point_flows
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.events import simulate_flows
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.maxmin import max_min_rates
from rankmap.simulator.network import Network
from rankmap.simulator.stats import balls_into_bins, ecmp_stats
from rankmap.topology.spec import load_cluster, parse_cluster


def tiered_text(pods: int, groups_per_pod: int, hosts: int, *, nics: int = 1, uplinks: int, spines: int,
                spine_up: int, cores: int, spine_planes: str = "shared", nic_gbps: int = 100,
                uplink_gbps: int = 400, spine_up_gbps: int = 100) -> str:
    """``pods`` pods of ``groups_per_pod`` ToR groups of ``hosts`` hosts (1 GPU per NIC) under a
    spine tier (``spines`` per pod and plane, ``spine_up`` uplinks each) and a shared core."""
    rails = nics if spine_planes == "rail" else 1
    spine_down = -(-groups_per_pod * uplinks * (nics // rails) // spines)
    core_down = -(-pods * spines * spine_up * rails // cores)
    lines = ["name: tiered", f"hosts: {{gpus: {nics}, nics: {nics}}}",
             f"links: {{nic_gbps: {nic_gbps}, tor_downlink_gbps: {nic_gbps}, tor_uplinks: {uplinks}, "
             f"tor_uplink_gbps: {uplink_gbps}}}", "tor_groups:"]
    for p in range(pods):
        for g in range(groups_per_pod):
            name = f"p{p}g{g}"
            lines.append(f"  - {{name: {name}, capacity: {hosts}, hosts: '{name}n[01-{hosts:02d}]'}}")
    lines.append("switches:")
    for p in range(pods):
        kids = ", ".join(f"p{p}g{g}" for g in range(groups_per_pod))
        lines.append(f"  - {{name: pod{p}, children: [{kids}]}}")
    lines.append(f"  - {{name: core, children: [{', '.join(f'pod{p}' for p in range(pods))}]}}")
    lines += ["tiers:",
              f"  - {{name: spine, switches: {spines}, down_ports: {spine_down}, up_ports: {spine_up}, "
              f"down_gbps: {uplink_gbps}, up_gbps: {spine_up_gbps}, planes: {spine_planes}}}",
              f"  - {{name: core, switches: {cores}, down_ports: {core_down}, down_gbps: {spine_up_gbps}}}"]
    return "\n".join(lines) + "\n"


def tiered(**kw) -> Network:
    return Network(parse_cluster(tiered_text(**kw)))


def idle_fractions(net: Network, route, level: int) -> tuple[float, float]:
    """(idle fraction of the up cables of the switches that send traffic at ``level``, its
    balls-into-bins expectation given each switch's flow count: mean of (1 - 1/k)^m)."""
    if level == 0:
        links, k = route.uplink - net.link_range("tor-up").start, net.uplinks
    else:
        links, k = route.tier_uplinks[level - 1][0] - net.link_range(f"tier{level}-up").start, \
            net.fabric.levels[level - 1].up_ports
    counts = np.bincount(links, minlength=-(-(links.max() + 1) // k) * k).reshape(-1, k)
    counts = counts[counts.sum(axis=1) > 0]                       # (switches sending, k)
    expected = ((1 - 1 / k) ** counts.sum(axis=1)).mean()
    return float((counts == 0).mean()), float(expected)


# 2 pods x 1 ToR group x 64 hosts; 16 ToR uplinks on 8 spines per pod; each spine has 8 uplinks
# (more than the 4 core switches) at 100G, NICs at 100G.
POLAR = dict(pods=2, groups_per_pod=1, hosts=64, uplinks=16, spines=8, spine_up=8, cores=4)


def pod_to_pod(net: Network, m: int = 64):
    """``m`` flows from the hosts of pod 0 to the hosts of pod 1 (one per host pair)."""
    pl = RankPlacement.on_hosts(net, [h.name for h in net.cluster.hosts], 1)
    return point_to_point_flows(pl, np.arange(m), np.arange(m) + m, 1e9)


def test_same_salt_polarises_the_second_tier_and_per_switch_salts_do_not():
    """A spine gets the flows whose hash is its index mod 8 at the ToR; with the ToR's salt it
    picks uplink hash mod 8 = its own index every time: 1 of its 8 uplinks, 7/8 idle. Salted per
    switch, idle uplinks follow balls into bins, (1 - 1/k)^m per switch with m its flows, within 2%.
    The ToR tier hashes once, so both settings match balls into bins there."""
    net = tiered(**POLAR)
    flows = pod_to_pod(net)
    got = {}
    for per_switch in (False, True):
        rows = [[*idle_fractions(net, route, 0), *idle_fractions(net, route, 1)]
                for route in (net.route(flows, EcmpConfig(seed=s, per_switch_salt=per_switch)) for s in range(300))]
        got[per_switch] = np.mean(rows, axis=0)
    tor_same, tor_expected_same, spine_same, _ = got[False]
    tor_salted, tor_expected, spine_salted, spine_expected = got[True]
    assert tor_same == pytest.approx(tor_expected_same, abs=0.02)
    assert tor_salted == pytest.approx(tor_expected, abs=0.02)
    assert tor_expected == pytest.approx(balls_into_bins(64, 16)["idle_fraction"], abs=0.02)  # 64 flows on 16
    assert spine_same == pytest.approx(7 / 8, abs=1e-9)
    assert spine_salted == pytest.approx(spine_expected, abs=0.02)
    # A spine uplink stays idle when no flow picks its spine (1/8) and then it (1/8): (1 - 1/64)^64.
    assert spine_expected == pytest.approx((1 - 1 / 64) ** 64, abs=0.01)
    assert spine_salted == pytest.approx((1 - 1 / 64) ** 64, abs=0.02)


def test_same_salt_loses_bandwidth_at_the_second_tier():
    """Spine uplinks (100G) are the scarce links: with one salt each spine sends all its flows up
    one cable, so the 64 flows share 8 of the pod's 64 spine uplinks; salted per switch they get
    about (1 - (7/8)^8) * 64 = 42 cables. Max-min rates show it: same salt moves under a quarter
    of what per-switch salts move."""
    net = tiered(**POLAR)
    flows = pod_to_pod(net)
    total = {}
    for per_switch in (False, True):
        rates = [max_min_rates(net.route(flows, EcmpConfig(seed=s, per_switch_salt=per_switch)).matrix,
                               net.capacity_bps).sum() for s in range(20)]
        total[per_switch] = float(np.mean(rates))
    assert total[False] == pytest.approx(8 * 100e9 / 8, rel=1e-6)   # 8 busy uplinks x 100G
    assert total[True] > 3.5 * total[False]


def two_pods() -> Network:
    return tiered(pods=2, groups_per_pod=2, hosts=2, uplinks=4, spines=4, spine_up=2, cores=2,
                  spine_up_gbps=400, nic_gbps=200)


def ring_bytes(net: Network, hosts: list[str], size_bytes: float, routing: EcmpConfig) -> dict:
    """Bytes per link kind of one ring all-gather over one rank on each of ``hosts``."""
    pl = RankPlacement.on_hosts(net, hosts, 1)
    flows = collective_flows(pl, np.arange(len(hosts))[None, :], "allgather", size_bytes)
    link_bytes = simulate_flows(net, flows, routing).link_bytes
    return {k: float(link_bytes[net.link_range(k).start:net.link_range(k).stop].sum()) for k in net.link_kinds}


@pytest.mark.parametrize("mode", ["ecmp", "spray"])
def test_ring_inside_one_pod_never_touches_a_core_link(mode):
    net = two_pods()
    got = ring_bytes(net, ["p0g0n01", "p0g0n02", "p0g1n01", "p0g1n02"], 1e9, EcmpConfig(mode=mode))
    assert got["tier1-up"] == got["tier1-down"] == got["tier1-up-all"] == got["tier1-down-all"] == 0.0
    # Two edges cross the pod's spines (p0g0 -> p0g1 and back), each (n-1)/n S = 0.75 GB.
    assert got["tor-up"] == pytest.approx(2 * 0.75e9)


def test_ring_across_two_pods_loads_the_core_as_counted_by_hand():
    """Ring p0g0 -> p0g1 -> p1g0 -> p1g1 -> p0g0 over 4 ranks: two edges leave a pod, each
    carrying (n-1)/n S = 0.75 GB up one spine uplink and down one core cable."""
    net = two_pods()
    hosts = ["p0g0n01", "p0g1n01", "p1g0n01", "p1g1n01"]
    ecmp = ring_bytes(net, hosts, 1e9, EcmpConfig())
    assert ecmp["tier1-up"] == ecmp["tier1-down"] == pytest.approx(2 * 0.75e9)
    assert ecmp["tor-up"] == pytest.approx(4 * 0.75e9)           # every edge leaves its rail ToR
    spray = ring_bytes(net, hosts, 1e9, EcmpConfig(mode="spray"))
    assert spray["tier1-up-all"] == spray["tier1-down-all"] == pytest.approx(2 * 0.75e9)
    assert spray["tier1-up"] == 0.0


def test_rail_planes_keep_each_rail_on_its_own_spines():
    """Spine planes per rail: the traffic of rail r (local rank r on every host) climbs only
    through plane r's spines, whichever pod it leaves."""
    net = tiered(pods=2, groups_per_pod=1, hosts=4, nics=4, uplinks=4, spines=2, spine_up=2, cores=4,
                 spine_planes="rail", spine_up_gbps=400)
    level = net.fabric.levels[0]
    assert (level.planes, level.switches) == (4, 2)
    hosts = [h.name for h in net.cluster.hosts]
    pl = RankPlacement.on_hosts(net, hosts, 4)
    up = net.link_range("tier1-up")
    for rail in range(4):
        ring = (np.arange(len(hosts)) * 4 + rail)[None, :]       # local rank `rail` of every host
        route = net.route(collective_flows(pl, ring, "allgather", 1e9), EcmpConfig())
        used = np.flatnonzero(route.matrix.sum(axis=1)[up.start:up.stop])
        assert used.size > 0
        planes = (used // level.cables_per_plane) % level.planes   # cable -> (domain, plane)
        assert set(planes.tolist()) == {rail}


def test_port_counts_and_speeds_come_from_the_tiers():
    """oversubscribed-core: 4 pods x 32 spines x 16 uplinks = 2,048 spine uplinks at 400G;
    megascale-3tier: 6 pods x 32 x 32 = 6,144. Rail ToR uplinks stay 24 groups x 8 rails x 32."""
    for name, pods, up in (("oversubscribed-core", 4, 16), ("megascale-3tier", 6, 32)):
        net = Network(load_cluster(example_path(name, "cluster.yaml")))
        cables = net.link_range("tier1-up")
        assert len(cables) == len(net.link_range("tier1-down")) == pods * 32 * up
        assert set(net.capacity_bps[cables.start:cables.stop].tolist()) == {400e9 / 8}
        assert len(net.link_range("tor-up")) == 24 * 8 * 32
        bundle = net.link_range("tier1-up-all")
        assert len(bundle) == pods and net.capacity_bps[bundle.start] == 32 * up * 400e9 / 8
        assert net.depth == 2 and "tier2-up" not in net.link_kinds
    assert net.describe(cables.start + 32 * 32 + 33) == "tier1-up spine domain 1/plane0/spine1/uplink1 -> core33"


def test_ecmp_stats_per_tier_show_polarisation():
    """ecmp_stats keeps idle uplinks per tier: 7/8 at the spines under one salt (see above),
    about (1 - 1/64)^64 salted per switch; the ToR tier alike in both."""
    net = tiered(**POLAR)
    flows = pod_to_pod(net)
    same = ecmp_stats(net, flows, range(40), EcmpConfig(per_switch_salt=False)).tier_summary()
    salted = ecmp_stats(net, flows, range(40)).tier_summary()
    assert [t["idle_uplink_fraction"]["mean"] for t in same][1] == pytest.approx(7 / 8)
    assert salted[1]["idle_uplink_fraction"]["mean"] == pytest.approx((1 - 1 / 64) ** 64, abs=0.03)
    assert same[0]["idle_uplink_fraction"]["mean"] == pytest.approx(salted[0]["idle_uplink_fraction"]["mean"],
                                                                     abs=0.01)
    assert same[1]["bandwidth_lost"]["mean"] > salted[1]["bandwidth_lost"]["mean"] + 0.3
