"""Release times in the event loop, and each stage's gradient reduction from when its backward ends."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.simulator.collectives import CollectiveConfig, simulate_collective
from rankmap.simulator.compute import StageTimes
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.events import complete_coflows
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import job_comm_ops, simulate_iteration, simulate_phase
from rankmap.simulator.maxmin import FairShare
from rankmap.simulator.schedule import OverlapConfig, PipelineCosts, backward_pass_s, run_schedule
from rankmap.simulator.staging import _busy_s, chunk_release_s, reduce_release_s, stage_reduce_s, staged_comm_times
from rankmap.simulator.timing import comm_times, iteration_timing


def fair_of(rows: list[list[float]], capacity: list[float]) -> FairShare:
    return FairShare(sparse.csr_array(np.array(rows, dtype=float)), np.array(capacity))


def test_second_coflow_released_later_on_one_link_by_hand():
    # 10 B/s link. A: 10 B from 0 s; B: 30 B from 0.5 s. A alone until 0.5 s (5 B left), then
    # 5 B/s each: A ends at 1.5 s, B has 25 B left, alone at 10 B/s ends at 4.0 s.
    finish, first, _ = complete_coflows(fair_of([[1, 1]], [10.0]), np.array([10.0, 30.0]),
                                        release_s=np.array([0.0, 0.5]))
    assert finish.tolist() == [1.5, 4.0]
    assert first.tolist() == [10.0, 5.0]           # each coflow's rate on entering


def test_release_after_an_idle_link_and_in_another_component_by_hand():
    # Link 0 (10 B/s): A (20 B, at 0) and C (10 B, at 1 s); link 1 (10 B/s): B (10 B, at 1 s).
    # A alone to 1 s (10 B left); then A and C at 5 B/s end at 3 s; B alone ends at 2 s.
    fair = fair_of([[1, 0, 1], [0, 1, 0]], [10.0, 10.0])
    finish, first, _ = complete_coflows(fair, np.array([20.0, 10.0, 10.0]), release_s=np.array([0.0, 1.0, 1.0]))
    assert finish.tolist() == [3.0, 2.0, 3.0]
    assert first.tolist() == [10.0, 10.0, 5.0]
    # idle gap: the second 10 B coflow arrives at 3 s, after the first ended at 1 s
    finish, _, _ = complete_coflows(fair_of([[1, 1]], [10.0]), np.array([10.0, 10.0]), release_s=np.array([0.0, 3.0]))
    assert finish.tolist() == [1.0, 4.0]


@pytest.mark.parametrize("seed", range(3))
def test_zero_releases_are_bit_identical_and_late_ones_shift(seed):
    rng = np.random.default_rng(seed)
    rows = (rng.random((12, 30)) < 0.2).astype(float)
    rows[rng.integers(0, 12, 30), np.arange(30)] = 1.0                 # every coflow on some link
    fair = fair_of(rows.tolist(), (rng.random(12) * 9 + 1).tolist())
    size = rng.random(30) * 100
    old = complete_coflows(fair, size)
    new = complete_coflows(fair_of(rows.tolist(), fair.capacity.tolist()), size, release_s=np.zeros(30))
    assert old[0].tobytes() == new[0].tobytes() and old[1].tobytes() == new[1].tobytes() and old[2] == new[2]
    late = complete_coflows(fair_of(rows.tolist(), fair.capacity.tolist()), size, release_s=np.full(30, 7.0))
    assert late[0] == pytest.approx(old[0] + 7.0, rel=1e-9)


def test_bad_release_times_are_refused():
    with pytest.raises(ValueError, match=">= 0"):
        complete_coflows(fair_of([[1]], [1.0]), np.array([1.0]), release_s=np.array([-1.0]))
    with pytest.raises(ValueError, match="shape"):
        complete_coflows(fair_of([[1]], [1.0]), np.array([1.0]), release_s=np.zeros(2))


def test_per_stage_reduction_in_the_schedule_by_hand():
    # p = 2, m = 2, forward 1 s, backward 2 s: stage 0's last backward ends at 9 s, stage 1's at 7 s
    c = dict(forward_s=(1.0, 1.0), backward_s=(2.0, 2.0), comm_forward_s=(0.0, 0.0), comm_backward_s=(0.0, 0.0), m=2)
    own = run_schedule(PipelineCosts(**c, dp_reduce_s=(5.0, 1.0)))
    assert own.timeline.reduce_end_s.tolist() == [14.0, 8.0] and own.time_s == 14.0
    same = run_schedule(PipelineCosts(**c, dp_reduce_s=5.0))
    assert same.timeline.reduce_end_s.tolist() == [14.0, 12.0]
    assert reduce_release_s(own, OverlapConfig()).tolist() == [2.0, 0.0]


@pytest.fixture(scope="module")
def crossing(synth):
    """pp 2 x dp 4 on single-GPU hosts in 2 ToR groups with one uplink each: every DP ring
    crosses the uplink (hosts alternate between the groups), so the two stages' rings contend."""
    net = synth.network(2, 4, uplinks=1, uplink_gbps=200, nic_gbps=200)
    job = JobSpec(tp=1, pp=2, dp=4, num_micro_batches=4, global_batch_size=16,
                  model=ModelShape(layers=4, hidden=1024, heads=8, seq_len=512))
    hosts = [f"g{g:02d}n{i:03d}" for i in range(1, 5) for g in range(2)]
    rm = RankMap.from_hosts(job, net.cluster, hosts, 1)
    return net, job, rm, RankPlacement.from_rankmap(rm, net)


