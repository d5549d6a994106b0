"""The bound with split CP x EP spans (:mod:`rankmap.placement.pair_split_bound`) against brute force."""

from __future__ import annotations

import itertools
import random

import numpy as np
from helpers import cluster_with_free, job
from test_pod_profile_bound import _wide_ring_instances

from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import ModelShape
from rankmap.job.traffic import job_traffic
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.grid_problem import GridProblem, span_problem
from rankmap.placement.host_grid import hosts_of_cells
from rankmap.placement.metrics import measure_order
from rankmap.placement.pair_split_bound import pair_split_bound, pair_split_units, whole_spans_bound
from rankmap.placement.plan import plan
from rankmap.placement.pod_pattern_bound import pod_pattern_bound
from rankmap.placement.pod_profile_bound import pod_profile_bound
from rankmap.placement.problem import build_problem
from rankmap.topology import parse_cluster


def _brute_with_pairs(problem: GridProblem, pairs: tuple) -> list[float]:
    """Per price in ``pairs``: the least ``w0 cost_0 + w1 cost_1 + pair * sum_t w_t (spans
    (2j, 2j + 1) split at tier t)`` over every labelling within capacities (own edge list)."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    ring = [((r, c), (r, (c + 1) % C), c % 2 == 0) for r in range(R) for c in range(C)]
    hops = [((r, c), (r + 1, c)) for r in range(R - 1) for c in range(C)]
    seq = np.array(list(itertools.product(range(K), repeat=R * C))).reshape(-1, R, C)
    ok = np.stack([(seq == g).sum(axis=(1, 2)) <= problem.free[g] for g in range(K)]).all(axis=0)
    seq = seq[ok]
    grid, split = np.zeros(len(seq)), np.zeros(len(seq))
    for w_tier, dom in zip(problem.weights[:2], [tuple(range(K)), problem.domains[0]]):
        d = np.asarray(dom)[seq]
        for a, b, inside in ring:
            cut = w_tier * (d[:, a[0], a[1]] != d[:, b[0], b[1]])
            grid += problem.w_row * cut
            split += cut if inside else 0.0
        for a, b in hops:
            grid += w_tier * problem.w_col * (d[:, a[0], a[1]] != d[:, b[0], b[1]])
    return [float((grid + pair * split).min()) for pair in pairs]


def _even_instances(n: int, seed: int):
    """Random two-level instances on grids of an even number of columns, rings wider than every pod."""
    return _wide_ring_instances(n, seed, shapes=((2, 4), (3, 4), (2, 6), (4, 4)))


def _lifted_below_brute_force(instances, priced, plain) -> int:
    """Every labelling, the split spans priced at 0, 3 and 40 units per tier: ``priced(problem,
    pair)`` stays below the least total and at price 0 never below ``plain(problem)``; returns
    how often a price lifts it above ``plain``."""
    lifted = 0
    for problem in instances:
        base = plain(problem)
        for pair, best in zip((0.0, 3.0, 40.0), _brute_with_pairs(problem, (0.0, 3.0, 40.0))):
            bound = priced(problem, pair)
            assert bound <= best + 1e-6, (problem, pair, bound, best)
            assert pair > 0 or bound >= base - 1e-9, (problem, bound, base)
            lifted += bound > base + 1e-9
    return lifted


def test_never_exceeds_brute_force_with_split_spans():
    # rings wider than pods: at price 0 never below the grid's own pod patterns bound
    lifted = _lifted_below_brute_force(_even_instances(7, seed=5), whole_spans_bound, pod_pattern_bound)
    assert lifted >= 4, lifted


def test_one_stage_takes_nothing_off_for_the_columns_first_domains():
    # One stage (no pipeline hops): the pod costs count no column part, so neither bound takes
    # the columns' first domains off (the same rule as pod_box_bound.pods_bound). Against every
    # labelling: never above the least total, at price 0 equal to the pod patterns bound, and
    # exact on most instances (taking (w0 + w1) w_col C off as before fell short on 111 of 120).
    tight = 0
    for problem in _wide_ring_instances(12, seed=11, shapes=((1, 6), (1, 8))):
        assert problem.rows == 1
        for pair, best in zip((0.0, 3.0, 40.0), _brute_with_pairs(problem, (0.0, 3.0, 40.0))):
            bound = whole_spans_bound(problem, pair)
            assert bound <= best + 1e-6, (problem, pair, bound, best)
            assert pair > 0 or bound == pod_pattern_bound(problem), problem
            tight += abs(bound - best) < 1e-9
    assert tight >= 30, tight
    # a ring of 6 over pods of 3 hosts (groups 1 + 2 and 3; w_row 4, w_col 5): each pod is one
    # piece of the ring (2 pod crossings, w1 = 2) and the first holds two group pieces (3 ToR
    # crossings): 3 * 4 + 2 * 2 * 4 = 28, whatever w_col
    problem = GridProblem(1, 6, (1, 2, 3), 4, 5, 0, ((0, 0, 1),), (1.0, 2.0))
    assert whole_spans_bound(problem, 0.0) == _brute_with_pairs(problem, (0.0,))[0] == 28.0


def test_pods_in_whole_spans_or_paying_for_a_split_one():
    # Pods of two groups of 3 hosts (w_row 10, w_col 1) on two rings of 8. A full pod at its
    # best is a row of 6 (10 + 6) with two groups of 1 x 3 (13 each), 42, but then a group's
    # piece ends inside a span. In whole spans a pod holds 4 hosts (14 + 12 + 12, 38). The 16
    # hosts lie in three pods (6 + 6 + 4: 122, less the 8 columns' first domains at both
    # tiers, 106); priced at 40 units per tier, a split span costs each full pod 20 (146), and
    # at 400, 200 each: 6 + 5 + 5 hosts cost no less (the pods of 5 pay at both tiers).
    problem = GridProblem(2, 8, (3,) * 6, 10, 1, 0, ((0, 0, 1, 1, 2, 2),), (1.0, 1.0))
    assert whole_spans_bound(problem, 0.0) == pod_pattern_bound(problem) == 106.0
    assert whole_spans_bound(problem, 40.0) == 146.0
    assert whole_spans_bound(problem, 400.0) == 106.0 + 2 * 200.0


def test_whole_spans_meet_the_span_problem():
    # When a split costs more than any saving, the bound is the span problem's pod patterns
    # bound (groups and pods in whole spans): five pods of groups of 5 and 6 hosts under rings
    # of 12, 4 stages.
    problem = GridProblem(4, 12, (5, 6) * 5, 6, 1, 0, (tuple(g // 2 for g in range(10)),), (1.0, 2.0))
    spans = pod_pattern_bound(span_problem(problem, 2))
    assert pod_pattern_bound(problem) < spans == whole_spans_bound(problem, 1000.0)


def test_a_split_span_sends_its_cp_traffic_across():
    # cp = 2 over two 8-GPU hosts: columns 2j and 2j + 1 of a stage hold one CP group. A
    # placement splitting one span (row 0, columns 0 and 1) moves p units of CP bytes across
    # ToR groups (measured with the launcher's rank order), splitting a second one twice that.
    model = ModelShape(layers=8, hidden=1024, heads=8, seq_len=4096, vocab=100)
    cluster = cluster_with_free((5, 5, 6, 7), gpus=8)
    problem = build_problem(cluster, job(cp=2, pp=2, dp=4, model=model, num_micro_batches=4), PlacementConstraints())
    p, unit = pair_split_units(problem), problem.unit_bytes
    assert problem.cp_ep_span == 2 and p > 0
    one = np.array([[0, 1, 0, 0, 2, 2, 2, 2], [1, 1, 3, 3, 3, 3, 3, 3]])
    two = np.array([[0, 1, 0, 0, 2, 2, 2, 2], [1, 1, 3, 2, 3, 3, 3, 3]])
    cp_only = {"cp": problem.traffic["cp"]}
    for cells, splits in ((one, 1), (two, 2)):
        hosts = hosts_of_cells(cells, problem.grid, list(problem.usable), problem.tor_index)
        measured = measure_order(cluster, problem.layout, cp_only, hosts, problem.gpn).cross_tor_bytes
        assert splits * p * unit <= measured < splits * (p + 1) * unit, (measured, p * unit)
    # no pods in this cluster: the pod boxes bound does not apply
    assert pair_split_bound(problem) == 0.0


# Two pods of ToR groups of 2 and 1 hosts: every host order of a 6-host job can be tried.
PODS_OF_THREE = """hosts: {gpus: 8, nics: 8}
tor_groups:
  - {name: l0, hosts: 'a[1-2]'}
  - {name: l1, hosts: 'b1'}
  - {name: l2, hosts: 'c[1-2]'}
  - {name: l3, hosts: 'd1'}
