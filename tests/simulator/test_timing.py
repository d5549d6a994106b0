"""Compute model and iteration timing: FLOPs, GPU presets, per-pass communication, MFU."""

import pytest

from rankmap.errors import SpecError
from rankmap.job.spec import GPU_NAMES, JobSpec, ModelShape
from rankmap.job.spec_file import parse_job
from rankmap.simulator.compute import GPUS, ComputeConfig, iteration_flops, model_flops, stage_times
from rankmap.simulator.iteration import job_comm_ops, simulate_iteration
from rankmap.simulator.schedule import OverlapConfig
from rankmap.simulator.timing import CommTimes, comm_times, configs_of, iteration_timing, workload_stage_times
from rankmap.simulator.workload import parse_aicb_workload

JOB = JobSpec(tp=8, pp=8, dp=16, global_batch_size=1536)      # GPT-3 175B preset


def test_presets_match_the_job_yaml_names_and_datasheets():
    assert tuple(GPUS) == GPU_NAMES
    assert {k: g.peak_tflops for k, g in GPUS.items()} == {"a100": 312.0, "h100": 989.0, "h200": 989.0,
                                                           "b200": 2250.0}


def test_flops_formula_and_stage_split():
    # 72 B s l h^2 (1 + s/6h + V/16lh) (Narayanan et al. SC'21); recomputation 96
    b, s, l, h, v = 1536, 2048, 96, 12288, 50257
    assert model_flops(JOB) == pytest.approx(72 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)))
    assert iteration_flops(JOB, recompute=True) == pytest.approx(model_flops(JOB) * 4 / 3)
    # GEMM stage times add up to the formula: over stages, micro-batches, TP ranks (8) and replicas (dp 16)
    cfg = ComputeConfig(efficiency_gemm=1.0, efficiency_elementwise=1.0)
    t = stage_times(JOB, cfg)
    hbm = 34 * s * h + 5 * 96 * s * s                       # elementwise bytes per layer (Korthikanti eq. 1)
    elementwise = 3 * l * hbm / 8 / 2.039e12 * JOB.micro_batches() * 8
    logit_s = t.logit_forward_s + t.logit_backward_s                 # once per micro-batch, last chunk
    gemm_s = (sum(t.forward_s) + sum(t.backward_s) + logit_s) * JOB.micro_batches() * 8 - elementwise
    assert gemm_s * 16 * 312e12 == pytest.approx(model_flops(JOB), rel=1e-9)
    recompute = stage_times(JOB, ComputeConfig(recompute=True))
    assert recompute.backward_s[0] == pytest.approx(3 * recompute.forward_s[0])


def test_comm_times_from_a_simulated_iteration(racks_plan):
    from rankmap.simulator.flows import RankPlacement
    from rankmap.simulator.network import Network
    cluster, plan = racks_plan
    network = Network(cluster)
    rm = plan.rankmap
    result = simulate_iteration(network, RankPlacement.from_rankmap(rm, network), rm.layout, job_comm_ops(rm.job))
    comm = comm_times(result, rm.job)
    passes = rm.job.micro_batches()
    pipeline = result.phase("pipeline")
    by_label = {p.label: p.group_times_s.max() for p in pipeline.parts}
    assert comm.p2p_s == pytest.approx(by_label["pp p2p"] / passes)
    assert comm.pass_s["tp"] == pytest.approx(by_label["tp allreduce"] / passes)
    assert comm.dp_reduce_s == result.phase("dp-reduce").time_s
    assert comm.dp_gather_s == result.phase("dp-gather").time_s


def test_mfu_and_exposed_comm():
    job = JobSpec(tp=8, pp=4, dp=2, num_micro_batches=8, model=parse_job("model: {preset: gpt3-13b}").model)
    free = iteration_timing(job, CommTimes())
    assert free.exposed_comm_s == {}
    assert free.mfu == pytest.approx(model_flops(job) / (free.time_s * 64 * 312e12))
    comm = CommTimes(p2p_s=1e-3, pass_s={"tp": 1.0}, dp_reduce_s=0.5)
    hidden, exposed = iteration_timing(job, comm), iteration_timing(job, comm, overlap=OverlapConfig(tp=False))
    assert exposed.exposed_comm_s["tp"] > hidden.exposed_comm_s["tp"] >= 0
    # one chunk of 0.4e9 parameters per rank: 11 Megatron buckets of 4e7, released during the
    # last backward (longer than the reduction), so only the last bucket's 0.5/11 is left
    assert hidden.exposed_comm_s["dp"] == pytest.approx(0.5 / 11)
    whole = iteration_timing(job, comm, overlap=OverlapConfig(dp_reduce=False))
    assert whole.exposed_comm_s["dp"] == pytest.approx(0.5)           # all after the last backward
    assert hidden.tokens_per_s == pytest.approx(8 * 2 * 2048 / hidden.time_s)


