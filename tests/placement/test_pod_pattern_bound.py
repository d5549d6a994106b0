"""The joint ToR + pod bound of :mod:`rankmap.placement.pod_pattern_bound` against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from test_pod_box_bound import _pod_terms, _tiled, _wide_ring_instances
from test_pod_profile_bound import _brute_two_levels

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pod_box_bound import pod_box_bound, pod_box_costs
from rankmap.placement.pod_pattern_bound import pattern_lp, pod_pattern_bound, pod_pattern_costs
from rankmap.placement.tier_search import tier_bound


def _every_pod_layout(rows: int, cols: int, k: int) -> np.ndarray:
    """``cells[M, rows, cols]``: every labelling of the grid by groups ``0 .. k - 1`` or ``k`` (empty)."""
    codes = np.arange((k + 1) ** (rows * cols))
    seq = (codes[:, None] // (k + 1) ** np.arange(rows * cols)[None, :]) % (k + 1)
    return seq.reshape(-1, rows, cols)


def _phi(cells: np.ndarray, k: int, w_row: float, w_col: float, w0: float, w1: float) -> np.ndarray:
    """``Phi[M]`` (module docstring) of each labelling: the rows and columns the pod and each group touch."""
    inside = cells < k
    phi = w1 * (w_row * inside.any(2).sum(1) + w_col * inside.any(1).sum(1))
    for g in range(k):
        mine = cells == g
        phi = phi + w0 * (w_row * mine.any(2).sum(1) + w_col * mine.any(1).sum(1))
    return phi


@pytest.mark.parametrize("rows, cols, free, w_row, w_col, w1", [
    (3, 3, (3, 3, 2), 5, 1, 1.0), (3, 3, (2, 2, 4), 3, 2, 2.0), (2, 4, (2, 2, 2, 1), 6, 1, 1.0),
    (2, 4, (3, 3, 1, 1), 2, 3, 1.0), (3, 4, (5, 6), 4, 1, 1.0), (3, 4, (4, 4), 1, 1, 3.0),
    (4, 3, (6, 5), 7, 1, 1.0), (3, 3, (4, 4, 1), 9, 2, 1.0), (5, 2, (4, 3), 2, 1, 1.0),
    (6, 2, (5, 4), 1, 2, 1.0), (2, 5, (3, 3, 2), 4, 1, 1.5),
    (2, 5, (3, 5), 5, 2, 2.0), (2, 6, (5, 1), 10, 4, 2.0), (3, 4, (3, 1), 7, 6, 1.0),
    (3, 3, (4, 2, 2), 2, 5, 1.0), (2, 6, (2, 5), 9, 4, 1.0),
])
def test_every_pod_layout_costs_at_least_its_bound(rows, cols, free, w_row, w_col, w1):
    # Every labelling of a small grid by the pod's groups (any number of hosts used, each group
    # within its free hosts): Phi is at least H[hosts], and H is reached at 4 host counts or
    # more. The last five are pods where the patterns lift the full pod above the pod boxes.
    k = len(free)
    problem = GridProblem(rows, cols, free, w_row, w_col, 0, ((0,) * k,), (1.0, w1))
    cells = _every_pod_layout(rows, cols, k)
    counts = np.stack([(cells == g).sum(axis=(1, 2)) for g in range(k)], axis=1)
    cells = cells[(counts <= np.asarray(free)[None, :]).all(axis=1)]
    hosts = (cells < k).sum(axis=(1, 2))
    phi = _phi(cells, k, w_row, w_col, 1.0, w1)
    bound = pod_pattern_costs(list(free), problem)
    box = pod_box_costs(list(free), problem)
    assert (bound >= box - 1e-9).all()
    least = np.full(sum(free) + 1, np.inf)
    np.minimum.at(least, hosts, phi)
    assert (least >= bound - 1e-6).all(), (least, bound)
    assert (np.abs(least - bound) < 1e-6).sum() >= 4, (least, bound)


def test_never_exceeds_brute_force_and_never_below_the_pod_boxes():
    tight = 0
    for problem in _wide_ring_instances(30, seed=21):
        best = _brute_two_levels(problem)
        bound = pod_pattern_bound(problem)
        assert 0 < pod_box_bound(problem) - 1e-9 <= bound <= best + 1e-6, problem
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        tight += abs(bound - best) < 1e-6
    assert tight >= 5, tight


def test_three_stage_pod_pays_for_its_middle_row():
    # Four groups of 48 (w_row 20, w_col 1) on 3 stages. Pattern {X, Y}, {Y, Z}, {Z, W}: X and
    # W fill one row each, so Y and Z share the middle row; the least is c_d = 72 with Y and Z
    # 24 wide: 72 + 48 + 24 + 24 + 48 = 216 columns, 20 x 9 rows: 396. Groups of two rows each
    # ({X, Z}, {X, Y, Z, W}, {Y, W}) fill a column only in pairs: c_d + sum c_g >= 192, 412.
    problem, _ = _tiled(5)
    value, slope = pattern_lp((0b0011, 0b0110, 0b1100), (48,) * 4, 192, 1.0, 1.0)
    assert abs(value + 20 * 9 - 396.0) < 1e-6
    value, _ = pattern_lp((0b0101, 0b1111, 0b1010), (48,) * 4, 192, 1.0, 1.0)
    assert abs(value + 20 * 11 - 412.0) < 1e-6
    assert pod_box_costs([48] * 4, problem)[192] == 383.0
    assert pod_pattern_costs([48] * 4, problem)[192] == 384.0


def test_dual_line_is_below_the_programme_at_every_host_count():
    # The line from the dual solution at A = 180 against the programme solved at each A.
    types, free = (0b011, 0b110, 0b101, 0b010), (20, 25, 30)
    value, slope = pattern_lp(types, free, 60, 1.0, 2.0)
    for A in range(8, 76):
        out = pattern_lp(types, free, A, 1.0, 2.0)
        if out is not None:
            assert value + slope * (A - 60) <= out[0] + 1e-7, A
    assert pattern_lp(types, free, 76, 1.0, 2.0) is None                # more hosts than the groups hold


def test_every_pod_of_perturbed_layouts_costs_at_least_its_pattern_bound():
    # Placements whose pods are 3 and 4 stages tall (the tiling of the pod boxes tests, and
    # fills of 4 x 11 blocks by groups of 9, 11, 13 and 12 hosts), each with random swaps
    # of two cells: every pod's Phi is at least its bound at its host count.
    rng = np.random.default_rng(3)
    four, tiling = _tiled(3)
    free = (9, 11, 13, 12, 9, 11, 13, 12)
    mixed = GridProblem(4, 22, free, 7, 2, 0, ((0, 0, 0, 0, 1, 1, 1, 1),), (1.0, 2.0))
    fill = np.repeat(np.arange(8), free)[:88]
    cells = np.concatenate([fill[:44].reshape(4, 11), fill[44:].reshape(4, 11)], axis=1)
    for problem, start in ((four, tiling), (mixed, cells)):
        cells = start.copy()
        pods = {}
        for _ in range(400):
            (r1, r2), (c1, c2) = rng.integers(0, problem.rows, 2), rng.integers(0, problem.cols, 2)
            cells[r1, c1], cells[r2, c2] = cells[r2, c2], cells[r1, c1]
            for d, hosts, phi in _pod_terms(problem, cells):
                groups = [f for f, e in zip(problem.free, problem.domains[0]) if e == d]
                if d not in pods:
                    pods[d] = pod_pattern_costs(groups, problem)
                assert phi >= pods[d][hosts] - 1e-6, (d, hosts, phi, pods[d][hosts])


@pytest.mark.parametrize("rows, cols, free, w_row, w_col, w1, least, box", [
    (2, 5, (3, 5), 5, 2, 2.0, 65.0, 62.0), (2, 6, (5, 1), 10, 4, 2.0, 110.0, 108.0),
    (3, 4, (3, 1), 7, 6, 1.0, 65.0, 64.0), (3, 3, (4, 2, 2), 2, 5, 1.0, 55.0, 53.75),
    (2, 6, (2, 5), 9, 4, 1.0, 81.0, 80.0),
])
def test_full_pod_reaches_the_brute_force_optimum_where_the_boxes_do_not(rows, cols, free, w_row, w_col, w1, least,
                                                                          box):
    # ``least``: the fewest-cost labelling of the grid holding every free host (every labelling
    # enumerated by the test above); the patterns reach it in 4 of these 5, 1 below in the first.
    k, cap = len(free), sum(free)
    problem = GridProblem(rows, cols, free, w_row, w_col, 0, ((0,) * k,), (1.0, w1))
    cells = _every_pod_layout(rows, cols, k)
    counts = np.stack([(cells == g).sum(axis=(1, 2)) for g in range(k)], axis=1)
    cells = cells[(counts == np.asarray(free)[None, :]).all(axis=1)]
    assert _phi(cells, k, w_row, w_col, 1.0, w1).min() == least
    assert pod_box_costs(list(free), problem)[cap] == box
    assert pod_pattern_costs(list(free), problem)[cap] == (least - 1 if free == (3, 5) else least)
