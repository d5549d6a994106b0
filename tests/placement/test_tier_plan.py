"""Planning on fabrics of several tiers: known optima, listing-order independence, tier bound."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from helpers import TINY, job

from rankmap.errors import SpecError
from rankmap.job.spec import JobSpec
from rankmap.placement.crossing_bound import crossing_lower_bound
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.grid_search import search
from rankmap.placement.lower_bounds import band_lower_bound
from rankmap.placement.plan import plan
from rankmap.placement.tier_search import level_problem, tier_bound, tier_cost
from rankmap.placement.tier_weights import crossed_tiers, default_tier_weights, tier_weights
from rankmap.topology import parse_cluster
from rankmap.topology.slurm import parse_slurm_tree

TREE = """SwitchName=core Switches=p[1-2]
SwitchName=p1 Switches=l[1-2]
SwitchName=p2 Switches=l[3-4]
SwitchName=l1 Nodes=h[1-2]
SwitchName=l2 Nodes=h[3-4]
SwitchName=l3 Nodes=h[5-6]
SwitchName=l4 Nodes=h[7-8]
"""


def ring_changes(labels: list) -> int:
    """Times a ring over ``labels`` (cyclic, in order) changes label."""
    return sum(a != b for a, b in zip(labels, labels[1:] + labels[:1]))


def pods_of(cluster, hosts) -> list[int]:
    dom = dict(zip((g.name for g in cluster.tor_groups), cluster.domain_index(1)))
    return [dom[cluster.host(h).tor_group] for h in hosts]


def tree_cluster(lines: list[str]):
    return parse_slurm_tree("\n".join(lines) + "\n", "topology.conf").cluster


@pytest.mark.parametrize("perm", list(itertools.permutations(range(7)))[::97])
def test_ring_crosses_pod_tier_twice_in_every_listing_order(perm):
    lines = TREE.splitlines()
    cluster = tree_cluster([lines[i] for i in perm])
    result = plan(cluster, job(pp=1, dp=8), time_limit_s=2)
    hosts = list(result.rankmap.hosts)
    assert ring_changes(pods_of(cluster, hosts)) == 2
    groups = [cluster.host(h).tor_group for h in hosts]
    assert ring_changes(groups) == 4
    assert result.gap < 1e-5 and result.solver_status == "OPTIMAL"


def test_same_plan_in_every_listing_order():
    lines = TREE.splitlines()
    plans = {tuple(plan(tree_cluster([lines[i] for i in perm]), job(pp=2, dp=4), time_limit_s=2).rankmap.hosts)
             for perm in list(itertools.permutations(range(7)))[::251]}
    assert len(plans) == 1


def test_yaml_tor_group_order_does_not_change_the_plan():
    groups = [f"  - {{name: l{i}, hosts: 'h{2 * i - 1},h{2 * i}'}}" for i in range(1, 5)]
    switches = "switches:\n  - {name: p1, children: [l1, l2]}\n  - {name: p2, children: [l3, l4]}\n" \
               "  - {name: core, children: [p1, p2]}\n"
    out = set()
    for perm in itertools.permutations(range(4)):
        text = "hosts: {gpus: 8, nics: 8}\ntor_groups:\n" + "\n".join(groups[i] for i in perm) + "\n" + switches
        out.add(tuple(plan(parse_cluster(text, "c.yaml"), job(pp=1, dp=8), time_limit_s=2).rankmap.hosts))
    assert len(out) == 1


def test_four_hosts_take_the_spine_with_room():
    cluster = tree_cluster(["SwitchName=core Switches=sa,sb", "SwitchName=sa Switches=la[1-2]",
                            "SwitchName=sb Switches=lb1", "SwitchName=la1 Nodes=a[1-2]",
                            "SwitchName=la2 Nodes=a[3-4]", "SwitchName=lb1 Nodes=b[1-3]"])
    result = plan(cluster, job(pp=1, dp=4), time_limit_s=2)
    assert sorted(result.rankmap.hosts) == ["a1", "a2", "a3", "a4"]
    assert result.ours.metrics.tier_bytes[1] == 0.0


def test_tier_weights_rule_and_overrides():
    text = ("hosts: {gpus: 8, nics: 8}\ntor_groups:\n" + "\n".join(f"  - {{name: l{i}, hosts: 'h{i}'}}"
                                                                  for i in range(4))
            + "\nswitches:\n  - {name: p1, children: [l0, l1]}\n  - {name: p2, children: [l2, l3]}\n"
              "  - {name: core, children: [p1, p2]}\n")
    cluster = parse_cluster(text, "c.yaml")
    names = crossed_tiers(cluster)
    assert len(names) == 2 and default_tier_weights(cluster)[0] == 1.0
    assert tier_weights(cluster, {names[1]: 3.0}) == (1.0, 3.0)
    for bad in (-1.0, float("nan"), float("inf"), 2e12):  # a library caller gets the CLI's limits too
        with pytest.raises(SpecError, match=f"tier weight {names[1]}=.* must be a number >= 0 and <= 1e\\+12"):
            tier_weights(cluster, {names[1]: bad})


def test_oversubscribed_core_weighs_three():
    from rankmap.examples import example_path
    from rankmap.topology import load_cluster
    assert default_tier_weights(load_cluster(example_path("oversubscribed-core", "cluster.yaml"))) == (1.0, 3.0)


def _brute(problem: GridProblem) -> float:
    """Every label sequence within capacities, cost from an edge list (independent of the planner)."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    edges = [((r, c), (r, (c + 1) % C), problem.w_row) for r in range(R) for c in range(C) if C > 1]
    edges += [((r, c), (r + 1, c), problem.w_col) for r in range(R - 1) for c in range(C)]
    levels = [tuple(range(K))] + [tuple(d) for d in problem.domains]
    seq = np.array(list(itertools.product(range(K), repeat=R * C))).reshape(-1, R, C)
    ok = np.stack([(seq == g).sum(axis=(1, 2)) <= problem.free[g] for g in range(K)]).all(axis=0)
    seq = seq[ok]
    cost = np.zeros(len(seq))
    for w_tier, dom in zip(problem.weights, levels):
        d = np.asarray(dom)[seq]
        for a, b, w in edges:
            cost += w_tier * w * (d[:, a[0], a[1]] != d[:, b[0], b[1]])
    return float(cost.min())


