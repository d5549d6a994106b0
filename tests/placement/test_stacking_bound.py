"""The joint ToR + pod bound of :mod:`rankmap.placement.stacking_bound` against brute force."""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
from test_pod_box_bound import _wide_ring_instances
from test_pod_profile_bound import _brute_two_levels

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.perimeter_bound import pod_free_hosts
from rankmap.placement.pod_box_bound import pod_box_bound
from rankmap.placement.pod_pattern_bound import pod_pattern_bound
from rankmap.placement.stacking_bound import _compositions, _credits, _lagrangian, _programme, stacking_bound
from rankmap.placement.tier_search import tier_bound


def _stacked_instances(n: int, seed: int):
    """Random instances of three stages on pods of one or two groups and at most 2 hosts (so
    a pod is at most 2 stages tall and every column meets two pods or more)."""
    rng = random.Random(seed)
    made = 0
    while made < n:
        pods = [rng.choice([(2,), (1,), (1, 1), (2,)]) for _ in range(rng.choice([5, 6]))]
        free = tuple(f for p in pods for f in p)
        if sum(free) < 9 or len(free) > 5:
            continue
        dom = tuple(d for d, p in enumerate(pods) for _ in p)
        made += 1
        yield GridProblem(3, 3, free, rng.randint(1, 4), rng.randint(1, 5), 0, (dom,),
                          (1.0, float(rng.choice([1, 2]))))


@functools.cache
def _stacked_cases() -> tuple:
    """``(problem, optimum)`` for six stacked instances, brute-forced once for the tests
    below (each brute force takes ~2 s)."""
    return tuple((p, _brute_two_levels(p)) for p in _stacked_instances(6, seed=5))


def test_five_pods_of_two_on_three_stages():
    # A pod of 2 hosts is best upright (2 stages x 1 column: 2 w_row + w_col = 5 per tier),
    # but each of the 3 columns of 3 stages then meets 2 pods: 6 pieces. The programme: 4.5
    # pods of two hosts, x upright (one piece) and y flat (1 x 2, 14: two pieces) with
    # x + y = 4.5, x + 2 y = 6: x = 3, y = 1.5, 30 + 21 = 51, less the 3 columns' first
    # domains at both tiers (2 x 3 x 3 = 18): 33. The pod boxes see 9 hosts in four upright
    # pods and one of one host (40 + 8 - 18 = 30); the optimum (three upright, one flat, one
    # of one host: 30 + 14 + 8 - 18) is 34.
    problem = GridProblem(3, 3, (2,) * 5, 1, 3, 0, (tuple(range(5)),), (1.0, 1.0))
    pods = [tuple(p) for p in pod_free_hosts(problem)]
    value, prices = _programme(problem, pods, [2] * 5, 1)
    assert value == pytest.approx(51.0)
    assert stacking_bound(problem) == pytest.approx(33.0, abs=1e-4)
    assert pod_box_bound(problem) == 30.0
    assert _brute_two_levels(problem) == 34.0
    # the Lagrangian bound from the programme's prices: no better than the programme here
    assert _lagrangian(problem, pods, [2] * 5, prices) - 18 <= 33.0 + 1e-6


def test_compositions_and_credits_by_hand():
    prices = np.array([0.0, 1.0, 3.0, 2.0])       # pieces of 1, 2, 3 cells
    # 5 = 3 + 1 + 1 (4) = 3 + 2 (5) = 2 + 2 + 1 (7) = 1 x 5 (5): the least is 4
    assert _compositions(prices, 5) == 4.0
    credit = _credits(prices, 3, 6)
    # two pieces holding 4 cells: 2 + 2 (6) or 3 + 1 (3): the most is 6; one piece of 4: none
    assert credit[2, 4] == 6.0 and credit[1, 4] == -np.inf
    # pieces of at most 2 cells: three holding 5 cells, 2 + 2 + 1: 7
    assert _credits(prices, 2, 6)[3, 5] == 7.0


def test_never_exceeds_brute_force_where_pods_stack():
    # Three stages on pods at most two tall: the bound is never above the optimum and lifts
    # the pod boxes (and the pod patterns) on most of these.
    lifted = 0
    for problem, best in _stacked_cases():
        bound = stacking_bound(problem)
        assert bound <= best + 1e-6, problem
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        lifted += bound > max(pod_box_bound(problem), pod_pattern_bound(problem)) + 1e-6
    assert lifted >= 3, lifted


def test_never_exceeds_brute_force_on_wide_rings():
    for problem in _wide_ring_instances(30, seed=21):
        assert stacking_bound(problem) <= _brute_two_levels(problem) + 1e-6, problem


def test_the_lagrangian_bound_holds_for_any_prices():
    # Every column's pieces add up to R whatever they are priced, so any prices (negative
    # ones too) give a bound below the optimum.
    rng = np.random.default_rng(3)
    for problem, best in _stacked_cases()[:3]:
        pods = [tuple(sorted(p)) for p in pod_free_hosts(problem)]
        caps = [sum(p) for p in pods]
        off = (problem.weights[0] + problem.weights[1]) * problem.w_col * problem.cols
        for _ in range(20):
            prices = np.concatenate([[0.0], rng.uniform(-2, 6, size=3)])
            assert _lagrangian(problem, pods, caps, prices) - off <= best + 1e-6, (problem, prices)


