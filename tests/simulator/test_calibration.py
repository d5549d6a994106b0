"""Calibration of the compute + schedule model against published runs (within 10%).

Sources:
- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", SC'21, Table 1: GPT 175B (96 layers, h 12288, 96 heads), tp=8, pp=8, 1,024
  A100s, batch 1,536: 153 TFLOP/s per GPU; GPT 1T (128 layers, h 25600, 160 heads), tp=8,
  pp=64, 3,072 A100s, batch 3,072: 163 TFLOP/s per GPU. Vocabulary 51,200, sequence 2,048
  (Megatron-LM README). FLOPs counted with the 96 formula (full recomputation), end to end.
- Jiang et al., "MegaScale: Scaling Large Language Model Training to More Than 10,000 GPUs",
  NSDI'24 (abstract, §1 and §6): a 175B model on 12,288 A100s at 55.2% MFU, batch 6,144,
  1.34x the MFU of Megatron-LM on the same job; 3D parallelism with ZeRO-style data
  parallelism and the interleaved 1F1B schedule (§3.2), the all-gather of the first model
  chunk beside data loading and later ones prefetched under the previous chunk's forward,
  TP/SP communication overlapped with the parallel transformer block.

Assumptions for Megatron-LM SC'21 (not in its Table 1): micro-batch 1 and the plain 1F1B
schedule; it overlaps neither TP nor DP communication, recomputes every layer (so 6 TP
all-reduces per layer and micro-batch: forward, recomputed forward, backward; the timing
model adds the recomputed 2 to the 4 given here) and all-reduces fp32 gradients.

Assumptions for MegaScale (its tp, pp, micro-batch and number of model chunks are not
taken from the paper): tp=8 (one host) and pp=8, so dp=192 and 32 sequences per pipeline,
micro-batch 1 (m=32); every interleaving that divides the 12 layers of a stage, v in
{2, 3, 4, 6}, is checked, because the paper says "interleaved" without the count (v=1,
plain 1F1B, predicts 46.7%, -15%). No recomputation, bf16 parameters gathered and fp32
gradients reduce-scattered, every overlap of §3.2 on; no data-loading time is published, so
the first chunk's all-gather runs under its first forward bucket by bucket and the rest of
it is exposed (``data_loading_s`` 0).
The Megatron-LM baseline runs the same job without MegaScale's overlaps (TP collectives
after the block, the all-gather before the first forward, the reduction after the last
backward); MegaScale's other gains (parallel transformer block, sliding-window attention,
fused operators, data pipeline; its §3.1, §3.3, §3.4) change kernel efficiency, which this
model holds at one fitted factor, so the predicted ratio falls short of 1.34 (see the test).

Communication is analytic (ring all-reduce / all-gather / reduce-scatter at nccl-tests
busbw), not the network simulator: the calibration checks the compute and schedule model,
and a 12,288-GPU network simulation per case is too slow for a unit test; the fabric's share
is what ``rankmap simulate --compare`` adds for a placement. NVLink all-reduce busbw
230 GB/s (DGX A100, nccl-tests), 25 GB/s per GPU to the network (8 x 200 Gb/s HDR per node,
Selene; MegaScale's 200G NICs), line rate: the simulator's per-connection cap (0.8 of line
rate by default, an assumption of :mod:`rankmap.simulator.collectives`) is not applied; at
20 GB/s every case stays within 10% (MegaScale v = 3 54.5%, 175B 153.2, 1T 159.7 TFLOP/s).

The honest test: ``efficiency_gemm`` is fitted once, on the 175B point (0.65, the
default), and the 1T and MegaScale figures are predictions.
"""

import pytest

from rankmap.job.spec import JobSpec, ModelShape
from rankmap.simulator.compute import ComputeConfig
from rankmap.simulator.schedule import OverlapConfig
from rankmap.simulator.timing import CommTimes, iteration_timing

