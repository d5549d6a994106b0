"""1F1B and interleaved 1F1B: closed forms of the bubble (Narayanan et al. SC'21, §2.2), overlap switches."""

import pytest

from rankmap.simulator.schedule import OverlapConfig, PipelineCosts, run_schedule, stage_order


def _costs(p, m, v=1, **kw):
    return PipelineCosts(forward_s=(1.0 / v,) * p, backward_s=(2.0 / v,) * p, comm_forward_s=(0.0,) * p,
                         comm_backward_s=(0.0,) * p, m=m, v=v, **kw)


@pytest.mark.parametrize("p,m", [(2, 1), (4, 8), (8, 32), (16, 16)])
def test_1f1b_bubble_is_closed_form(p, m):
    r = run_schedule(_costs(p, m))
    assert r.pipeline_s == pytest.approx(3.0 * (m + p - 1), rel=1e-12)
    assert r.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (8, 32, 3), (8, 8, 2)])
def test_interleaved_bubble_divided_by_v(p, m, v):
    r = run_schedule(_costs(p, m, v))
    bubble_passes = (p - 1) / v                           # bubble time / (t_f + t_b) of a whole stage
    assert r.pipeline_s == pytest.approx(3.0 * (m + bubble_passes), rel=1e-12)
    assert r.bubble_fraction == pytest.approx(bubble_passes / (m + bubble_passes), rel=1e-12)


def test_every_pass_runs_once():
    for stage in range(4):
        order = stage_order(stage, 4, 8, 2)
        assert sorted(order) == sorted({(f, mb, c) for f in (True, False) for mb in range(8) for c in range(2)})


def test_p2p_sits_on_the_critical_path():
    p, m, t = 4, 8, 0.1
    free, paid = run_schedule(_costs(p, m)), run_schedule(_costs(p, m, p2p_s=t))
    # the fill and the drain each cross p - 1 boundaries; in the steady state a stage can wait for one
    extra = paid.pipeline_s - free.pipeline_s
    assert 2 * (p - 1) * t - 1e-12 <= extra <= 2 * (p - 1 + m) * t + 1e-12


def test_overlap_switches():
    c = PipelineCosts(forward_s=(1.0,) * 2, backward_s=(2.0,) * 2, comm_forward_s=(0.5,) * 2,
                      comm_backward_s=(0.5,) * 2, m=4, dp_gather_s=3.0, data_loading_s=3.0, dp_reduce_s=4.0,
                      optimizer_s=0.25)
    on = run_schedule(c)
    off = run_schedule(c, OverlapConfig(tp=False, dp_gather=False, dp_reduce=False))
    assert on.time_s == pytest.approx(3.0 + 3.0 * 5 + 4.0 + 0.25)   # TP hidden, gather under data loading
    assert off.time_s == pytest.approx(3.0 + 3.0 + 4.0 * 5 + 4.0 + 0.25)   # passes 1.5 + 2.5, load, then gather


def test_dp_reduce_of_a_stage_starts_when_its_backward_ends():
    p, m = 4, 4
    r = run_schedule(_costs(p, m, dp_reduce_s=1.0))
    # stage 0 finishes its backwards last; the others' reductions are hidden behind it
    assert r.backward_end_s.argmax() == 0
    assert r.time_s == pytest.approx(r.backward_end_s.max() + 1.0)


def test_per_chunk_reduction_overlaps_the_backwards_left():
    c = _costs(4, 8, 2, dp_reduce_s=2.0)
    whole = run_schedule(c, OverlapConfig(dp_reduce=False))
    chunks = run_schedule(c)
    assert chunks.time_s < whole.time_s
    assert chunks.time_s >= whole.backward_end_s.max() + 1.0 - 1e-12     # the last chunk's half remains


# One stage, 1F1B, two micro-batches: F0 [0, 1], B0 [1, 3], F1 [3, 4], B1 [4, 6]; the last
# backward runs [4, 6] (d = 2) and the stage's gradients reduce in r seconds.
def _one_stage(**kw):
    return PipelineCosts(forward_s=(1.0,), backward_s=(2.0,), comm_forward_s=(0.0,), comm_backward_s=(0.0,),
                         m=2, **kw)


@pytest.mark.parametrize("r,buckets,on_s", [
    (3.0, 4, 7.5),      # reduce slower than the backward: 6 - 2 * 3/4 + 3, the first bucket at 4.5
    (1.0, 4, 6.25),     # faster: only the last bucket's 1/4 is left after 6
    (3.0, 1, 9.0),      # one bucket: it is ready when the backward ends
])
def test_bucketed_reduce_at_v1(r, buckets, on_s):
    c = _one_stage(dp_reduce_s=r, reduce_buckets=buckets)
    assert run_schedule(c).time_s == pytest.approx(on_s, rel=1e-12)
    assert run_schedule(c, OverlapConfig(dp_reduce=False)).time_s == pytest.approx(6.0 + r, rel=1e-12)