def _random_problems(n: int, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(n):
        K = rng.choice([3, 4])
        R = rng.choice([1, 2, 3])
        C = rng.choice([2, 3, 4]) if R > 1 else rng.choice([4, 6, 8])
        free = tuple(rng.randint(1, 4) for _ in range(K))
        if sum(free) < R * C or K ** (R * C) > 600_000:
            continue
        pods = tuple(sorted(rng.randint(0, 1) for _ in range(K)))
        pods = pods if len(set(pods)) > 1 else (0,) * (K - 1) + (1,)
        three = rng.random() < 0.5
        domains = (pods,) if not three else (pods, tuple(0 for _ in range(K)))
        weights = (1.0, float(rng.choice([1, 3]))) + ((2.0,) if three else ())
        yield GridProblem(R, C, free, rng.randint(1, 9), rng.randint(0, 9), 0, domains, weights)


def test_planner_matches_brute_force_and_bound_never_exceeds_it():
    checked = 0
    for problem in _random_problems(40):
        greedy = np.repeat(np.argsort(-np.asarray(problem.free), kind="stable"),
                           sorted(problem.free, reverse=True))[:problem.rows * problem.cols]
        sol, bound, _ = search(problem, greedy.reshape(problem.rows, problem.cols), objectives=("tiers", "uplink"),
                              time_limit_s=2)
        best = _brute(problem)
        assert tier_cost(problem, sol.cells) == pytest.approx(best), problem
        assert bound <= best + 1e-6, problem
        checked += 1
    assert checked >= 20


def test_band_bound_is_positive_for_deep_pipelines():
    # --pp 96 --dp 8 style: one stage fits in a ToR group, the job does not.
    assert band_lower_bound(96, 8, (64,) * 12, 1000, 10) == 88 * 10


@pytest.mark.parametrize("seed", range(6))
def test_no_plan_worse_than_any_baseline(seed):
    rng = random.Random(seed)
    shapes = [dict(tp=8, cp=2, pp=2, dp=2), dict(tp=8, ep=2, pp=1, dp=4), dict(tp=8, pp=6, dp=1),
              dict(tp=8, cp=2, ep=2, pp=1, dp=2), dict(tp=8, pp=4, dp=2), dict(tp=8, cp=4, pp=1, dp=2)]
    shape = shapes[seed]
    groups = [f"  - {{name: l{i}, hosts: 'x{i}h[1-{rng.randint(1, 4)}]'}}" for i in range(6)]
    text = ("hosts: {gpus: 8, nics: 8}\ntor_groups:\n" + "\n".join(groups)
            + "\nswitches:\n  - {name: p1, children: [l0, l1, l2]}\n  - {name: p2, children: [l3, l4, l5]}\n"
              "  - {name: core, children: [p1, p2]}\n")
    cluster = parse_cluster(text, "c.yaml")
    spec = JobSpec(**{"model": TINY, "num_micro_batches": 4, "source": "job.yaml", "order": "tp-cp-ep-dp-pp",
                      "moe_experts": 4 if shape.get("ep", 1) > 1 else 0, **shape}) \
        if "moe_experts" in JobSpec.__dataclass_fields__ else job(**shape)
    if len(cluster.free_hosts()) * 8 < spec.tp * spec.cp * spec.pp * (spec.dp or 1) * 1:
        pytest.skip("too few hosts")
    try:
        result = plan(cluster, spec, time_limit_s=2)
    except Exception as exc:  # a shape the cluster cannot hold
        pytest.skip(str(exc)[:80])
    cost = result.ours.metrics.cost
    assert all(cost <= b.metrics.cost * (1 + 1e-12) for b in result.baselines)
    assert result.lower_bound_bytes <= cost * (1 + 1e-9)


def test_joint_tier_model_bound_never_exceeds_brute_force():
    from rankmap.placement.tier_model import tier_model_solve
    checked = 0
    for problem in _random_problems(60, seed=7):
        best = _brute(problem)
        decoded, bound = tier_model_solve(problem, None, 2.0)
        assert bound <= best + 1e-6, problem
        assert all(tier_cost(problem, c) >= best - 1e-6 for c in decoded)
        checked += 1
    assert checked >= 30


def test_count_search_keeps_capacities_and_never_worsens():
    from rankmap.placement.count_search import count_search
    for problem in _random_problems(40, seed=3):
        start = np.repeat(np.arange(len(problem.free)), problem.free)[:problem.rows * problem.cols]
        start = start.reshape(problem.rows, problem.cols)
        out = count_search(problem, start, lambda c: tier_cost(problem, c))
        assert (np.bincount(out.ravel(), minlength=len(problem.free)) <= np.asarray(problem.free)).all()
        assert out.shape == start.shape
        assert tier_cost(problem, out) <= tier_cost(problem, start)


def test_screened_count_search_equals_the_plain_one():
    # The planner's key lets the count search screen moves a chunk at a time from the rows
    # each move changes (count_screen): the same tier costs to the last bit as decoding and
    # scoring whole grids, and the same search result as without the screen.
    from rankmap.placement.count_screen import CountScreen
    from rankmap.placement.count_search import count_search
    from rankmap.placement.objectives import ranking
    from rankmap.placement.tier_model import decode_counts

    rng = np.random.default_rng(5)
    searched = 0
    for problem in _random_problems(60, seed=11):
        R, C, K = problem.rows, problem.cols, len(problem.free)
        start = np.repeat(np.arange(K), problem.free)[:R * C].reshape(R, C)
        counts = np.stack([np.bincount(row, minlength=K) for row in start])
        moves = []
        for _ in range(6):                     # one or two rows redrawn, or two rows swapped
            t = counts.copy()
            for r in rng.choice(R, size=min(R, 2), replace=False)[:rng.integers(1, 3)]:
                t[r] = np.bincount(rng.integers(0, K, size=C), minlength=K)
            if R > 1 and rng.random() < 0.3:
                t = counts.copy()
                t[[0, R - 1]] = t[[R - 1, 0]]
            moves.append(t)
        want = [[tier_cost(problem, d) for d in decode_counts(problem, t)] for t in moves]
        assert CountScreen(problem, counts).costs(np.stack(moves)).T.tolist() == want, problem
        key = ranking(problem, ("tiers", "uplink"))
        plain = ranking(problem, ("tiers", "uplink"))
        del plain.first_name
        for evals in (None, 7):
            a = count_search(problem, start, key, max_evals=evals)
            assert a.tobytes() == count_search(problem, start, plain, max_evals=evals).tobytes(), problem
        searched += 1
    assert searched >= 20


def test_default_three_tier_plan_beats_arnold_spread():
    # 8 rows of 144 hosts on 6 pods of 4 ToR groups (megascale-3tier's shape, all hosts used):
    # the count search must beat the pod-by-pod fill (Arnold's spread minimisation).
    from rankmap.placement.count_search import count_search
    free = (46, 52, 45, 49, 48, 51, 53, 50, 47, 48, 43, 48, 42, 48, 45, 49, 49, 48, 47, 54, 52, 43, 50, 45)
    problem = GridProblem(8, 144, free, 108, 1, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))
    fill = np.repeat(np.arange(24), free).reshape(8, 144)
    out = count_search(problem, fill, lambda c: tier_cost(problem, c))
    assert tier_cost(problem, out) < 0.97 * tier_cost(problem, fill)