def test_ep_all_to_all_is_exposed_unless_its_own_overlap_is_on():
    # pp=1, 8 micro-batches; compute per pass far above the per-pass EP time, so a hidden EP costs nothing
    job = JobSpec(tp=8, pp=1, dp=2, num_micro_batches=8, model=parse_job("model: {preset: gpt3-13b}").model)
    base = iteration_timing(job, CommTimes(pass_s={"tp": 1e-3}))
    comm = CommTimes(pass_s={"tp": 1e-3, "ep": 0.02})
    default = iteration_timing(job, comm)                       # overlap.ep off: the all-to-all adds to each pass
    assert default.exposed_comm_s["ep"] == pytest.approx(8 * 0.02)
    assert default.time_s == pytest.approx(base.time_s + 8 * 0.02)
    assert iteration_timing(job, comm, overlap=OverlapConfig(ep=True)).exposed_comm_s["ep"] == pytest.approx(0.0)
    # CP's ring attention overlaps by default; with overlap.cp off it adds like EP
    cp = CommTimes(pass_s={"tp": 1e-3, "cp": 0.02})
    assert iteration_timing(job, cp).exposed_comm_s["cp"] == pytest.approx(0.0)
    assert iteration_timing(job, cp, overlap=OverlapConfig(cp=False)).exposed_comm_s["cp"] == pytest.approx(0.16)
    # the switches come from the job YAML
    _, overlap = configs_of(parse_job("model: {preset: gpt3-13b}\noverlap: {ep: true, cp: false}\n"))
    assert (overlap.tp, overlap.cp, overlap.ep) == (True, False, True)


def test_configs_of_the_job_yaml():
    job = parse_job("model: {preset: gpt3-13b}\nhardware: {gpu: b200, efficiency_gemm: 0.4}\n"
                    "overlap: {dp_gather: false}\n")
    compute, overlap = configs_of(job)
    assert compute.spec.peak_tflops == 2250.0 and compute.efficiency_gemm == 0.4
    assert overlap == OverlapConfig(dp_gather=False)


def test_data_loading_hides_the_first_all_gather():
    # 11 buckets of the first chunk's gather g run under stage 0's first forward F: it ends at
    # max(g/11 + F, g + F/11) (g >> F here), g - F (1 - 1/11) exposed. Loading the batch for
    # L seconds runs beside the gather, inside the iteration: L = 0.5 hides under the exposed
    # gather (same time; the gather now costs 0.5 s less than the load would alone); L = 3
    # hides the gather (no exposed DP) and costs L less that exposure.
    text = "model: {preset: gpt3-13b}\nparallel: {tp: 8, pp: 4, dp: 2}\nbatch: {num_micro_batches: 8}\n"
    comm = CommTimes(dp_gather_s=2.0)
    base = iteration_timing(parse_job(text), comm)
    forward = base.schedule.timeline.pass_s[0, 0]
    gather_exposed = 2.0 - forward * (1 - 1 / 11)
    assert base.exposed_comm_s["dp"] == pytest.approx(gather_exposed, rel=1e-12)
    for loading_s, longer_s, exposed_s in ((0.5, 0.0, gather_exposed - 0.5), (3.0, 3.0 - gather_exposed, 0.0)):
        job = parse_job(text + f"hardware: {{data_loading_s: {loading_s}}}\n")
        compute, _ = configs_of(job)
        assert compute.data_loading_s == loading_s
        got = iteration_timing(job, comm, compute)
        assert got.time_s == pytest.approx(base.time_s + longer_s, rel=1e-12)
        assert got.exposed_comm_s.get("dp", 0.0) == pytest.approx(exposed_s, abs=1e-12)