def test_bucketed_reduce_per_chunk_waits_for_the_chunk_before():
    # one stage, two chunks, one micro-batch: F.0 [0, 1], F.1 [1, 2], B.1 [2, 4], B.0 [4, 6].
    # Chunk 1 reduces 2 s in 2 buckets: ready at 3 and 4, done at 5; chunk 0's buckets are
    # ready at 5 and 6 and end at 6 and 7 (1 s exposed; off: 6 + 4).
    c = PipelineCosts(forward_s=(1.0,), backward_s=(2.0,), comm_forward_s=(0.0,), comm_backward_s=(0.0,),
                      m=1, v=2, dp_reduce_s=4.0, reduce_buckets=2)
    assert run_schedule(c).time_s == pytest.approx(7.0, rel=1e-12)
    assert run_schedule(c, OverlapConfig(dp_reduce=False)).time_s == pytest.approx(10.0, rel=1e-12)


@pytest.mark.parametrize("loading_s,on_s", [(0.5, 8.0), (0.0, 8.0), (2.0, 8.5)])
def test_gather_first_chunk_under_data_loading_next_under_forward(loading_s, on_s):
    # one stage, two chunks, one micro-batch, 1.5 s of gather per chunk from t = 0, beside
    # loading the batch. Loading 0.5 s: F.0 waits for the gather, [1.5, 2.5]; chunk 1's share
    # runs [1.5, 3] under it, so F.1 waits to 3: F.1 [3, 4], B.1 [4, 6], B.0 [6, 8]. Loading
    # 2 s hides chunk 0's share: F.0 [2, 3], chunk 1's share [2, 3.5], F.1 [3.5, 4.5], 8.5 s:
    # a longer load never shortens the iteration. Off: load, whole gather, then the passes.
    c = PipelineCosts(forward_s=(1.0,), backward_s=(2.0,), comm_forward_s=(0.0,), comm_backward_s=(0.0,),
                      m=1, v=2, dp_gather_s=3.0, data_loading_s=loading_s)
    assert run_schedule(c).time_s == pytest.approx(on_s, rel=1e-12)
    off = run_schedule(c, OverlapConfig(dp_gather=False))
    assert off.time_s == pytest.approx(loading_s + 3.0 + 6.0, rel=1e-12)
    compute, exposed, bubble, rest = off.timeline.breakdown_s()[0]
    assert (exposed, rest) == pytest.approx((3.0, loading_s), abs=1e-12)     # loading is not communication


def test_longer_loading_never_shortens_the_iteration():
    c = dict(forward_s=(1.0,) * 2, backward_s=(2.0,) * 2, comm_forward_s=(0.0,) * 2, comm_backward_s=(0.0,) * 2,
             m=4, v=2, dp_gather_s=3.0, reduce_buckets=4, dp_reduce_s=1.0)
    times = [run_schedule(PipelineCosts(**c, data_loading_s=t)).time_s for t in (0.0, 0.5, 1.0, 2.0, 4.0, 100.0)]
    assert times == sorted(times) and times[-1] >= 100.0


@pytest.mark.parametrize("gather_s,begin_s,end_s", [(2.0, 0.5, 2.25), (0.4, 0.1, 1.1)])
def test_gather_in_buckets_under_the_first_forward(gather_s, begin_s, end_s):
    # one stage, one micro-batch, F 1 s, B 2 s, the gather in 4 buckets from t = 0: the forward
    # starts with the first bucket (g/4) and ends at max(start + 1, g + 1/4), its last
    # bucket's layers running after the gather ends. g = 2: [0.5, 2.25]; g = 0.4: [0.1, 1.1].
    c = PipelineCosts(forward_s=(1.0,), backward_s=(2.0,), comm_forward_s=(0.0,), comm_backward_s=(0.0,),
                      m=1, dp_gather_s=gather_s, reduce_buckets=4)
    r = run_schedule(c)
    assert r.timeline.forward_end_s[0, 0, 0] == pytest.approx(end_s, rel=1e-12)
    assert r.time_s == pytest.approx(end_s + 2.0, rel=1e-12)
    assert r.timeline.gather_wait_s[0, 0] == pytest.approx(end_s - 1.0, rel=1e-12)
    compute, exposed, bubble, rest = r.timeline.breakdown_s()[0]
    assert (compute, exposed, bubble, rest) == pytest.approx((3.0, end_s - 1.0, 0.0, 0.0), abs=1e-12)
    assert run_schedule(c, OverlapConfig(dp_gather=False)).time_s == pytest.approx(gather_s + 3.0, rel=1e-12)


