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
                      comm_backward_s=(0.5,) * 2, m=4, dp_gather_s=3.0, dp_reduce_s=4.0, optimizer_s=0.25)
    on = run_schedule(c)
    off = run_schedule(c, OverlapConfig(tp=False, dp_gather=False, dp_reduce=False))
    assert on.time_s == pytest.approx(3.0 * 5 + 4.0 + 0.25)         # TP hidden, gather hidden
    assert off.time_s == pytest.approx(3.0 + 4.0 * 5 + 4.0 + 0.25)   # passes 1.5 + 2.5, gather first


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
