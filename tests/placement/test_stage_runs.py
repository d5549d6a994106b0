"""Stage runs: consecutive pipeline stages filling one ToR group after another."""

from __future__ import annotations

import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem, grid_cost
from rankmap.placement.grid_search import constructive_starts, search
from rankmap.placement.stage_runs_layout import stage_runs_cells, stage_runs_starts


def test_whole_stages_cost_one_boundary_per_group_change():
    # 6 stages of 2 hosts on three groups of 4: two stages per group, 2 boundaries of 2 hops.
    problem = GridProblem(6, 2, (4, 4, 4), w_row=10, w_col=3)
    cells = stage_runs_cells(6, 2, problem.free)
    assert cells.tolist() == [[0, 0], [0, 0], [1, 1], [1, 1], [2, 2], [2, 2]]
    assert grid_cost(problem, cells) == 2 * 2 * 3  # no ring crosses; 4 hops cross


def test_groups_holding_more_stages_come_first_and_spare_hosts_stay_unused():
    # groups of 5, 7 and 3 hosts, stages of 2: whole-stage room 2, 3, 1 -> 7, then 5, then 3
    cells = stage_runs_cells(5, 2, (5, 7, 3))
    assert cells[:, 0].tolist() == [1, 1, 1, 0, 0]
    assert stage_runs_cells(7, 2, (5, 7, 3)) is None  # only 6 whole stages fit
    filled = stage_runs_cells(7, 2, (5, 7, 3), whole=False)
    assert np.bincount(filled.ravel()).tolist() == [5, 7, 2]
    assert len(stage_runs_starts(7, 2, (5, 7, 3))) == 1


def test_cut_stage_lines_up_with_its_neighbours():
    # 3 hosts per stage on groups of 4 and 5: stage 1 is cut (1 host in group 0, 2 in group 1)
    cells = stage_runs_cells(3, 3, (4, 5), whole=False)
    problem = GridProblem(3, 3, (4, 5), w_row=1, w_col=5)
    # group 1 (5 hosts, one whole stage) first, then group 0; stage 1 is cut 2 + 1 and laid so
    # that its group-1 part sits under stage 0: its ring crosses twice, 1 hop to stage 0 and
    # 2 hops to stage 2 cross
    assert cells.tolist() == [[1, 1, 1], [1, 1, 0], [0, 0, 0]]
    assert grid_cost(problem, cells) == 2 * 1 + (1 + 2) * 5


def _brute_force(problem: GridProblem) -> int:
    K, R, C = len(problem.free), problem.rows, problem.cols
    best = None
    for flat in itertools.product(range(K), repeat=R * C):
        counts = np.bincount(flat, minlength=K)
        if (counts > np.asarray(problem.free)).any():
            continue
        cost = grid_cost(problem, np.asarray(flat).reshape(R, C))
        best = cost if best is None or cost < best else best
    return best


def test_deep_pipeline_search_reaches_the_brute_force_optimum():
    # 4 stages of 2 hosts on three groups of 4, pipeline-heavy: two stages per group, one
    # boundary of 2 hops is the optimum (brute force over all 3^8 cell assignments)
    problem = GridProblem(4, 2, (4, 4, 4), w_row=10, w_col=30)
    assert _brute_force(problem) == 2 * 30
    greedy = np.array([[0, 1], [0, 1], [2, 1], [2, 0]])
    assert min(grid_cost(problem, c) for c in constructive_starts(problem, greedy, {})) == 2 * 30
    sol, bound, _ = search(problem, greedy, time_limit_s=5)
    assert sol.cost == 2 * 30 and bound <= sol.cost
