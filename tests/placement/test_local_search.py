"""Local search on single cells: exact gains, never worse, known optima on small grids."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.local_search import improve, move_gains
from rankmap.placement.tier_search import exhaustive, tier_cost


def _random_problem(rng: np.random.Generator, rows: int, cols: int) -> GridProblem:
    """Up to 6 ToR groups in up to 3 pods, room for the grid and some spare."""
    K = int(rng.integers(2, 7))
    free = rng.integers(1, rows * cols, size=K)
    free[0] += max(0, rows * cols - int(free.sum()))
    pods = tuple(int(x) for x in rng.integers(0, 3, size=K))
    return GridProblem(rows, cols, tuple(int(f) for f in free), int(rng.integers(1, 30)), int(rng.integers(1, 30)),
                       int(rng.integers(0, 5)), domains=(pods,), weights=(1.0, float(rng.integers(1, 4))))


def _random_cells(rng: np.random.Generator, problem: GridProblem) -> np.ndarray:
    """A placement within capacities: every host slot of every group, shuffled, cut to the grid."""
    slots = np.repeat(np.arange(len(problem.free)), problem.free)
    return rng.permutation(slots)[:problem.rows * problem.cols].reshape(problem.rows, problem.cols)


@pytest.mark.parametrize("rows, cols", [(1, 5), (2, 2), (2, 3), (3, 1), (3, 4), (5, 6)])
def test_move_gains_equal_the_change_in_tier_cost(rows, cols):
    # every cell, every neighbour's group: the gain read from neighbours is the exact
    # difference of the whole tier cost (2 columns: both ring edges join the same pair;
    # 2 rows: the pipeline hop and the wrap hop join the same pair)
    rng = np.random.default_rng(rows * 100 + cols)
    for _ in range(5):
        problem = _random_problem(rng, rows, cols)
        cells = _random_cells(rng, problem)
        gain, target = move_gains(problem, cells)
        base = tier_cost(problem, cells)
        for d, r, c in itertools.product(range(4), range(rows), range(cols)):
            moved = cells.copy()
            moved[r, c] = target[d, r, c]
            assert gain[d, r, c] == pytest.approx(base - tier_cost(problem, moved))


def test_alternating_stages_in_one_column_get_stacked():
    # a band of 4 stages over pods 0 | 1 (10 and 6 hosts, no spare) whose boundary column
    # alternates 0,1,0,1 (8 ring crossings, 3 hops per tier): one swap stacks it (0,0,1,1),
    # saving 2 hops per tier; then the first stage's pod-1 cells swap with pod-0 cells
    # below it: stage 0 whole, stages 1-3 cut 2 + 2 (6 ring crossings, 2 hops per tier).
    # A local optimum: the optimum (brute force, 48) makes stages whole, which is what the
    # count exchanges (count_search) do, not single cells
    problem = GridProblem(4, 4, (10, 6), w_row=10, w_col=1, domains=((0, 1),), weights=(1.0, 1.0))
    start = np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 1]])
    out = improve(problem, start)
    assert tier_cost(problem, start) == 2 * (4 * 2 * 10 + 3)
    assert tier_cost(problem, out) == 2 * (3 * 2 * 10 + 2)
    assert _optimum(problem) == 2 * (2 * 10 + 2 + 2)
    assert np.bincount(out.ravel()).tolist() == [10, 6]
    # with two spare hosts in group 1 the boundary gets straight: no hop crosses
    spare = GridProblem(4, 4, (10, 8), w_row=10, w_col=1, domains=((0, 1),), weights=(1.0, 1.0))
    assert tier_cost(spare, improve(spare, start)) == 2 * (4 * 2 * 10)


def test_a_stray_cell_moves_into_a_group_with_room():
    # one host of group 1 inside a row of group 0: group 0 has a spare host, so the cell
    # moves there and the ring no longer leaves the group (cost 0, the optimum)
    problem = GridProblem(1, 4, (5, 4), w_row=3, w_col=1)
    out = improve(problem, np.array([[0, 0, 1, 0]]))
    assert out.tolist() == [[0, 0, 0, 0]]
    # group 0 full (3 hosts): nothing moves, and a swap would gain nothing
    assert improve(GridProblem(1, 4, (3, 4), 3, 1), np.array([[0, 0, 1, 0]])).tolist() == [[0, 0, 1, 0]]


def _optimum(problem: GridProblem) -> float:
    """Brute force over every placement within capacities (tier_search.exhaustive)."""
    return tier_cost(problem, exhaustive(problem, lambda c: tier_cost(problem, c)))


def test_never_worse_within_capacities_and_at_least_the_optimum():
    # random 2-3 x 2-3 grids on 2 tiers: the result keeps every group within its hosts,
    # costs no more than the start, and (brute force) no less than the optimum
    rng = np.random.default_rng(7)
    improved = 0
    for _ in range(40):
        problem = _random_problem(rng, int(rng.integers(2, 4)), int(rng.integers(2, 4)))
        if len(problem.free) ** (problem.rows * problem.cols) > 1 << 17:
            continue
        start = _random_cells(rng, problem)
        out = improve(problem, start)
        assert (np.bincount(out.ravel(), minlength=len(problem.free)) <= np.asarray(problem.free)).all()
        assert _optimum(problem) - 1e-9 <= tier_cost(problem, out) <= tier_cost(problem, start)
        improved += tier_cost(problem, out) < tier_cost(problem, start)
    assert improved >= 10  # the pass does something on random starts


def test_same_input_same_output():
    rng = np.random.default_rng(3)
    problem = _random_problem(rng, 6, 9)
    start = _random_cells(rng, problem)
    assert improve(problem, start).tobytes() == improve(problem, start.copy()).tobytes()
