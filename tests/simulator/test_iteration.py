"""A training iteration of a placed job: the planner's traffic, phase by phase."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.job.layout import COORD, ParallelLayout
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.job.traffic import job_traffic
from rankmap.placement.metrics import evaluate
from rankmap.simulator.collectives import CollectiveConfig, bus_factor
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import CommOp, job_comm_ops, simulate_iteration
from rankmap.simulator.network import Network
from rankmap.simulator.stats import sweep_iteration


@pytest.fixture(scope="module")
def racks(racks_plan):
    cluster, result = racks_plan
    net = Network(cluster)
    maps = {"rankmap plan": result.rankmap}
    maps.update({c.name: RankMap.from_hosts(result.job, cluster, list(c.hosts), 8) for c in result.baselines})
    return net, result, maps


@pytest.mark.parametrize("job", [JobSpec(tp=8, pp=8, dp=4, num_micro_batches=6),
                                 JobSpec(tp=4, pp=2, dp=6, cp=2, num_micro_batches=3, data_parallel="allreduce"),
                                 JobSpec(tp=8, pp=4, dp=2, num_micro_batches=8, virtual_stages=2),
                                 JobSpec(tp=2, pp=2, dp=4, ep=2, num_micro_batches=2,
                                         model=ModelShape(layers=4, hidden=1024, heads=8, seq_len=512, experts=4))])
def test_ops_carry_the_planners_bytes(job):
    """Per rank and iteration, the collectives move what rankmap.job.traffic accounts."""
    traffic = job_traffic(job)
    sent: dict[str, float] = {}
    for o in job_comm_ops(job):
        n = traffic[o.kind].group_size
        per_rank = o.size_bytes * o.count * (1.0 if o.op == "p2p" else bus_factor(o.op, n))
        sent[o.kind] = sent.get(o.kind, 0.0) + per_rank
    for kind, tr in traffic.items():
        assert sent.get(kind, 0.0) == pytest.approx(tr.rank_bytes, rel=1e-12), kind
    wrap = sum(o.size_bytes * o.wrap_count for o in job_comm_ops(job))
    assert wrap == pytest.approx(traffic["pp"].wrap_bytes, rel=1e-12)


def interleaved_maps(cluster):
    """The racks cluster with an interleaved job (vpp 2): plan and baselines."""
    from rankmap.placement.plan import plan
    job = JobSpec(name="vpp", tp=8, pp=4, dp=None, num_micro_batches=8, virtual_stages=2,
                  model=ModelShape(layers=16, hidden=2048, heads=16, seq_len=1024))
    result = plan(cluster, job)
    maps = {"rankmap plan": result.rankmap}
    maps.update({c.name: RankMap.from_hosts(result.job, cluster, list(c.hosts), 8) for c in result.baselines})
    return result, maps


@pytest.mark.parametrize("interleaved", [False, True])
def test_spine_bytes_equal_the_planners_cross_tor_bytes(racks, racks_plan, interleaved):
    """Rail-aligned, one rank per host in DP and PP groups: the bytes the simulated flows put on
    the uplinks are exactly the planner's cross-ToR bytes, group by group (with interleaved
    stages, the last-to-first hop included)."""
    net, result, maps = racks
    if interleaved:
        result, maps = interleaved_maps(racks_plan[0])
    for name, rm in maps.items():
        it = simulate_iteration(net, RankPlacement.from_rankmap(rm, net), rm.layout, job_comm_ops(result.job))
        up = it.uplink_bytes(net).sum(axis=1)
        down_range = net.link_range("tor-down")
        down = sum(p.link_bytes[down_range.start:down_range.stop] for p in it.phases).reshape(net.n_groups, -1).sum(1)
        tor = np.repeat([net.host_group[net.host_index[h]] for h in rm.hosts], 8)
        metrics = evaluate(rm.layout, job_traffic(result.job), tor, net.n_groups)
        assert up.sum() == pytest.approx(metrics.cross_tor_bytes, rel=1e-9), name
        assert np.allclose(up + down, metrics.uplink_bytes, rtol=1e-9), name


def test_phases_and_their_closed_forms(racks):
    """Racks: 16 hosts x 400G under 16 x 400G uplinks per rail ToR, sprayed: non-blocking, so the
    DP reduce-scatter (n = 15) takes 14/15 S / (0.8 x 50 GB/s) + 14 alpha (each NIC's ring hop is
    one connection, capped at 0.8 of line rate: CollectiveConfig.connection_rate_fraction)."""
    net, result, maps = racks
    rm = maps["rankmap plan"]
    alpha = 5e-6
    it = simulate_iteration(net, RankPlacement.from_rankmap(rm, net), rm.layout, job_comm_ops(result.job),
                            CollectiveConfig(alpha_s=alpha), EcmpConfig(mode="spray"))
    assert [p.name for p in it.phases] == ["dp-gather", "pipeline", "dp-reduce"]
    grads = job_traffic(result.job)["dp"].op_bytes
    assert it.phase("dp-reduce").time_s == pytest.approx(14 / 15 * grads / (0.8 * 50e9) + 14 * alpha, rel=1e-9)
    assert it.phase("dp-gather").time_s == pytest.approx(14 / 15 * grads / 2 / (0.8 * 50e9) + 14 * alpha, rel=1e-9)
    assert it.comm_time_s == pytest.approx(sum(p.time_s for p in it.phases))
    pipeline = it.phase("pipeline")
    assert [q.label for q in pipeline.parts] == ["tp allreduce", "pp p2p"]
    tp = pipeline.parts[0]
    tr = job_traffic(result.job)["tp"]   # 8 GPUs on NVLink (3600 Gb/s): 2 * 7/8 S per op
    assert tp.group_times_s.max() == pytest.approx(tr.ops * (7 / 4 * tr.op_bytes / 450e9 + 14 * alpha), rel=1e-9)
    assert np.ptp(tp.group_times_s) == pytest.approx(0.0, abs=1e-12)


def test_plan_beats_random_arrival_order(racks):
    """Arrival order spreads DP rings over all racks; hashed onto uplinks they collide."""
    net, result, maps = racks
    ops = job_comm_ops(result.job)
    times = {name: sweep_iteration(net, RankPlacement.from_rankmap(rm, net), rm.layout, ops, range(3)).comm_time_s
             for name, rm in maps.items()}
    plan = times["rankmap plan"]
    # No DP ring crosses more than it must: no collisions. (Equal up to an ulp or two: the PP
    # hops, hashed per seed, split the pipeline phase into different events.)
    assert np.ptp(plan) <= 1e-15 * plan.max()
    # 1.75-1.97x with NCCL's two channels per NIC and the 0.8 per-connection cap (1.96-2.20x
    # without the cap, which slows the plan's rings but not collided ones, already below it)
    assert (times["arrival order"] > 1.7 * plan).all()
    for name, t in times.items():
        assert (t >= plan * (1 - 1e-9)).all(), name


def test_sweep_reports_ideal_and_ecmp_stats(racks):
    net, result, maps = racks
    rm = maps["arrival order"]
    sweep = sweep_iteration(net, RankPlacement.from_rankmap(rm, net), rm.layout, job_comm_ops(result.job), [0, 1])
    assert sweep.seeds == (0, 1) and sweep.comm_time_s.shape == (2,)
    assert sweep.ideal.comm_time_s < sweep.comm_time_s.min()
    stats = sweep.ecmp["dp-reduce"]
    assert (stats.bandwidth_lost > 0).all() and (stats.slowest_slowdown > 1).all()
    assert sweep.comm_time_s[0] == pytest.approx(sweep.first.comm_time_s)
    phase, part, group = sweep.first.slowest()
    assert phase.name == "dp-reduce" and part.label == "dp reducescatter"
    assert part.group_times_s[group] == pytest.approx(phase.time_s)


def test_sweep_under_spraying_is_ideal(racks):
    net, result, maps = racks
    rm = maps["arrival order"]
    sweep = sweep_iteration(net, RankPlacement.from_rankmap(rm, net), rm.layout, job_comm_ops(result.job), [0],
                            routing=EcmpConfig(mode="spray"))
    assert sweep.comm_time_s[0] == pytest.approx(sweep.ideal.comm_time_s)
    assert all(s.bandwidth_lost.max() == 0.0 for s in sweep.ecmp.values())


def test_expert_data_parallel_groups():
    job = JobSpec(tp=2, pp=1, dp=8, ep=4, num_micro_batches=1,
                  model=ModelShape(layers=2, hidden=256, heads=4, seq_len=64, experts=8))
    layout = ParallelLayout.of(job)
    table = layout.groups("dp_ep")
    assert table.shape == (8, 2)
    coords = layout.coord_table[table]                       # (groups, members, 5)
    for dim in ("tp", "cp", "ep", "pp"):                     # equal inside a group
        col = COORD[dim]
        assert (coords[:, :, col] == coords[:, :1, col]).all()
    assert sorted(table.ravel().tolist()) == list(range(16))


def test_commop_validates():
    with pytest.raises(ValueError, match="kind"):
        CommOp(kind="xp", op="allreduce", size_bytes=1, count=1, phase="pipeline")
    with pytest.raises(ValueError, match="phase"):
        CommOp(kind="tp", op="allreduce", size_bytes=1, count=1, phase="warmup")
