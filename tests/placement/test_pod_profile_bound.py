"""The joint ToR + pod bound of :mod:`rankmap.placement.pod_profile_bound` against brute force."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np
import pytest

from rankmap.placement.crossing_bound import crossing_lower_bound
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.lower_bounds import analytic_lower_bound, band_lower_bound
from rankmap.placement.perimeter_bound import nested_perimeter_bound, perimeter_lower_bound
from rankmap.placement.pod_profile_bound import pod_profile_bound
from rankmap.placement.pod_rows_bound import pod_rows_bound
from rankmap.placement.shared_columns_bound import shared_columns_bound
from rankmap.placement.tier_search import level_problem, tier_bound


def _brute_two_levels(problem: GridProblem) -> float:
    """Least ``w0 cost_0 + w1 cost_1`` over every label sequence within capacities (own edge list)."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    edges = [((r, c), (r, (c + 1) % C), problem.w_row) for r in range(R) for c in range(C)]
    edges += [((r, c), (r + 1, c), problem.w_col) for r in range(R - 1) for c in range(C)]
    seq = np.array(list(itertools.product(range(K), repeat=R * C))).reshape(-1, R, C)
    ok = np.stack([(seq == g).sum(axis=(1, 2)) <= problem.free[g] for g in range(K)]).all(axis=0)
    seq = seq[ok]
    cost = np.zeros(len(seq))
    for w_tier, dom in zip(problem.weights[:2], [tuple(range(K)), problem.domains[0]]):
        d = np.asarray(dom)[seq]
        for a, b, w in edges:
            cost += w_tier * w * (d[:, a[0], a[1]] != d[:, b[0], b[1]])
    return float(cost.min())


def _instances(n: int, seed: int):
    """Random two-level instances where the bound applies (a row needs two ToR groups)."""
    rng = random.Random(seed)
    made = 0
    while made < n:
        K = rng.choice([3, 4, 5])
        R, C = rng.choice([(1, 4), (1, 5), (2, 3), (2, 4), (3, 3), (2, 5), (3, 4)])
        free = tuple(rng.randint(1, C - 1) for _ in range(K))
        if sum(free) < R * C or K ** (R * C) > 800_000:
            continue
        pods = tuple(sorted(rng.randint(0, 2) for _ in range(K)))
        pods = tuple(np.unique(pods, return_inverse=True)[1].tolist())
        weights = (1.0, float(rng.choice([1, 2, 3])))
        made += 1
        yield GridProblem(R, C, free, rng.randint(1, 12), rng.randint(0, 9), 0, (pods,), weights)


def _per_tier_sum(problem: GridProblem) -> float:
    """The per-level bounds added (what :func:`tier_bound` returned before the joint bound)."""
    total = 0.0
    for lv, w in enumerate(problem.weights):
        p = level_problem(problem, lv)
        args = (p.rows, p.cols, p.free, p.w_row, p.w_col)
        total += w * max(analytic_lower_bound(*args), band_lower_bound(*args), crossing_lower_bound(*args),
                         perimeter_lower_bound(*args))
    return total


def test_bound_never_exceeds_brute_force_and_often_beats_the_per_tier_sum():
    better = tight = 0
    for problem in _instances(60, seed=11):
        best = _brute_two_levels(problem)
        bound = pod_profile_bound(problem)
        assert bound <= best + 1e-6, problem
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        better += bound > _per_tier_sum(problem) + 1e-9
        tight += abs(bound - best) < 1e-9
    assert better >= 5 and tight >= 30, (better, tight)


def test_whole_ring_in_a_pod_shares_a_tor_group():
    # Rings of 5 on pods of groups (3, 3) and (2, 2, 2): each ring whole in a pod takes 2 and
    # 3 ToR groups (3 + 2 of 3, 2 + 2 + 1): 5 ToR crossings and 5 hops leaving both tiers, 60.
    # The per-tier bounds, added, see 50. (60 is the brute-force optimum, 5 ** 10 sequences:
    # too slow to enumerate here.)
    p = GridProblem(2, 5, (3, 3, 2, 2, 2), 10, 1, domains=((0, 0, 1, 1, 1),), weights=(1.0, 1.0))
    assert pod_profile_bound(p) == 60.0 and _per_tier_sum(p) == 50.0
    assert tier_bound(dataclasses.replace(p), 0) == 60.0


def test_not_applicable_returns_zero():
    # a ring fits in one ToR group; and no pods at all
    assert pod_profile_bound(GridProblem(2, 3, (3, 3), 10, 1, domains=((0, 1),), weights=(1.0, 1.0))) == 0.0
    assert pod_profile_bound(GridProblem(2, 4, (3, 3, 3), 10, 1)) == 0.0


def _deep_instances(n: int, seed: int):
    """Random two-level instances of deep pipelines: a stage (row) fits in one ToR group."""
    rng = random.Random(seed)
    made = 0
    while made < n:
        K = rng.choice([3, 4])
        R, C = rng.choice([(3, 2), (4, 2), (5, 2), (6, 2), (2, 3), (3, 3), (4, 3)])
        free = tuple(rng.randint(1, C + 2) for _ in range(K))
        if sum(free) < R * C or K ** (R * C) > 300_000:
            continue
        pods = tuple(sorted(rng.randint(0, 1) for _ in range(K)))
        pods = tuple(np.unique(pods, return_inverse=True)[1].tolist())
        made += 1
        yield GridProblem(R, C, free, rng.randint(1, 12), rng.randint(1, 9), 0, (pods,),
                          (1.0, float(rng.choice([1, 2, 3]))))