switches:
  - {name: p1, children: [l0, l1]}
  - {name: p2, children: [l2, l3]}
  - {name: core, children: [p1, p2]}
"""


def test_plan_bound_with_split_spans_never_exceeds_any_host_order():
    # tp 8, cp 2, dp 3: one stage of 6 hosts, each CP group over 2 consecutive hosts, pods of
    # 3 hosts (a ring crosses both pods). The planner's bound counts the CP traffic a split
    # span sends across and stays at or below the least measured cost of every host order (180
    # sequences of ToR groups); the pods' odd sizes leave a span split in each, which the grid
    # bound does not see.
    model = ModelShape(layers=8, hidden=1024, heads=8, seq_len=4096, vocab=100)
    cluster, spec = parse_cluster(PODS_OF_THREE, "c.yaml"), job(cp=2, dp=3, model=model)
    result = plan(cluster, spec, time_limit_s=1)
    layout, traffic = ParallelLayout.of(result.job), job_traffic(result.job)
    orders = set(itertools.permutations(["a1", "a2", "b1", "c1", "c2", "d1"]))
    orders = {tuple(h.replace("2", "1") for h in order) for order in orders}     # hosts of a ToR group alike
    best = min(measure_order(cluster, layout, traffic, [_nth(order, i) for i in range(6)], 8).cost
               for order in sorted(orders))
    assert len(orders) == 180 and "CP/EP spans whole or split" in result.bound_method
    assert 0 < result.lower_bound_bytes <= best * (1 + 1e-9)


def _nth(order: tuple, i: int) -> str:
    """The host at position ``i`` of a sequence of ToR-group labels ("a1" twice: a1 then a2)."""
    return order[i][0] + str(order[:i + 1].count(order[i]))


def _narrow_ring_instances(n: int, seed: int):
    """Random two-level instances of an even number of columns where the pod profiles apply
    (a ring needs two ToR groups; a pod may hold a whole ring)."""
    rng = random.Random(seed)
    made = 0
    while made < n:
        K = rng.choice([3, 4])
        R, C = rng.choice([(1, 4), (2, 4), (1, 6), (2, 2), (3, 2)])
        free = tuple(rng.randint(1, C - 1) for _ in range(K))
        if sum(free) < R * C or K ** (R * C) > 300_000:
            continue
        pods = tuple(np.unique(sorted(rng.randint(0, 1) for _ in range(K)), return_inverse=True)[1].tolist())
        made += 1
        weights = (1.0, float(rng.choice([1, 2])))
        yield GridProblem(R, C, free, rng.randint(1, 12), rng.randint(0, 9), 0, (pods,), weights)


def test_pod_profiles_with_split_spans_never_exceed_brute_force():
    # Rings narrower than pods (whole_spans_bound gives 0 there): each pod in whole spans or
    # paying half a split span; at price 0 exactly the plain profile bound
    instances = list(_narrow_ring_instances(40, seed=3))
    assert all(pod_profile_bound(problem, 0.0) == pod_profile_bound(problem) for problem in instances)
    lifted = _lifted_below_brute_force(instances, pod_profile_bound, pod_profile_bound)
    assert lifted >= 10, lifted
