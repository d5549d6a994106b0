"""The seams of the placement search: problem building, typed pins, the one measure function,
the status enum, and the CP-SAT model's build / hint / solve / decode steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import cluster_with_free, job

from rankmap.errors import InfeasibleError, PlacementError
from rankmap.job.layout import ParallelLayout
from rankmap.job.traffic import job_traffic
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.grid_problem import GridPins, GridProblem, expand_spans, grid_cost, span_problem
from rankmap.placement.host_grid import cells_of_hosts, hosts_of_cells
from rankmap.placement.metrics import evaluate, measure_order
from rankmap.placement.problem import build_problem, host_pool
from rankmap.placement.status import SolverStatus
from rankmap.topology.spec import parse_cluster

# Two stages of four hosts; each stage takes two hosts of t0 and two of t1.
SPLIT = ["g0h0", "g0h1", "g1h0", "g1h1", "g0h2", "g0h3", "g1h2", "g1h3"]


def test_status_values_are_the_strings_rankmap_json_has_always_held():
    assert [s.value for s in SolverStatus] == ["OPTIMAL", "FEASIBLE", "HINT", "HEURISTIC", "PACKED"]
    assert SolverStatus("HINT") is SolverStatus.HINT and SolverStatus.PACKED == "PACKED"
    assert json.dumps({"solver_status": SolverStatus.HEURISTIC}) == '{"solver_status": "HEURISTIC"}'
    assert f"status {SolverStatus.OPTIMAL}" == "status OPTIMAL"


def test_measure_order_is_the_old_per_rank_evaluation():
    cluster, spec = cluster_with_free((4, 4), gpus=8), job(pp=2, dp=4)
    layout, traffic = ParallelLayout.of(spec), job_traffic(spec)
    m = measure_order(cluster, layout, traffic, SPLIT, 8)
    # each stage's DP rings cross twice on each of 8 rails; pipelines stay inside groups
    assert m.cross_edges["dp"] == 32 and m.cross_edges["pp"] == 0 and m.max_spread["dp"] == 2
    assert m.cross_tor_bytes == 1875456.0 and m.uplink_bytes.tolist() == [1875456.0, 1875456.0]
    rank_tor = np.repeat([int(h[1]) for h in SPLIT], 8)  # g<group>h<i>: ToR group index per rank
    old = evaluate(layout, traffic, rank_tor, 2)
    assert (old.cross_tor_bytes, old.cross_edges, old.max_spread) == (m.cross_tor_bytes, m.cross_edges, m.max_spread)
    per_host = measure_order(cluster, layout, traffic, SPLIT, [8] * 8)
    assert per_host.cross_tor_bytes == m.cross_tor_bytes


def test_grid_cost_in_units_matches_the_measured_bytes():
    cluster, spec = cluster_with_free((4, 4), gpus=8), job(pp=2, dp=4)
    problem = build_problem(cluster, spec, PlacementConstraints())
    cells = cells_of_hosts(problem.grid, SPLIT, cluster, problem.tor_index)
    assert cells.tolist() == [[0, 0, 1, 1], [0, 0, 1, 1]]
    measured = problem.measure(cluster, "split", SPLIT).metrics.cross_tor_bytes
    units = grid_cost(problem.grid_problem, cells)
    assert units == 4 * problem.grid_problem.w_row
    assert 0 <= measured - units * problem.unit_bytes < 4 * problem.unit_bytes  # weights are floored
    assert hosts_of_cells(cells, problem.grid, list(problem.usable), problem.tor_index) == SPLIT


def test_problem_holds_typed_pins_and_capacities():
    cluster = cluster_with_free((4, 4, 4), gpus=8)
    c = PlacementConstraints(stage_pins={1: "t2"}, rank_pins={0: "g1h2", 15: "g1h0"}, quotas={"t0": 3})
    problem = build_problem(cluster, job(pp=2, dp=4), c)
    assert problem.caps == (3, 4, 4) and (problem.grid.rows, problem.grid.cols) == (2, 4)
    assert problem.node_pins == {0: "g1h2", 1: "g1h0"}
    assert problem.pins == GridPins(rows={1: 2}, cells={(0, 0): 1, (0, 1): 1})
    assert problem.cp_ep_span == 1 and problem.job.dp == 4


def test_rank_pin_against_its_stage_pin_is_refused():
    cluster = cluster_with_free((4, 4, 4), gpus=8)
    c = PlacementConstraints(stage_pins={0: "t2"}, rank_pins={0: "g1h2"})
    with pytest.raises(InfeasibleError, match="its stage is pinned to 't2'"):
        build_problem(cluster, job(pp=2, dp=4), c)


def test_grid_pins_hold_and_are_falsy_when_empty():
    pins = GridPins(rows={1: 2}, cells={(0, 0): 1})
    assert pins and not GridPins()
    assert pins.holds(np.array([[1, 0], [2, 2]]))
    assert not pins.holds(np.array([[0, 1], [2, 2]])) and not pins.holds(np.array([[1, 0], [2, 0]]))


def test_cp_ep_span_is_the_hosts_one_cp_group_spans():
    from rankmap.job.spec import ModelShape
    model = ModelShape(layers=8, hidden=1024, heads=8, seq_len=4096, vocab=100)
    cluster = cluster_with_free((5, 5, 6, 7), gpus=8)
    problem = build_problem(cluster, job(cp=2, pp=2, dp=4, model=model, num_micro_batches=4), PlacementConstraints())
    assert problem.cp_ep_span == 2 and problem.grid.cols == 8
    coarse = span_problem(problem.grid_problem, 2)
    assert (coarse.cols, coarse.free) == (4, (2, 2, 3, 3))
    assert coarse.w_col == 2 * problem.grid_problem.w_col
    assert expand_spans(np.array([[0, 1]]), 2).tolist() == [[0, 0, 1, 1]]
    assert span_problem(GridProblem(1, 5, (5,), 1, 0), 2) is None  # columns do not divide


def test_expert_ep_groups_over_consecutive_hosts_are_a_span():
    # tp=8 on 8-GPU hosts, ep=2 folded into DP: EP groups are DP replicas (2k, 2k+1), columns
    # 2k and 2k+1 of each stage, so the span search keeps each pair under one ToR group.
    from rankmap.job.layout import ParallelLayout
    from rankmap.placement.host_grid import build_grid, expert_span
    cluster = cluster_with_free((5, 5, 6, 7), gpus=8)
    problem = build_problem(cluster, job(ep=2, pp=2, dp=4), PlacementConstraints())
    assert problem.cp_ep_span == 2 and problem.grid.cols == 4
    # ep groups inside a host (tp=4 on 8 GPUs: the two ranks of a group share the host): no span
    layout = ParallelLayout.of(job(tp=4, ep=2, pp=1, dp=4).resolved(16))
    assert expert_span(layout, build_grid(layout, 8, 2), 8) == 1


MIXED = """hosts: {gpus: 8, nics: 8}
tor_groups:
  - {name: t0, hosts: 'a[0-3]'}
  - {name: t1, hosts: [{hosts: 'b[0-1]', gpus: 4, nics: 4}]}