def _brute_level(rows: int, cols: int, free: tuple, w_row: int, w_col: int) -> float | None:
    """The optimum of one tier alone (domains as groups); None when nothing fits."""
    if sum(free) < rows * cols:
        return None
    return _brute(GridProblem(rows, cols, free, w_row, w_col))


def _solved_levels(n: int, seed: int, max_rows: int, max_free: int):
    """``n`` random one-tier instances small enough to brute-force, each with its optimum:
    ``(R, C, free, w_row, w_col, best)``."""
    rng = random.Random(seed)
    while n:
        K, R, C = rng.choice([2, 3, 4]), rng.randint(1, max_rows), rng.randint(1, 5)
        if K ** (R * C) > 200_000:
            continue
        free, w_row, w_col = tuple(rng.randint(0, max_free) for _ in range(K)), rng.randint(0, 9), rng.randint(0, 9)
        best = _brute_level(R, C, free, w_row, w_col)
        if best is not None:
            n -= 1
            yield R, C, free, w_row, w_col, best


def test_crossing_bound_never_exceeds_one_tier_optimum_and_is_often_tight():
    positive = tight = 0
    for R, C, free, w_row, w_col, best in _solved_levels(150, seed=12, max_rows=4, max_free=8):
        bound = crossing_lower_bound(R, C, free, w_row, w_col)
        assert bound <= best + 1e-9, (R, C, free, w_row, w_col)
        positive += best > 0
        tight += best > 0 and bound == best
    assert tight >= positive // 2 > 0


