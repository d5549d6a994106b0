"""One iteration's communication, described once: the planner's bytes and the simulator's ops agree."""

from __future__ import annotations

import pytest

from rankmap.job.comm import CommOp, bus_factor, iteration_comm
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.job.traffic import job_traffic
from rankmap.simulator.iteration import job_comm_ops

MOE = ModelShape(layers=4, hidden=1024, heads=8, seq_len=512, experts=4)


def test_gpt3_175b_description_by_hand():
    # tp=8 pp=8 dp=144, b=1, m=12: 12 layers per stage, s=2048, h=12288, bf16 activations, fp32 grads
    comm = iteration_comm(JobSpec(tp=8, pp=8, dp=144, num_micro_batches=12))
    assert comm.group_sizes == {"tp": 8, "cp": 1, "ep": 1, "pp": 8, "dp": 144}
    got = {(o.kind, o.op): (o.size_bytes, o.count, o.phase) for o in comm.ops}
    assert got[("tp", "allreduce")] == (2048 * 12288 * 2, 4 * 12 * 12, "pipeline")
    assert got[("pp", "p2p")] == (2048 * 12288 * 2 // 8, 2 * 12, "pipeline")
    local = 174_604_234_752 / 64                                          # P / (tp * pp) = 2,728,191,168
    assert got[("dp", "allgather")] == (local * 2, 1, "dp-gather")
    assert got[("dp", "reducescatter")] == (local * 4, 1, "dp-reduce")
    assert got[("ep", "alltoall")][1] == 0                                # ep = 1: no all-to-alls
    assert [o.label for o in comm.network_ops()] == ["tp allreduce", "pp p2p", "dp allgather", "dp reducescatter"]


def test_planner_and_simulator_read_the_same_ops():
    """For the 175B job: per group, the simulator's ops move exactly the planner's per-rank bytes."""
    job = JobSpec(tp=8, pp=8, dp=144, num_micro_batches=12)
    traffic, ops = job_traffic(job), job_comm_ops(job)
    assert ops == iteration_comm(job).network_ops()
    dp = [o for o in ops if o.kind == "dp"]
    # ZeRO: (n-1)/n of the local gradients (4 B) and parameters (2 B), n = 144
    assert sum(bus_factor(o.op, 144) * o.size_bytes * o.count for o in dp) == traffic["dp"].rank_bytes
    assert traffic["dp"].rank_bytes == 143 / 144 * 2_728_191_168 * 6
    assert traffic["dp"].op_bytes == round(dp[-1].size_bytes) == 10_912_764_672
    tp = [o for o in ops if o.kind == "tp"]
    assert sum(bus_factor(o.op, 8) * o.size_bytes * o.count for o in tp) == traffic["tp"].edge_bytes == 50_734_301_184
    pp = [o for o in ops if o.kind == "pp"]
    assert pp[0].size_bytes * pp[0].count == traffic["pp"].edge_bytes == 150_994_944


@pytest.mark.parametrize("job", [
    JobSpec(tp=8, pp=8, dp=4, num_micro_batches=6),
    JobSpec(tp=4, pp=2, dp=6, cp=2, num_micro_batches=3, data_parallel="allreduce"),
    JobSpec(tp=8, pp=4, dp=2, num_micro_batches=8, virtual_stages=2),
    JobSpec(tp=2, pp=2, dp=4, ep=2, num_micro_batches=2, model=MOE),
])
def test_every_kind_of_traffic_is_the_sum_of_its_ops(job):
    comm, traffic = iteration_comm(job), job_traffic(job)
    assert list(traffic) == comm.kinds() == ["tp", "cp", "ep", "pp", "dp"]
    for kind, tr in traffic.items():
        mine = comm.of_kind(kind)
        assert tr.group_size == comm.group_sizes[kind]
        assert tr.ops == sum(o.count for o in mine)
        assert tr.pattern == mine[0].pattern
        assert tr.rank_bytes == pytest.approx(sum(o.rank_bytes(tr.group_size) for o in mine), rel=1e-15)
    assert traffic["pp"].wrap_bytes == sum(o.size_bytes * o.wrap_count for o in comm.of_kind("pp"))


def test_interleaved_pipeline_wraps_and_moe_all_to_all():
    comm = iteration_comm(JobSpec(tp=2, pp=2, dp=4, ep=2, num_micro_batches=4, virtual_stages=2,
                                  model=MOE))
    pp, = comm.of_kind("pp")
    assert (pp.count, pp.wrap_count) == (2 * 4 * 2, 2 * 4 * 1)
    ep, = comm.of_kind("ep")
    # 4 all-to-alls per layer and micro-batch, 4/2 layers per stage; S = b (s/tp) h a top_k
    assert (ep.count, ep.size_bytes) == (4 * 2 * 4, 1 * 256 * 1024 * 2 * 2)
    t = job_traffic(JobSpec(tp=2, pp=2, dp=4, ep=2, num_micro_batches=4, virtual_stages=2, model=MOE))["ep"]
    assert t.edge_bytes == ep.size_bytes / 2 * ep.count and t.rank_bytes == 0.5 * ep.size_bytes * ep.count


def test_commop_validates_against_the_group_kinds():
    assert CommOp(kind="dp_ep", op="allgather", size_bytes=1, count=1, phase="dp-gather").pattern == "ring"
    with pytest.raises(ValueError, match="kind"):
        CommOp(kind="xp", op="allreduce", size_bytes=1, count=1, phase="pipeline")
    with pytest.raises(ValueError, match="op must be"):
        CommOp(kind="tp", op="broadcast", size_bytes=1, count=1, phase="pipeline")
    with pytest.raises(ValueError, match="wrap_count"):
        CommOp(kind="tp", op="allreduce", size_bytes=1, count=1, phase="pipeline", wrap_count=1)