def test_gather_prefetch_hidden_when_the_forwards_cover_it():
    # pp=2, m=2, v=2: stage 0 runs F0.0, F1.0 before chunk 1; 1 s of share fits under them
    c = _costs(2, 2, 2, dp_gather_s=1.0)                 # 0.5 s per chunk, passes of 0.5 s forward
    free = run_schedule(_costs(2, 2, 2))
    got = run_schedule(c)
    assert got.time_s == pytest.approx(free.time_s + 0.5, rel=1e-12)     # only chunk 0's share, before F0.0


def test_logit_layer_in_the_last_chunk_of_the_last_stage_only():
    # one stage, two chunks, one micro-batch: F.0 [0, 1], F.1 [1, 2.5], B.1 [2.5, 5.5], B.0 [5.5, 7.5]
    c = PipelineCosts(forward_s=(1.0,), backward_s=(2.0,), comm_forward_s=(0.0,), comm_backward_s=(0.0,),
                      m=1, v=2, logit_forward_s=0.5, logit_backward_s=1.0)
    r = run_schedule(c)
    assert r.timeline.forward_end_s[0, 0].tolist() == [1.0, 2.5]
    assert r.timeline.backward_end_s[0, 0].tolist() == [7.5, 5.5]
    assert r.timeline.pass_s[0].tolist() == [1.25, 2.5]                 # mean over the two chunks


def test_exposed_gather_is_not_bubble():
    # 4 stages, 8 micro-batches: the bubble is 3/11 with the gather free; a 5 s gather that
    # the first forward cannot hide moves the whole pipeline, not its bubble
    free = run_schedule(_costs(4, 8))
    gathered = run_schedule(_costs(4, 8, dp_gather_s=5.0, reduce_buckets=4))
    assert gathered.time_s > free.time_s + 3.0
    assert gathered.bubble_fraction == pytest.approx(free.bubble_fraction, rel=1e-12)
    assert free.bubble_fraction == pytest.approx(3 / 11, rel=1e-12)


def test_gather_buckets_only_with_the_gradient_overlap():
    # Megatron-LM buckets parameters only with --overlap-grad-reduce: without it the first
    # forward waits for the whole 2 s gather, with it for the first of 4 buckets (ends 2.25 s)
    c = PipelineCosts(forward_s=(1.0,), backward_s=(2.0,), comm_forward_s=(0.0,), comm_backward_s=(0.0,),
                      m=1, dp_gather_s=2.0, reduce_buckets=4)
    assert run_schedule(c).timeline.forward_end_s[0, 0, 0] == pytest.approx(2.25, rel=1e-12)
    assert run_schedule(c, OverlapConfig(dp_reduce=False)).timeline.forward_end_s[0, 0, 0] == pytest.approx(3.0)


def test_megatron_core_dispatches_each_stages_gather_at_its_first_forward():
    # 4 stages, F 1 s, B 2 s, 8 micro-batches, a 1.5 s gather in 4 buckets, 1 s reduction.
    # MegaScale (default): every stage gathers from t = 0; stage 0's first forward ends at
    # max(0.375 + 1, 1.5 + 0.25) = 1.75 and the later stages' gathers are done before their
    # inputs arrive. Megatron-Core without interleaving: stage s > 0 starts its one-bucket
    # gather when its input arrives (1.75, 4.25, 6.75), so each first forward ends 1.5 s later
    # than its input + 1 s; its reductions bucket on stage 0 only (E + r/4 there, E + r after).
    c = PipelineCosts(forward_s=(1.0,) * 4, backward_s=(2.0,) * 4, comm_forward_s=(0.0,) * 4,
                      comm_backward_s=(0.0,) * 4, m=8, dp_gather_s=1.5, reduce_buckets=4, dp_reduce_s=1.0)
    aligned, core = run_schedule(c), run_schedule(c, OverlapConfig(megatron_core=True))
    assert aligned.timeline.forward_end_s[:, 0, 0].tolist() == [1.75, 2.75, 3.75, 4.75]
    assert core.timeline.forward_end_s[:, 0, 0].tolist() == [1.75, 4.25, 6.75, 9.25]
    assert core.time_s == pytest.approx(aligned.time_s + 3 * 1.5, rel=1e-12)
    last = core.timeline.backward_end_s.max(axis=(1, 2))
    assert (core.timeline.reduce_end_s - last).tolist() == pytest.approx([0.25, 1.0, 1.0, 1.0])
    assert core.bubble_fraction == pytest.approx(aligned.bubble_fraction, rel=1e-12) == pytest.approx(3 / 11)