def test_crossing_bound_sees_whole_rings_against_pipeline_hops():
    # 3 rings of 4 hosts on 3 domains of 5: one whole ring per domain at most. Whole rings
    # in 3 domains: 2 x 4 hops cross (40); else a ring splits (2 crossings, 30 each, and hops).
    assert crossing_lower_bound(3, 4, (5, 5, 5), 30, 5) == _brute_level(3, 4, (5, 5, 5), 30, 5) == 40
    # the previous per-tier bounds see nothing here: a ring fits in one domain
    assert band_lower_bound(3, 4, (5, 5, 5), 30, 5) < 40
    assert crossing_lower_bound(2, 4, (8, 8), 10, 1) == 0


def test_tier_bound_with_crossing_count_never_exceeds_brute_force():
    checked = 0
    for problem in _random_problems(80, seed=12):
        best = _brute(problem)
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        for lv in range(1, len(problem.weights)):
            q = level_problem(problem, lv)
            assert crossing_lower_bound(q.rows, q.cols, q.free, q.w_row, q.w_col) <= _brute(q) + 1e-6
        checked += 1
    assert checked >= 40


def test_perimeter_bound_never_exceeds_one_tier_optimum():
    from rankmap.placement.perimeter_bound import perimeter_lower_bound
    positive = 0
    for R, C, free, w_row, w_col, best in _solved_levels(150, seed=21, max_rows=5, max_free=9):
        bound = perimeter_lower_bound(R, C, free, w_row, w_col)
        assert bound <= best + 1e-9, (R, C, free, w_row, w_col)
        positive += bound > 0
    assert positive >= 20


def test_perimeter_bound_sees_blocks_of_deep_pipelines():
    from rankmap.placement.perimeter_bound import perimeter_lower_bound
    # Brute-force optima where the bound is tight and the band and crossing bounds are not:
    # 4 stages of 3 hosts on 3 domains of 4, 4 x 4 on two domains of 8, 6 x 2 on three of 4
    # (pipeline hops heavier than ring crossings: the optima cut domains into blocks).
    for args, best in (((4, 3, (4, 4, 4), 1, 3), 12), ((4, 4, (8, 8), 1, 3), 8), ((6, 2, (4, 4, 4), 2, 5), 20)):
        assert _brute_level(*args) == best == perimeter_lower_bound(*args)
        assert band_lower_bound(*args) < best and crossing_lower_bound(*args) < best
    # the 32 x 46 deep-pipeline level of the benchmark (pp 32 on ToR groups of 64)
    assert perimeter_lower_bound(32, 46, (64,) * 24, 5, 1) == 782 > band_lower_bound(32, 46, (64,) * 24, 5, 1)