def test_workload_compute_times():
    w = parse_aicb_workload(
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 2 vpp: 1 ga: 4 all_gpus: 32\n2\n"
        "a -1 100 NONE 0 200 NONE 0 300 NONE 0 40\nb -1 100 NONE 0 200 NONE 0 300 NONE 0 40\n")
    assert w.compute_totals == (200.0, 1000.0, 80.0) and w.has_compute_times
    t = workload_stage_times(w, JobSpec(tp=8, pp=2, dp=2, num_micro_batches=4, model=TINY))
    assert t.forward_s == pytest.approx((50e-9, 50e-9)) and t.backward_s == pytest.approx((250e-9, 250e-9))
    assert t.optimizer_s == pytest.approx(80e-9)


TINY = ModelShape(layers=2, hidden=64, heads=8, seq_len=32, vocab=128)
AICB_HEAD = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 2 vpp: 1 ga: 4 all_gpus: 32\n2\n"


def test_aicb_placeholder_compute_times_are_not_measurements():
    """AICB without --aiob_enable writes 1 in every compute field: the FLOPs model is used instead."""
    w = parse_aicb_workload(AICB_HEAD + "a -1 1 NONE 0 1 NONE 0 1 NONE 0 1\nb -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    assert w.compute_totals == (2.0, 4.0, 2.0) and not w.has_compute_times


def test_compute_times_faster_than_the_gpu_are_refused():
    """GPT-3 175B at tp 8, pp 2 needs ~0.2 s per micro-batch forward on an A100 at peak, not 50 ns
    (which gave an MFU of 374% on such a file)."""
    w = parse_aicb_workload(AICB_HEAD + "a -1 100 NONE 0 200 NONE 0 300 NONE 0 40\nb -1 100 NONE 0 200 NONE 0 300 NONE 0 40\n",
                            "w.txt")
    with pytest.raises(SpecError, match=r"w.txt.*fwd_compute.*faster than a A100 at its peak"):
        workload_stage_times(w, JobSpec(tp=8, pp=2, dp=2, num_micro_batches=4))


def test_recomputation_repeats_the_forward_collectives():
    """Full recomputation re-runs each forward's TP collectives in the backward (Korthikanti
    et al. MLSys'23: 6 all-reduces per layer, not 4). One stage, 4 micro-batches, TP not
    overlapped, 4 s of TP per pass (2 forward + 2 backward): recomputation adds 2 s to each
    of the 4 backwards, 8 s in all, with the compute held fixed."""
    from rankmap.simulator.compute import StageTimes

    job = JobSpec(tp=8, pp=1, dp=1, global_batch_size=4)
    stages = StageTimes(forward_s=(1.0,), backward_s=(3.0,), optimizer_s=0.0)
    comm = CommTimes(pass_s={"tp": 4.0})
    no_overlap = OverlapConfig(tp=False, dp_gather=False, dp_reduce=False)
    plain = iteration_timing(job, comm, ComputeConfig(), no_overlap, stages)
    again = iteration_timing(job, comm, ComputeConfig(recompute=True), no_overlap, stages)
    assert plain.time_s == pytest.approx(4 * (1 + 3 + 4)) and again.time_s == pytest.approx(plain.time_s + 8)
    assert again.exposed_comm_s["tp"] == pytest.approx(4 * 6)


def test_logit_layer_runs_in_the_last_chunk_only():
    """Interleaved (v = 2): the logit layer's 1.5 b s h V forward FLOPs per micro-batch and TP rank
    (Narayanan et al. SC'21, §5.1) are not spread over the last stage's chunks; one pass of its
    last chunk carries all of it, and the iteration's compute still adds up to the FLOPs formula."""
    job = JobSpec(tp=8, pp=4, dp=2, num_micro_batches=8, virtual_stages=2)
    cfg = ComputeConfig(efficiency_gemm=1.0)
    t = stage_times(job, cfg)
    m = job.model
    assert t.logit_forward_s == pytest.approx(1.5 * m.seq_len * m.hidden * m.vocab / 8 / 312e12)
    assert t.logit_backward_s == pytest.approx(2 * t.logit_forward_s)
    assert t.forward_s[-1] == t.forward_s[0]
    sched = iteration_timing(job, CommTimes(), cfg).schedule
    # the last stage is busier than stage 0 by exactly m logit forwards and backwards
    assert sched.busy_s[-1] - sched.busy_s[0] == pytest.approx(8 * 3 * t.logit_forward_s, rel=1e-9)


def test_framework_megatron_selects_megatron_cores_bucketing():
    engine = parse_job("model: {preset: gpt3-13b}\n")
    megatron = parse_job("model: {preset: gpt3-13b}\nframework: megatron\n")
    assert configs_of(engine)[1].megatron_core is False and configs_of(megatron)[1].megatron_core is True