def test_stages_apart_take_their_time_alone_together_the_contended_time(crossing):
    net, job, rm, placement = crossing
    ops, config, routing = job_comm_ops(job), CollectiveConfig(), EcmpConfig(mode="spray")
    (op,) = [o for o in ops if o.phase == "dp-reduce"]
    table = rm.layout.groups("dp")
    stage = rm.layout.column("pp")[table[:, 0]]
    alone = [simulate_collective(net, placement, op.op, op.size_bytes, groups=table[stage == s], config=config,
                                 routing=routing).time_s for s in range(2)]
    apart = stage_reduce_s(net, placement, rm.layout, ops, np.array([0.0, 100.0]), config, routing)
    assert apart == pytest.approx(alone, rel=1e-9)
    together = stage_reduce_s(net, placement, rm.layout, ops, np.zeros(2), config, routing)
    whole = simulate_phase(net, placement, rm.layout, ops, "dp-reduce", config, routing)[0]
    assert together.max() == pytest.approx(whole.time_s, rel=1e-12)
    # two rings on one 25 GB/s uplink each way: together 2x the bandwidth term of alone
    assert together.max() > 1.5 * max(alone)


def test_zero_releases_give_the_old_phase_bit_for_bit(crossing):
    net, job, rm, placement = crossing
    ops, config = job_comm_ops(job), CollectiveConfig()
    old = simulate_phase(net, placement, rm.layout, ops, "dp-reduce", config, EcmpConfig(seed=1))
    new = simulate_phase(net, placement, rm.layout, ops, "dp-reduce", config, EcmpConfig(seed=1),
                         stage_release_s=np.zeros(2))
    assert old[2].finish_s.tobytes() == new[2].finish_s.tobytes()
    assert [p.group_times_s.tobytes() for p in old[0].parts] == [p.group_times_s.tobytes() for p in new[0].parts]


def test_staged_comm_times_feed_each_stage_its_own_reduction(crossing):
    net, job, rm, placement = crossing
    ops, config, routing = job_comm_ops(job), CollectiveConfig(), EcmpConfig(mode="spray")
    run = simulate_iteration(net, placement, rm.layout, ops, config, routing)
    comm = comm_times(run, job)
    staged = staged_comm_times(net, placement, rm.layout, ops, job, comm, config, routing)
    assert len(staged.dp_reduce_stage_s) == 2
    assert max(staged.dp_reduce_stage_s) <= comm.dp_reduce_s * (1 + 1e-12)
    timing = iteration_timing(job, staged, overlap=OverlapConfig(dp_reduce=False))   # whole, not bucketed
    tl = timing.schedule.timeline
    last = tl.backward_end_s.max(axis=(1, 2))
    assert tl.reduce_end_s == pytest.approx(last + np.array(staged.dp_reduce_stage_s), rel=1e-12)
    assert staged.without("dp").dp_reduce_stage_s == (0.0, 0.0)