NVLINK_BUSBW = 230e9        # bytes/s, assumption (see module)
NIC = 25e9                  # bytes/s per GPU, 200 Gb/s
GPT_175B = ModelShape(layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200)
GPT_1T = ModelShape(layers=128, hidden=25600, heads=160, seq_len=2048, vocab=51200)
MEGATRON_OVERLAP = OverlapConfig(tp=False, dp_gather=False, dp_reduce=False)


def _analytic_comm(job: JobSpec, tp_per_layer: int) -> CommTimes:
    """Ring all-reduce / all-gather / reduce-scatter at busbw (nccl-tests), pipeline sends split over tp NICs."""
    model, tp, dp = job.model, job.tp, job.sizes()["dp"]
    act = job.micro_batch_size * model.seq_len * model.hidden * job.activation_bytes
    tp_ar = 2 * (tp - 1) / tp * act / NVLINK_BUSBW
    per_pass = tp_per_layer * tp_ar * model.layers / (job.pp * job.virtual_stages)
    p2p = act / tp / NIC
    local = model.params / (tp * job.pp)
    if job.data_parallel == "allreduce":
        gather, reduce = 0.0, 2 * (dp - 1) / dp * local * job.grad_bytes / NIC
    else:
        gather = (dp - 1) / dp * local * job.param_bytes / NIC
        reduce = (dp - 1) / dp * local * job.grad_bytes / NIC
    return CommTimes(p2p_s=p2p, wrap_s=p2p if job.virtual_stages > 1 else 0.0, pass_s={"tp": per_pass},
                     dp_gather_s=gather, dp_reduce_s=reduce)


def _megatron(model, pp, dp, batch):
    job = JobSpec(tp=8, pp=pp, dp=dp, global_batch_size=batch, model=model, data_parallel="allreduce")
    return iteration_timing(job, _analytic_comm(job, tp_per_layer=4), ComputeConfig(gpu="a100", recompute=True),
                            MEGATRON_OVERLAP)


def test_megatron_175b_fitted_point():
    got = _megatron(GPT_175B, pp=8, dp=16, batch=1536)
    assert got.tflops_per_gpu == pytest.approx(153, rel=0.10)       # fitted: 154 (+1%) with efficiency_gemm 0.65


def test_megatron_1t_predicted():
    got = _megatron(GPT_1T, pp=64, dp=6, batch=3072)
    assert got.tflops_per_gpu == pytest.approx(163, rel=0.10)       # predicted: 160 (-2%)
    # (p-1)/(m+p-1) with m = 512, less a little: the busiest (last) stage also runs the logit layer
    assert got.bubble_fraction == pytest.approx(63 / 575, rel=0.05)


def _megascale(v: int, overlap: OverlapConfig):
    job = JobSpec(tp=8, pp=8, dp=192, global_batch_size=6144, model=GPT_175B, virtual_stages=v)
    return iteration_timing(job, _analytic_comm(job, tp_per_layer=4), ComputeConfig(gpu="a100"), overlap)


@pytest.mark.parametrize("v,predicted", [(2, 0.527), (3, 0.550), (4, 0.562), (6, 0.575)])
def test_megascale_175b_mfu(v, predicted):
    got = _megascale(v, OverlapConfig())
    assert got.mfu == pytest.approx(0.552, rel=0.10)
    assert got.mfu == pytest.approx(predicted, abs=5e-4)            # the model's figure, for the record


def test_megascale_over_megatron_falls_short_of_134():
    """MegaScale's overlaps explain about half of its 1.34x over Megatron-LM (1.16x-1.19x for
    v = 2..6; 1.17x at v = 3, 12% short): the rest is kernel-level work this model does not
    represent (see the module), so the ratio is checked to be a real gain and short of 1.34,
    not fitted to it."""
    ratios = [_megascale(v, OverlapConfig()).mfu / _megascale(v, MEGATRON_OVERLAP).mfu for v in (2, 3, 4, 6)]
    assert ratios == pytest.approx([1.158, 1.173, 1.182, 1.191], abs=2e-3)
    assert max(ratios) < 1.34 / 1.10