"""


def test_host_pool_is_the_majority_shape_and_names_the_rest():
    cluster = parse_cluster(MIXED, "mixed.yaml")
    pool = host_pool(cluster, PlacementConstraints(exclude=("a0", "b1")))
    assert pool.gpus_per_host == 8 and pool.nics == 8
    assert [h.name for h in pool.usable] == ["a1", "a2", "a3"]
    assert [h.name for h in pool.free] == ["a1", "a2", "a3", "b0"]
    assert [h.name for h in pool.odd] == ["b0", "b1"]  # the note names odd hosts, excluded or not
    assert pool.odd_note()[0].startswith("2 free hosts are not 8-GPU, 8-NIC hosts like the others")
    assert [h.name for h in pool.within({"t1"}).free] == ["b0"] and not pool.within({"t1"}).usable
    with pytest.raises(PlacementError, match="tp must divide 8"):
        pool.require(cluster, job(tp=3))


def test_cpsat_steps_build_hint_solve_decode():
    from rankmap.placement.cpsat_model import add_hint, build_model, decode_cells, solve_grid, solve_model
    problem = GridProblem(2, 4, (4, 4, 2), 10, 3)
    im = build_model(problem)
    hint = np.array([[0, 0, 2, 2], [1, 1, 1, 1]])
    add_hint(im, hint)
    solver, status = solve_model(im, 5.0, 0, 1, canonical=True)
    cells = decode_cells(im, solver)
    assert solver.StatusName(status) == "OPTIMAL"
    assert grid_cost(problem, cells) == 12 and grid_cost(problem, hint) == 32  # one group per row, 4 hops cross
    sol = solve_grid(problem, hint, time_limit_s=5)
    assert sol.status is SolverStatus.OPTIMAL and sol.cost == 12
    pinned = solve_grid(problem, None, time_limit_s=5, pins=GridPins(cells={(0, 0): 2}))
    assert pinned.cells[0, 0] == 2 and pinned.status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE)