def test_nested_blocks_and_shared_columns_never_exceed_brute_force_on_deep_pipelines():
    tight = 0
    for problem in _deep_instances(30, seed=5):
        best = _brute_two_levels(problem)
        bound = nested_perimeter_bound(problem)
        assert bound <= best + 1e-6, problem
        assert shared_columns_bound(problem) <= best + 1e-6, problem
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        tight += abs(bound - best) < 1e-9
    assert tight >= 20, tight


@pytest.mark.parametrize("rows, cols, free, w_row, w_col, pods, w1, shared, nested, best", [
    (3, 3, (3, 4, 3, 6), 3, 6, (0, 0, 1, 1), 2.0, 15.75, 15.0, 18.0),
    (3, 3, (4, 5, 5, 5), 3, 4, (0, 1, 1, 1), 3.0, 18.0, 17.0, 18.0),
    (3, 3, (6, 6, 4, 5), 3, 5, (0, 0, 1, 1), 3.0, 14.625, 14.0, 15.0),
])
def test_shared_columns_beat_nested_blocks_and_stay_below_the_optimum(rows, cols, free, w_row, w_col, pods, w1,
                                                                       shared, nested, best):
    # Instances where the shared-columns inequality is active (found by a random search
    # against brute force); the second is tight.
    p = GridProblem(rows, cols, free, w_row, w_col, 0, (pods,), (1.0, w1))
    assert (shared_columns_bound(p), nested_perimeter_bound(p)) == (shared, nested)
    assert _brute_two_levels(p) == best
    assert tier_bound(p, 0) == max(shared, _per_tier_sum(p))


def test_nested_blocks_see_a_pods_groups_share_its_stages():
    # 4 stages of 2 hosts; pod 0 = group 0 (2 hosts), pod 1 = groups of 3 and 5. Apart, the
    # levels see 12 (ToR: blocks of 2, 3 and 3 hosts; pods: 2 + 6). Nested: pod 1's 6 hosts
    # are 3 stages, split between its groups (one more boundary, 2 hops of 3): stage 0 in
    # group 0, stages 1-2 in the group of 5, stage 3 in the group of 3: 2 hops cross both
    # tiers (12) and 2 the ToR tier (6), 18, the optimum (every label sequence).
    p = GridProblem(4, 2, (2, 3, 5), 11, 3, domains=((0, 1, 1),), weights=(1.0, 1.0))
    assert _per_tier_sum(p) == 12.0
    assert nested_perimeter_bound(p) == 18.0 == _brute_two_levels(p)
    assert tier_bound(p, 0) == 18.0


def _wide_ring_instances(n: int, seed: int, shapes=((2, 4), (2, 5), (3, 4), (3, 3), (4, 3))):
    """Random two-level instances where a ring is wider than every pod (the pod-rows bound applies);
    grids of ``shapes`` (rows, columns)."""
    rng = random.Random(seed)
    made = 0
    while made < n:
        K = rng.choice([3, 4, 5])
        R, C = rng.choice(list(shapes))
        free = tuple(rng.randint(1, C - 1) for _ in range(K))
        pods = tuple(sorted(rng.randint(0, K // 2) for _ in range(K)))
        pods = tuple(np.unique(pods, return_inverse=True)[1].tolist())
        caps = [sum(f for f, d in zip(free, pods) if d == e) for e in set(pods)]
        if sum(free) < R * C or max(caps) >= C or K ** (R * C) > 400_000:
            continue
        made += 1
        yield GridProblem(R, C, free, rng.randint(1, 12), rng.randint(0, 9), 0, (pods,),
                          (1.0, float(rng.choice([1, 2, 3]))))


def test_pod_rows_never_exceed_brute_force():
    tight = 0
    for problem in _wide_ring_instances(25, seed=8):
        best = _brute_two_levels(problem)
        bound = pod_rows_bound(problem)
        assert 0 < bound <= best + 1e-6, problem
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        tight += abs(bound - best) < 1e-9
    assert tight >= 8, tight


@pytest.mark.parametrize("free, pods, w_row, w_col, w1, rows_bound, nested, best", [
    ((4, 1, 3, 2), (0, 1, 1, 2), 11, 7, 1.0, 141.0, 138.0, 145.0),
    ((4, 2, 1, 3), (0, 1, 2, 2), 4, 3, 2.0, 76.0, 75.0, 79.0),
    ((3, 1, 3, 4), (0, 1, 1, 2), 11, 8, 3.0, 271.0, 268.0, 272.0),
])
def test_pod_rows_see_a_group_straddle_a_pods_rows(free, pods, w_row, w_col, w1, rows_bound, nested, best):
    # Two stages of 5 hosts (found by a random search against brute force): the pod of
    # groups of 1 and 3 hosts either lets the group of 3 straddle both stages or is one
    # stage of 4 hosts wide; the nested blocks bound sees neither.
    p = GridProblem(2, 5, free, w_row, w_col, 0, (pods,), (1.0, w1))
    assert (pod_rows_bound(p), nested_perimeter_bound(p)) == (rows_bound, nested)
    assert _brute_two_levels(p) == best
    assert tier_bound(p, 0) == max(rows_bound, _per_tier_sum(p))


def test_pod_rows_not_applicable_when_a_pod_holds_a_ring():
    p = GridProblem(2, 4, (3, 1, 2, 2), 10, 1, 0, ((0, 0, 1, 1),), (1.0, 1.0))
    assert pod_rows_bound(p) == 0.0
