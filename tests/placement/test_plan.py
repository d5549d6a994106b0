"""The planner on the two examples: no worse than any baseline, proven close to optimal."""

from __future__ import annotations

import pytest

from rankmap.errors import PlacementError
from rankmap.job.rank_map import rankmap_to_json
from rankmap.job.spec_file import load_job
from rankmap.placement.plan import plan
from rankmap.topology import load_cluster, parse_cluster


@pytest.fixture(scope="module")
def megascale():
    cluster = load_cluster("examples/megascale-12k/cluster.yaml")
    return cluster, plan(cluster, load_job("examples/megascale-12k/job.yaml"))


def test_default_example_beats_every_baseline(megascale):
    _, result = megascale
    ours = result.ours.metrics
    assert result.job.dp == 144 and result.rankmap.world_size == 9216
    for b in result.baselines:
        assert ours.cross_tor_bytes <= b.metrics.cross_tor_bytes
        assert ours.cross_edges["dp"] <= b.metrics.cross_edges["dp"]
        assert ours.max_spread["dp"] <= b.metrics.max_spread["dp"]
        assert ours.max_uplink_bytes <= b.metrics.max_uplink_bytes
    # 144 hosts per stage from ToR groups of 42..54 free hosts: 3 groups per DP ring at best
    assert ours.max_spread["dp"] == 3 and ours.cross_edges["dp"] == 8 * 8 * 3
    assert result.solver_status == "OPTIMAL" and result.gap < 1e-5


def test_default_example_pp_tradeoff_is_reported(megascale):
    _, result = megascale
    # every ToR group sits under one stage, so every pipeline hop crosses; random orders
    # keep ~1/24 of hops inside a group by chance, and the plan says so
    assert result.ours.metrics.cross_edges["pp"] == 144 * 7 * 8
    assert any("fewer PP edges" in n and "the plan minimises the total" in n for n in result.notes)


def test_plans_are_deterministic(megascale):
    cluster, result = megascale
    again = plan(cluster, load_job("examples/megascale-12k/job.yaml"))
    assert rankmap_to_json(again.rankmap) == rankmap_to_json(result.rankmap)


def test_racks_example_hostname_order_is_already_good():
    cluster = load_cluster("examples/racks/cluster.yaml")
    result = plan(cluster, load_job("examples/racks/job.yaml"))
    by_name = {b.name: b for b in result.baselines}
    assert result.ours.metrics.cross_tor_bytes == by_name["hostname order"].metrics.cross_tor_bytes
    assert by_name["arrival order"].metrics.cross_tor_bytes > 10 * result.ours.metrics.cross_tor_bytes
    assert result.gap < 1e-5


def test_a_plan_that_meets_its_bound_is_optimal_to_the_byte():
    """The README's racks line (tp 8, pp 8, GPT-3 175B): every DP ring stays in a ToR group and
    every crossing is a pipeline hop, so the plan meets the bound exactly. The PP weight's
    float quotient read 999999.99... cost units, which flooring turned into a 1e-6 gap and the
    status FEASIBLE; the smaller weight is now exactly 1e6 units."""
    cluster = load_cluster("examples/racks/cluster.yaml")
    job = load_job("examples/racks/job.yaml", {"tp": 8, "pp": 8, "dp": None, "model": "gpt3-175b",
                                               "num_micro_batches": 12})
    result = plan(cluster, job)
    assert result.ours.metrics.cost == 25_367_150_592
    assert result.lower_bound_bytes == result.ours.metrics.cost
    assert result.gap == 0.0 and result.solver_status == "OPTIMAL"


def test_a_bound_never_reads_above_the_plan_it_proves():
    """Units times bytes per unit gave 1677721600.0000002 against a plan of 1677721600 bytes."""
    cluster = load_cluster("examples/racks/cluster.yaml")
    result = plan(cluster, load_job("examples/racks/job.yaml", {"dp": 5, "pp": 4}))
    assert result.lower_bound_bytes == result.ours.metrics.cost == 1_677_721_600
    assert result.solver_status == "OPTIMAL"


def test_the_smaller_grid_weight_is_exactly_a_million_units():
    from rankmap.job.traffic import GroupTraffic
    from rankmap.placement.grid_problem import scaled_problem

    def traffic(kind, edge_bytes):
        return GroupTraffic(kind=kind, pattern="ring", group_size=8, op_bytes=1, ops=1, edge_bytes=edge_bytes,
                            rank_bytes=edge_bytes)

    # x // (x / 1e6) is 999999.0 in floating point for this x: flooring lost one unit in a million
    x = 623_347_347_958.0
    assert x // (x / 1e6) == 999_999.0
    problem, unit = scaled_problem((8, 8), 2, 8, {"dp": traffic("dp", 3 * x), "pp": traffic("pp", x)}, (1, 1, 0))
    assert problem.w_col == 1_000_000 and problem.w_row == int(3 * x // unit)


def test_tp_larger_than_host_is_refused(small_cluster_text):
    cluster = parse_cluster(small_cluster_text)
    job = load_job("examples/racks/job.yaml", {"tp": 16, "pp": 1, "dp": 1, "model": "gpt3-175b"})
    with pytest.raises(PlacementError, match=r"examples/racks/job.yaml: parallel.tp: tp=16 does not fit"):
        plan(cluster, job)


def test_order_that_is_not_rail_aligned_is_refused(small_cluster_text):
    cluster = parse_cluster(small_cluster_text)
    # tp=4 dp=4: each host holds DP members on local ranks 0 and 4 -- NCCL runs a ring on each rail
    assert plan(cluster, load_job("examples/racks/job.yaml", {"tp": 4, "pp": 1, "dp": 4})).rankmap.world_size == 16
    job = load_job("examples/racks/job.yaml", {"tp": 4, "pp": 5, "dp": 2, "order": "tp-pp-dp"})
    with pytest.raises(PlacementError, match="not rail-aligned"):  # PP hop local rank 4 -> 0, no relay on rail 0
        plan(cluster, job)
    # the same job with the pipeline inside the host is aligned
    ok = plan(cluster, load_job("examples/racks/job.yaml", {"tp": 4, "pp": 2, "dp": 3, "order": "tp-pp-dp"}))
    assert ok.rankmap.world_size == 24
