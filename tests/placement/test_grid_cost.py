"""The grid cost and the count decoding that the searches call hundreds of thousands of times:
exact values against a plain loop over the cells, and the decoding's cached group order."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.placement.grid_problem import GridProblem, grid_cost
from rankmap.placement.tier_model import decode_counts, group_order


def loop_cost(p: GridProblem, cells: np.ndarray) -> int:
    """The cost formula of the module docstring, one cell pair at a time."""
    R, C = cells.shape
    ring = sum(cells[r, c] != cells[r, (c + 1) % C] for r in range(R) for c in range(C)) if C > 1 else 0
    hops = sum(cells[r, c] != cells[r + 1, c] for r in range(R - 1) for c in range(C))
    wrap = sum(cells[R - 1, c] != cells[0, c] for c in range(C)) if R > 1 else 0
    return p.w_row * ring + p.w_col * hops + p.w_wrap * wrap


@pytest.mark.parametrize("seed", range(20))
def test_grid_cost_is_the_formula(seed):
    rng = np.random.default_rng(seed)
    R, C, K = (int(x) for x in rng.integers(1, 7, size=3))
    p = GridProblem(R, C, (R * C,) * K, int(rng.integers(1, 20)), int(rng.integers(1, 5)), int(rng.integers(0, 3)))
    cells = rng.integers(0, K, size=(R, C))
    cost = grid_cost(p, cells)
    assert type(cost) is int
    assert cost == loop_cost(p, cells)


def test_grid_cost_hand_computed():
    # one row of four over groups 0 0 1 1: the ring crosses twice (1 -> 0 closes it)
    assert grid_cost(GridProblem(1, 4, (4, 4), 10, 1), np.array([[0, 0, 1, 1]])) == 20
    # two rows of one column: no ring, one hop (3) and the wrap hop back (2)
    assert grid_cost(GridProblem(2, 1, (1, 1), 10, 3, 2), np.array([[0], [1]])) == 5


def test_decode_counts_orders_each_problem_by_its_own_domains():
    """Two problems decoded in turn (the group order is kept for the latest problem only):
    each decoding lays its rows in its own domains' order."""
    a = GridProblem(1, 4, (2, 2, 2), 1, 0, domains=((1, 0, 1),), weights=(1.0, 1.0))   # pods {1}, {0, 2}
    b = GridProblem(1, 4, (2, 2, 2), 1, 0, domains=((0, 0, 1),), weights=(1.0, 1.0))   # pods {0, 1}, {2}
    counts = np.array([[1, 2, 1]])
    assert group_order(a).tolist() == [1, 0, 2] and group_order(b).tolist() == [0, 1, 2]
    for _ in range(2):
        assert decode_counts(a, counts)[0].tolist() == [[1, 1, 0, 2]]
        assert decode_counts(b, counts)[0].tolist() == [[0, 1, 1, 2]]
    two = decode_counts(a, np.array([[1, 2, 1], [1, 0, 3]]))
    assert two[0].tolist() == [[1, 1, 0, 2], [0, 2, 2, 2]]
    assert two[1].tolist() == [[1, 1, 0, 2], [2, 2, 2, 0]]    # the snake: every other row reversed
