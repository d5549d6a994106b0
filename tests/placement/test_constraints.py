"""Objectives, constraints and infeasibility explanations, on cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cluster_with_free, job

from rankmap.errors import InfeasibleError, SpecError
from rankmap.placement.constraints import PlacementConstraints, load_constraints
from rankmap.placement.plan import plan


def groups_used(result):
    return sorted(set(result.rankmap.tor_groups))


def test_fragmentation_takes_10_plus_10_and_leaves_19_whole():
    cluster = cluster_with_free((19, 10, 10), gpus=8)
    result = plan(cluster, job(pp=1, dp=20))
    assert groups_used(result) == ["t1", "t2"]
    assert result.ours.metrics.cross_edges["dp"] == 2 * 8   # one ring crossing each way, per rail


def test_24_hosts_on_four_leaves_of_12_use_exactly_two():
    cluster = cluster_with_free((12, 12, 12, 12), gpus=8)
    for pp, dp in ((1, 24), (2, 12), (4, 6)):
        result = plan(cluster, job(pp=pp, dp=dp))
        assert len(groups_used(result)) == 2, (pp, dp)


def test_spread_objective_first():
    cluster = cluster_with_free((6, 6, 6, 6), gpus=8)
    result = plan(cluster, job(pp=2, dp=12), objectives=("spread", "bytes"))
    assert result.ours.metrics.max_spread["dp"] == 2


def test_exclude_and_reserve():
    cluster = cluster_with_free((4, 4), gpus=8)
    first = plan(cluster, job(pp=1, dp=3))
    taken = set(first.rankmap.hosts)
    second = plan(cluster, job(pp=1, dp=4),
                  constraints=PlacementConstraints(reserve=tuple(taken), exclude=("g1h3",)))
    assert not taken & set(second.rankmap.hosts) and "g1h3" not in second.rankmap.hosts
    with pytest.raises(InfeasibleError, match=r"needs 6 hosts; 5 usable in 2 ToR groups .*: 1 short"):
        plan(cluster, job(pp=1, dp=6), constraints=PlacementConstraints(reserve=tuple(taken)))


def test_quotas():
    cluster = cluster_with_free((8, 8, 8), gpus=8)
    result = plan(cluster, job(pp=1, dp=12), constraints=PlacementConstraints(quotas={"t0": 2, "t1": 2}))
    counts = {g: result.rankmap.tor_groups.count(g) for g in groups_used(result)}
    assert counts["t2"] == 8 and counts.get("t0", 0) <= 2 and counts.get("t1", 0) <= 2


def test_stage_pin_and_rank_pin():
    cluster = cluster_with_free((4, 4, 4), gpus=8)
    c = PlacementConstraints(stage_pins={1: "t2"}, rank_pins={0: "g1h2"})
    result = plan(cluster, job(pp=2, dp=4), constraints=c)
    layout_pp = np.array([result.rankmap.entry(r)["pp"] for r in range(0, 64, 8)])
    stage1 = [t for t, p in zip(result.rankmap.tor_groups, layout_pp) if p == 1]
    assert stage1 == ["t2"] * 4
    assert result.rankmap.entry(0)["host"] == "g1h2"


@pytest.mark.parametrize("constraints, message", [
    (PlacementConstraints(stage_pins={0: "t0"}), "stage(s) [0] pinned to ToR group 't0' need 6 hosts; it has 4 usable: 2 short"),
    (PlacementConstraints(rank_pins={0: "g0h4"}), "rank 0 is pinned to host 'g0h4', which is busy"),
    (PlacementConstraints(rank_pins={0: "g0h0", 3: "g0h1"}), "conflicts with another pin"),
])
def test_infeasible_requests_are_explained(constraints, message):
    cluster = cluster_with_free((4, 4, 4), gpus=8)
    with pytest.raises(InfeasibleError) as err:
        plan(cluster, job(pp=2, dp=6), constraints=constraints)
    assert message in str(err.value)


@pytest.mark.parametrize("constraints, message", [
    (PlacementConstraints(stage_pins={5: "t0"}), "stage 5 is pinned, but the job has pp=2 (stages 0..1)"),
    (PlacementConstraints(rank_pins={96: "g0h0"}), "rank 96 is pinned, but the job has 96 ranks (0..95)"),
])
def test_a_pin_the_job_does_not_have_is_bad_input_not_infeasible(constraints, message):
    """Exit 3 (fix the file), not 4 (the cluster cannot meet it)."""
    cluster = cluster_with_free((4, 4, 4), gpus=8)
    with pytest.raises(SpecError) as err:
        plan(cluster, job(pp=2, dp=6), constraints=constraints)
    assert message in str(err.value) and not isinstance(err.value, InfeasibleError)
    assert err.value.exit_code == 3


def test_unknown_names_and_constraint_files(tmp_path):
    cluster = cluster_with_free((4, 4), gpus=8)
    with pytest.raises(SpecError, match="host 'nope' is not in cluster"):
        plan(cluster, job(pp=1, dp=2), constraints=PlacementConstraints(exclude=("nope",)))
    path = tmp_path / "c.yaml"
    path.write_text("exclude: 'g0h[0-1]'\nquotas: {t1: 3}\npins:\n  stages: {0: t1}\n  ranks: {8: g1h0}\n")
    c = load_constraints(path)
    assert c.exclude == ("g0h0", "g0h1") and c.quotas == {"t1": 3} and c.stage_pins == {0: "t1"}
    assert c.rank_pins == {8: "g1h0"}
    path.write_text("pins:\n  stagez: {0: t1}\n")
    with pytest.raises(SpecError, match=r"c.yaml:2: pins.stagez: unknown key"):
        load_constraints(path)


def test_order_auto_picks_a_rail_aligned_order():
    # NCCL's model (job/traffic.py): tp=4 on 8-GPU hosts puts two DP members on local ranks 0 and 4 of
    # every host, so every DP ring has a rail on all its hosts: the default order is aligned.
    cluster = cluster_with_free((8, 8), gpus=8)
    assert plan(cluster, job(tp=4, pp=2, dp=8)).job.order == "tp-cp-ep-dp-pp"
    # tp=2 pp=3 on 4-GPU hosts with tp-pp-dp: a PP hop from local rank 2 to local rank 0 of the next
    # host, with no PP member on rail 0 to relay through (PXN): refused; auto picks an aligned order.
    small = cluster_with_free((4, 4), gpus=4)
    with pytest.raises(Exception, match="not rail-aligned"):
        plan(small, job(tp=2, pp=3, dp=2, order="tp-pp-dp"))
    result = plan(small, job(tp=2, pp=3, dp=2, order="auto"))
    assert result.job.order == "tp-cp-ep-dp-pp"
    assert any("order auto: chose tp-cp-ep-dp-pp" in n for n in result.notes)


def test_cp_blocks_stay_inside_tor_groups():
    from rankmap.job.spec import ModelShape
    model = ModelShape(layers=8, hidden=1024, heads=8, seq_len=4096, vocab=100)
    cluster = cluster_with_free((5, 5, 6, 7), gpus=8)
    result = plan(cluster, job(cp=2, pp=2, dp=4, model=model, num_micro_batches=4))
    assert result.ours.metrics.cross_edges["cp"] == 0
    for b in result.baselines:
        assert result.ours.metrics.cross_tor_bytes <= b.metrics.cross_tor_bytes
    with pytest.raises(Exception, match="put cp before dp"):
        plan(cluster, job(cp=2, pp=2, dp=4, model=model, num_micro_batches=4, order="tp-dp-cp-ep-pp"))


@pytest.mark.parametrize("seed, workers", [(1, 1), (7, 2)])
def test_proven_plans_do_not_depend_on_seed_or_workers(seed, workers):
    from rankmap.job.rank_map import rankmap_to_json
    cluster = cluster_with_free((19, 14, 10, 10, 9), gpus=8)
    base = plan(cluster, job(pp=2, dp=20))
    other = plan(cluster, job(pp=2, dp=20), seed=seed, workers=workers)
    assert base.solver_status == "OPTIMAL" and base.gap < 1e-6
    # the summary holds the seeded arrival-order baseline; the ranks must not move
    assert [base.rankmap.entry(r) for r in range(base.rankmap.world_size)] == \
        [other.rankmap.entry(r) for r in range(other.rankmap.world_size)]
    assert rankmap_to_json(plan(cluster, job(pp=2, dp=20), seed=seed, workers=workers).rankmap) == \
        rankmap_to_json(other.rankmap)


def test_weighted_objectives_trade_bytes_for_uplink():
    from rankmap.placement.grid_problem import GridProblem
    from rankmap.placement.objectives import ranking
    problem = GridProblem(1, 4, (4, 4), 10, 0)
    one = np.array([[0, 0, 0, 0]])
    two = np.array([[0, 0, 1, 1]])
    assert ranking(problem, ("bytes",))(one) < ranking(problem, ("bytes",))(two)
    # bytes with bytes (weighted sums add terms of one unit): 2 crossings x 10, each group's uplinks 20
    assert ranking(problem, (("bytes", 1.0), ("uplink", 100.0)))(one) == (0.0,)
    assert ranking(problem, (("bytes", 1.0), ("uplink", 100.0)))(two) == (2 * 10 + 20 * 100.0,)
    cluster = cluster_with_free((8, 8), gpus=8)
    result = plan(cluster, job(pp=1, dp=4), objectives=(("bytes", 1.0), ("uplink", 0.5)))
    assert result.ours.metrics.cross_tor_bytes == 0


def test_moved_without_an_earlier_plan_is_refused_by_the_library_too():
    cluster = cluster_with_free((6, 6), gpus=8)
    with pytest.raises(SpecError, match="objective 'moved' counts hosts changed against an earlier plan"):
        plan(cluster, job(pp=1, dp=4), objectives=("bytes", "moved"))
    with pytest.raises(SpecError, match="give previous"):
        plan(cluster, job(pp=1, dp=4), objectives=(("spread", 1.0), ("moved", 2.0)))
    first = plan(cluster, job(pp=1, dp=4))
    again = plan(cluster, job(pp=1, dp=4), objectives=("bytes", "moved"), previous=first.rankmap)
    assert again.rankmap.hosts == first.rankmap.hosts      # nothing forces a move: every host is kept


def test_a_shortage_the_quotas_cause_is_blamed_on_the_quotas(tmp_path):
    """Three of four ToR groups held at 0: the job fits the usable hosts, not the quotas."""
    cluster = cluster_with_free((4, 4, 4, 4), gpus=8)
    path = tmp_path / "c.yaml"
    path.write_text("exclude: g3h0\nquotas:\n  t0: 0\n  t1: 1\n")
    with pytest.raises(InfeasibleError) as err:
        plan(cluster, job(pp=3, dp=3), constraints=load_constraints(path, cluster))
    assert str(err.value) == (f"{path}:3: quotas: the quotas hold back 7 usable hosts (t0: 0 of 4, t1: 1 of 4), "
                              f"and the job (tp*cp*pp*dp = 72 GPUs on 8-GPU hosts) needs 9: 8 left under them "
                              f"(t2: 4, t3: 3, t1: 1), 1 short; raise the quotas or plan a smaller job")


def test_a_reserved_map_that_cannot_be_read_is_located_in_the_constraints_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("exclude: g0h0\nreserve:\n  - missing.json\n")
    with pytest.raises(SpecError) as err:
        load_constraints(path)
    assert str(err.value).startswith(f"{path}:3: reserve[0]: {tmp_path}/missing.json: cannot read file")