@pytest.mark.parametrize("h, cols, free, w_row, w_col, w1", [
    (3, 3, (2, 2, 2), 1, 3, 1.0), (3, 3, (3, 2, 1), 2, 1, 2.0), (2, 4, (3, 2, 2), 1, 2, 1.0),
    (3, 2, (3, 3), 3, 1, 1.0), (2, 3, (2, 2, 1), 5, 2, 1.0), (4, 2, (4, 3), 1, 1, 1.0),
])
def test_group_stacking_lines_below_every_pod_layout(h, cols, free, w_row, w_col, w1):
    # Every labelling of an h x cols grid by the pod's groups that touches all h rows: Phi less
    # the credits of its columns (priced by the number of cells each holds) is at least the
    # line at its host count, for prices of either sign.
    from test_pod_pattern_bound import _every_pod_layout, _phi

    from rankmap.placement.stacking_groups import group_stacking_lines

    k = len(free)
    problem = GridProblem(16, 64, free, w_row, w_col, 0, ((0,) * k,), (1.0, w1))
    cells = _every_pod_layout(h, cols, k)
    counts = np.stack([(cells == g).sum(axis=(1, 2)) for g in range(k)], axis=1)
    inside = cells < k
    keep = (counts <= np.asarray(free)[None, :]).all(axis=1) & (inside.any(axis=2).sum(axis=1) == h)
    cells, inside = cells[keep], inside[keep]
    hosts = inside.sum(axis=(1, 2))
    phi = _phi(cells, k, w_row, w_col, 1.0, w1)
    per_col = inside.sum(axis=1)                                      # (M, cols) cells per column
    cap = sum(free)
    rng = np.random.default_rng(h * 100 + cols)
    for prices in (np.zeros(h + 1), np.concatenate([[0.0], rng.uniform(-1, 3, size=h)])):
        (value, slope), = group_stacking_lines(problem, [(free, h)], prices)
        credit = np.where(per_col > 0, prices[per_col], 0.0).sum(axis=1)
        line = value + slope * (hosts - cap)
        assert (phi - credit >= line - 1e-6).all(), (phi - credit - line).min()


def test_group_stacking_lifts_tall_pods_above_their_boxes():
    # Four groups of 48 (w_row 5, w_col 1). Six rows: the 6 x 32 pod tiled by 3 x 16 groups,
    # 4 x (15 + 16) + 30 + 32 = 186, which both bounds see. Seven rows: groups of 3 rows
    # (their best) would leave full columns three groups deep, and 3 + 4 pairs run out of
    # 4-row columns; the pod boxes see 186.43 (every group 3 x 16 and the pod 7 x 27.4), the
    # groups' stacking 188.71 or more. Eight rows: 188 against 190.67 or more.
    from rankmap.placement.pod_box_bound import box_costs
    from rankmap.placement.stacking_groups import group_stacking_lines

    problem = GridProblem(32, 400, (48,) * 4, 5, 1, 0, ((0,) * 4,), (1.0, 1.0))
    tor = GridProblem(32, 400, (48,) * 4, 5, 1, 0, ((0,) * 4,), (1.0, 0.0))
    lines = group_stacking_lines(problem, [((48,) * 4, h) for h in (6, 7, 8)], np.zeros(9))
    box = [box_costs([48] * 4, tor, h)[192] + 5 * h + 192 / h for h in (6, 7, 8)]
    assert lines[0][0] == pytest.approx(186.0, abs=1e-3) and box[0] == pytest.approx(186.0)
    assert lines[1][0] == pytest.approx(188.714, abs=1e-3) and box[1] == pytest.approx(186.429, abs=1e-3)
    assert lines[2][0] == pytest.approx(190.666, abs=1e-3) and box[2] == pytest.approx(188.0)


def test_scaled_prices_stay_below_brute_force_and_beat_only_skips_work():
    # The line search over scaled prices takes the largest of several Lagrangian bounds, each
    # valid: never above the optimum, never below the bound at the programme's own prices. A
    # ``beat`` far above it skips the search (the first bound only), one of 0 never does.
    from rankmap.placement.stacking_bound import _best_scaled

    cases = list(_stacked_cases()) + [(p, _brute_two_levels(p)) for p in _wide_ring_instances(6, seed=4)]
    for problem, best in cases:
        pods = [tuple(sorted(p)) for p in pod_free_hosts(problem)]
        caps = [sum(p) for p in pods]
        spare = sum(caps) - problem.rows * problem.cols
        if spare < 0 or max(caps) >= problem.cols:
            continue
        out = _programme(problem, pods, caps, spare)
        if out is None:
            continue
        off = (problem.weights[0] + problem.weights[1]) * problem.w_col * problem.cols
        first = _lagrangian(problem, pods, caps, out[1]) or 0.0
        scaled = _best_scaled(problem, pods, caps, out[1])
        assert first * (1 - 1e-9) - 1e-9 <= scaled <= best + off + 1e-6, problem
        assert _best_scaled(problem, pods, caps, out[1], floor=1e18) == pytest.approx(first, rel=1e-8)
        assert stacking_bound(problem, beat=1e18) <= stacking_bound(problem) <= best + 1e-6
