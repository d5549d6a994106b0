"""Traffic accounting against values computed by hand for the GPT-3 175B job."""

from __future__ import annotations

import pytest

from rankmap.job.spec import MODEL_PRESETS, JobSpec, model_params
from rankmap.job.traffic import job_traffic

# GPT-3 175B: 96 layers, h = 12288, s = 2048, V = 50257 (Brown et al. 2020)
# P = 12*96*12288^2 * (1 + 13/(12*12288) + (50257+2048)/(12*96*12288)) = 174,604,234,752
P_175B = 174_604_234_752


def test_params_from_shape():
    assert model_params(96, 12288, 50257, 2048) == P_175B
    assert MODEL_PRESETS["gpt3-175b"].params == P_175B


@pytest.fixture
def job():
    # the default example: tp=8, pp=8, dp=144, b=1, m=12, bf16 activations and params, fp32 grads
    return JobSpec(tp=8, pp=8, dp=144, num_micro_batches=12)


def test_tp(job):
    t = job_traffic(job)["tp"]
    # 4 all-reduces per layer per micro-batch, 12 layers per stage, 12 micro-batches = 576
    assert t.ops == 576
    assert t.op_bytes == 1 * 2048 * 12288 * 2 == 50_331_648
    # ring all-reduce: each rank sends 2(n-1)/n * S = 1.75 * 50,331,648 per op
    assert t.edge_bytes == pytest.approx(576 * 1.75 * 50_331_648) == 50_734_301_184


def test_pp(job):
    t = job_traffic(job)["pp"]
    # sequence parallel: each TP rank carries 1/8 of b*s*h*2 = 6,291,456 bytes, forward and backward
    assert t.op_bytes == 6_291_456
    assert t.edge_bytes == 2 * 12 * 6_291_456 == 150_994_944
    assert t.pattern == "chain" and t.group_size == 8


def test_dp_zero(job):
    t = job_traffic(job)["dp"]
    local = P_175B / 64                       # 2,728,191,168 parameters per rank
    # reduce-scatter of fp32 grads + all-gather of bf16 params, each (n-1)/n with n = 144
    assert t.edge_bytes == pytest.approx(143 / 144 * local * (4 + 2))
    assert t.edge_bytes == pytest.approx(16_255_472_376, rel=1e-9)
    assert t.group_size == 144 and t.pattern == "ring"


def test_dp_allreduce_and_size_one_groups():
    t = job_traffic(JobSpec(tp=8, pp=8, dp=4, num_micro_batches=4, data_parallel="allreduce"))
    assert t["dp"].edge_bytes == pytest.approx(2 * 3 / 4 * P_175B / 64 * 4)
    assert t["cp"].edge_bytes == 0 and t["ep"].edge_bytes == 0
    assert job_traffic(JobSpec(tp=8, pp=1, dp=4, num_micro_batches=4))["pp"].edge_bytes == 0


def test_cp_and_ep():
    from rankmap.job.spec import ModelShape
    moe = ModelShape(layers=8, hidden=1024, heads=16, seq_len=4096, experts=8, top_k=2)
    t = job_traffic(JobSpec(tp=2, pp=2, cp=2, ep=4, dp=4, model=moe, num_micro_batches=3))
    # CP: K and V of the full sequence, split by tp: 2*1*4096*512*2 bytes, AG fwd + RS bwd per layer
    assert t["cp"].op_bytes == 2 * 4096 * 512 * 2
    assert t["cp"].edge_bytes == pytest.approx(0.5 * t["cp"].op_bytes * 2 * 4 * 3)
    # EP: 4 all-to-alls per layer; per rank b*s/(cp*tp)*h*a*top_k bytes, 1/ep of it to each peer
    assert t["ep"].op_bytes == 1024 * 1024 * 2 * 2
    assert t["ep"].edge_bytes == pytest.approx(t["ep"].op_bytes / 4 * 4 * 4 * 3)
    assert t["dp"].group_size == 8  # DP x CP


def test_interleaved_pipeline_multiplies_pp_traffic(job):
    import dataclasses
    t = job_traffic(dataclasses.replace(job, virtual_stages=3))["pp"]
    # each boundary is crossed 3 times per micro-batch, the last -> first hop twice
    assert t.edge_bytes == 3 * 150_994_944 and t.wrap_bytes == 2 * 150_994_944