def test_interleaved_releases_each_chunk_at_its_last_backward_by_hand():
    # p = 2, m = 2, v = 2, forward 1 s, backward 2 s (one round of 2 micro-batches):
    # stage 1: F0.0 1-2, F1.0 2-3, F0.1 3-4, B0.1 4-6, F1.1 6-7, B1.1 7-9, B0.0 9-11, B1.0 11-13
    # stage 0: F0.0 0-1, F1.0 1-2, F0.1 2-3, F1.1 3-4, B0.1 6-8, B1.1 9-11, B0.0 11-13, B1.0 13-15
    # chunk 1's backwards end at 11 s (stage 0) and 9 s (stage 1); chunk 0's at 15 s and 13 s.
    c = dict(forward_s=(1.0, 1.0), backward_s=(2.0, 2.0), comm_forward_s=(0.0, 0.0), comm_backward_s=(0.0, 0.0),
             m=2, v=2)
    sched = run_schedule(PipelineCosts(**c))
    assert sched.timeline.backward_end_s.max(axis=1).tolist() == [[15.0, 11.0], [13.0, 9.0]]
    assert chunk_release_s(sched, OverlapConfig()).tolist() == [[6.0, 2.0], [4.0, 0.0]]
    assert reduce_release_s(sched, OverlapConfig()).tolist() == [2.0, 0.0]
    # without the overlap every chunk waits for the stage's last backward
    assert chunk_release_s(sched, OverlapConfig(dp_reduce=False)).tolist() == [[2.0, 2.0], [0.0, 0.0]]
    # in 4 buckets the first is ready 3/4 of a 2 s backward before it ends: every share 1.5 s
    # earlier (the last stage's last chunk, here chunk 1 of stage 1, too: no logit layer)
    lead = backward_pass_s(PipelineCosts(**c, reduce_buckets=4), OverlapConfig()) * (1 - 1 / 4)
    assert lead.tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert chunk_release_s(sched, OverlapConfig(), lead).tolist() == [[6.0, 2.0], [4.0, 0.0]]
    assert chunk_release_s(sched, OverlapConfig(), lead * [[1, 0], [0, 0]]).tolist() == [[4.5, 2.0], [4.0, 0.0]]
    # the schedule starts chunk c's share (reduce_s / v) at that chunk's last backward:
    # stage 0: 11 + 1 = 12, then max(12, 15) + 1 = 16; stage 1: 9 + 1, then 13 + 1
    own = run_schedule(PipelineCosts(**c, dp_reduce_s=(2.0, 2.0)))
    assert own.timeline.reduce_end_s.tolist() == [16.0, 14.0]


@pytest.fixture(scope="module")
def interleaved(synth):
    """The crossing layout with 2 model chunks per stage: each stage's DP ring (ranks on
    g00, g01, g00, g01) puts 2 of its edges on each uplink in each direction."""
    net = synth.network(2, 4, uplinks=1, uplink_gbps=200, nic_gbps=200)
    job = JobSpec(tp=1, pp=2, dp=4, num_micro_batches=4, global_batch_size=16, virtual_stages=2,
                  model=ModelShape(layers=4, hidden=1024, heads=8, seq_len=512))
    hosts = [f"g{g:02d}n{i:03d}" for i in range(1, 5) for g in range(2)]
    rm = RankMap.from_hosts(job, net.cluster, hosts, 1)
    return net, job, rm, RankPlacement.from_rankmap(rm, net)


def test_chunk_shares_in_the_network_by_hand(interleaved):
    # Reduce-scatter of S over n = 4 ranks: each ring edge carries (n - 1)/n S (both channels
    # together); 2 edges per uplink direction at B = 25 GB/s, no latency, no queue-pair cap.
    net, job, rm, placement = interleaved
    ops = job_comm_ops(job)
    (op,) = [o for o in ops if o.phase == "dp-reduce"]
    config, routing = CollectiveConfig(alpha_s=0.0, connection_rate_fraction=None), EcmpConfig(mode="spray")
    load_s = 2 * 0.75 * op.size_bytes / 25e9                         # one stage's bytes on one uplink
    # every share alone (half the bytes, load_s / 2): a stage spans its first release to its last share's end
    apart = stage_reduce_s(net, placement, rm.layout, ops, np.array([[0.0, 50.0], [100.0, 150.0]]), config, routing)
    assert apart == pytest.approx([50 + load_s / 2, 50 + load_s / 2], rel=1e-9)
    # all released at once: the one-release run, the two stages sharing the uplinks (2x)
    together = stage_reduce_s(net, placement, rm.layout, ops, np.zeros((2, 2)), config, routing)
    assert together.tolist() == stage_reduce_s(net, placement, rm.layout, ops, np.zeros(2), config, routing).tolist()
    assert together == pytest.approx([2 * load_s, 2 * load_s], rel=1e-9)
    # stage 1's chunk-1 share 1 ms late: three shares (L = load_s / 2 each) at B/3 for 1 ms,
    # then four at B/4: the early ones end at 4 L - 1/3 ms (stage 0), the late one alone at 4 L
    late = stage_reduce_s(net, placement, rm.layout, ops, np.array([[0.0, 0.0], [0.0, 1e-3]]), config, routing)
    assert late == pytest.approx([2 * load_s - 1e-3 / 3, 2 * load_s], rel=1e-9)


