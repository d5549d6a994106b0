"""The late-arrival rule on hand-computed lateness tables (rankmap.diagnose.lateness)."""

from __future__ import annotations

import pytest

from rankmap.diagnose.lateness import lateness, step_time_s
from rankmap.diagnose.records import Event

RULE = {"z": 5.0, "min_excess_s": 0.05, "min_step_fraction": 0.2}


def table(rows: dict, phase="tp-all-gather") -> dict:
    """``{rank: [seconds per step]}`` -> ``{(rank, phase, step): seconds}``."""
    return {(r, phase, s): v for r, vals in rows.items() for s, v in enumerate(vals)}


# three ranks of one stage; rank 2 is about 0.2 s later than the others every step
THREE = table({0: [0.01, 0.02, 0.01, 0.02], 1: [0.02, 0.01, 0.02, 0.01], 2: [0.21, 0.22, 0.23, 0.20]})


def test_excess_is_over_the_peers_of_the_same_step_and_steady_is_its_lower_quartile():
    out, alone = lateness(THREE, {}, 0.5, **RULE)
    late = {x.rank: x for x in out}
    # rank 2's excess per step over the median of ranks 0 and 1: 0.195, 0.205, 0.215, 0.185
    assert late[2].excess_s == pytest.approx(0.2) and late[2].steady_s == pytest.approx(0.1925)
    assert late[2].value_s == pytest.approx(0.215) and late[2].typical_s == pytest.approx(0.015)
    # rank 0's excess: -0.105, -0.095, -0.115, -0.085; rank 1's: -0.09, -0.11, -0.10, -0.10 (their
    # peers' median is halfway to rank 2)
    assert late[0].steady_s == pytest.approx(-0.1075) and late[1].steady_s == pytest.approx(-0.1025)
    # spread: the largest of the peers' 1.4826 x MAD of steady (MAD 0.005), the step-to-step noise
    # (deviations from each rank's median excess: 0 0 .005 .005 .005 .005 .01 .01 .015 .015 .015
    # .015, median 0.0075) and 0.05 / 5; z = (0.1925 - (-0.1025)) / (1.4826 x 0.0075)
    assert late[2].z == pytest.approx(0.295 / (1.4826 * 0.0075))
    assert [x.rank for x in out if x.flagged] == [2] and alone == []


def test_a_steady_excess_under_a_fifth_of_the_step_is_not_named():
    # the same 0.19 s every step: named in 0.95 s steps, not in 0.97 s steps (a fifth: 0.194 s)
    assert [x.rank for x in lateness(THREE, {}, 0.95, **RULE)[0] if x.flagged] == [2]
    assert [x.rank for x in lateness(THREE, {}, 0.97, **RULE)[0] if x.flagged] == []
    # nor under min_excess_s, however short the step
    small = table({0: [0.0] * 4, 1: [0.0] * 4, 2: [0.04] * 4})
    assert [x.flagged for x in lateness(small, {}, 0.1, **RULE)[0]] == [False, False, False]


def test_a_rank_late_in_half_the_steps_is_noise_not_a_straggler():
    # rank 1 is 0.3 s later than rank 0 in two steps of four: its median excess is large, its
    # lower quartile is not
    pair = table({0: [0.01] * 4, 1: [0.31, 0.01, 0.31, 0.01]})
    late = {x.rank: x for x in lateness(pair, {}, 0.5, **RULE)[0]}
    assert late[1].excess_s == pytest.approx(0.15) and late[1].steady_s == pytest.approx(0.0)
    assert not late[1].flagged


def test_a_pair_is_measured_against_the_step_to_step_noise():
    # stage 0: rank 1 is 0.1-0.3 s late to rank 0, the stage 1 pair varies as much from step to
    # step (deviations from the median excess: 0.05 x 4, 0.1 x 8, 0.2 x 4; spread 1.4826 x 0.1):
    # rank 1's steady 0.1375 s is under one spread, not named; steadily late in quiet surroundings, it is
    noisy = table({0: [0.0] * 4, 1: [0.1, 0.3, 0.15, 0.25], 2: [0.0] * 4, 3: [0.1, -0.1, 0.2, -0.2]})
    stage = {0: 0, 1: 0, 2: 1, 3: 1}
    late = {x.rank: x for x in lateness(noisy, stage, 0.5, **RULE)[0]}
    assert late[1].steady_s == pytest.approx(0.1375) and not late[1].flagged
    quiet = table({0: [0.0] * 4, 1: [0.2, 0.21, 0.2, 0.21], 2: [0.0] * 4, 3: [0.0] * 4})
    assert [x.rank for x in lateness(quiet, stage, 0.5, **RULE)[0] if x.flagged] == [1]


def test_ranks_of_different_stages_are_not_compared():
    # a 2-rank operation across stages 0 and 1: stage 1 arrives 0.5 s late by design
    late = table({0: [0.0] * 4, 1: [0.5] * 4}, "loss-all-reduce")
    out, alone = lateness(late, {0: 0, 1: 1}, 1.0, **RULE)
    assert out == [] and alone == [("loss-all-reduce", 0), ("loss-all-reduce", 1)]


def test_step_time_is_the_median_rank_step_after_warm_up():
    evs = [Event(rank=r, host="a", local_rank=r, step=s, phase=p, start_s=10.0 * s + t + 0.01 * r, dur_s=d)
           for r in range(3) for s in range(3) for p, t, d in (("forward", 0.0, 0.4), ("optimizer", 0.5, 0.1 + s))]
    assert step_time_s(evs, 1) == pytest.approx(2.1)   # 3 ranks x steps 1 and 2 (1.6 s, 2.6 s): median of 6
    assert step_time_s(evs, 3) == 0.0


def test_ranks_without_a_common_step_give_nothing_to_compare():
    late = {(0, "tp-all-gather", 1): 0.1, (1, "tp-all-gather", 2): 0.2}     # e.g. one rank's records cut short
    assert lateness(late, {}, 1.0, **RULE) == ([], [])