def test_staged_comm_times_put_each_reduction_end_where_the_network_ends_it(interleaved):
    # shares released per chunk; the schedule's reduction end of each stage lands on its last
    # share's finish in the network (release 0 = the earliest chunk's last backward)
    net, job, rm, placement = interleaved
    ops, config, routing = job_comm_ops(job), CollectiveConfig(), EcmpConfig(mode="spray")
    comm = comm_times(simulate_iteration(net, placement, rm.layout, ops, config, routing), job)
    staged = staged_comm_times(net, placement, rm.layout, ops, job, comm, config, routing)
    sched = iteration_timing(job, staged).schedule
    release = chunk_release_s(sched, OverlapConfig())
    assert (release[:, 0] > release[:, 1]).all()                       # chunk 1's share goes first
    span = stage_reduce_s(net, placement, rm.layout, ops, release, config, routing)
    zero = sched.timeline.backward_end_s.max(axis=1).min()
    assert sched.timeline.reduce_end_s == pytest.approx(zero + release[:, 1] + span, rel=1e-9)


def test_busy_time_of_shares_by_hand():
    # shares apart: 0.5 + 0.2 s; overlapping: [0, 0.5] then [0.5, 0.9] (the second waited)
    assert _busy_s(np.array([[0.0, 1.0]]), np.array([[0.5, 1.2]])).tolist() == pytest.approx([0.7])
    assert _busy_s(np.array([[0.0, 0.2]]), np.array([[0.5, 0.9]])).tolist() == pytest.approx([0.9])
    assert _busy_s(np.array([[0.0, 0.2]]), np.array([[np.nan, np.nan]])).tolist() == [0.0]


def test_shares_done_before_the_last_backward_still_take_their_network_time(synth):
    # A model of ~0.4e9 parameters per rank and chunk reduces in 10 Megatron buckets; 2 s
    # backwards release each chunk's share 1.8 s before its last backward ends, and the share
    # (~64 ms alone) leaves the network long before: the stage's reduction is the time its two
    # shares spent in the network (each alone: stages and chunks seconds apart), not 0.
    net = synth.network(2, 4, uplinks=1, uplink_gbps=200, nic_gbps=200)
    job = JobSpec(tp=1, pp=2, dp=4, num_micro_batches=4, global_batch_size=16, virtual_stages=2,
                  model=ModelShape(layers=8, hidden=4096, heads=32, seq_len=512))
    rm = RankMap.from_hosts(job, net.cluster, [f"g{g:02d}n{i:03d}" for i in range(1, 5) for g in range(2)], 1)
    placement = RankPlacement.from_rankmap(rm, net)
    ops, config, routing = job_comm_ops(job), CollectiveConfig(), EcmpConfig(mode="spray")
    stages = StageTimes(forward_s=(1.0,) * 2, backward_s=(2.0,) * 2, optimizer_s=0.0)
    comm = comm_times(simulate_iteration(net, placement, rm.layout, ops, config, routing), job)
    staged = staged_comm_times(net, placement, rm.layout, ops, job, comm, config, routing, stages)
    apart = stage_reduce_s(net, placement, rm.layout, ops, np.array([[0.0, 100.0], [200.0, 300.0]]), config, routing)
    share_s = apart - 100.0                                           # one share alone
    assert (share_s > 0.01).all()
    assert staged.dp_reduce_stage_s == pytest.approx(2 * share_s, rel=1e-6)
