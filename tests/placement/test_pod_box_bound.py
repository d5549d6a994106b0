"""The joint ToR + pod bound of :mod:`rankmap.placement.pod_box_bound` against brute force and a tiling."""

from __future__ import annotations

import numpy as np
import pytest
from test_pod_profile_bound import _brute_two_levels
from test_pod_profile_bound import _wide_ring_instances as _profile_instances

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.perimeter_bound import block_cost, nested_blocks, nested_perimeter_bound
from rankmap.placement.pod_box_bound import MULTIPLIERS, box_costs, pod_box_bound, pod_box_costs
from rankmap.placement.tier_search import tier_bound, tier_bound_method, tier_cost


def _wide_ring_instances(n: int, seed: int):
    """The pod-rows tests' random instances, on more grid shapes (two-row and two-column ones too)."""
    return _profile_instances(n, seed, shapes=((2, 4), (2, 5), (3, 4), (3, 3), (4, 3), (2, 6), (4, 2), (5, 2)))


def test_never_exceeds_brute_force_and_never_below_the_nested_blocks():
    # With the zero multipliers a pod's groups keep to its rows, so the bound is at least the
    # nested blocks bound wherever it applies; 5 of these 30 are the optimum.
    tight = 0
    for problem in _wide_ring_instances(30, seed=21):
        best = _brute_two_levels(problem)
        bound = pod_box_bound(problem)
        assert 0 < nested_perimeter_bound(problem) - 1e-9 <= bound <= best + 1e-6, problem
        assert tier_bound(problem, 0) <= best + 1e-6, problem
        tight += abs(bound - best) < 1e-9
    assert tight >= 4, tight


def _tiled(pods: int) -> tuple[GridProblem, np.ndarray]:
    """Four stages of 48 x ``pods`` hosts, pods of four groups of 48 (w_row 20, w_col 1), and
    the placement with each pod a 4 x 48 box tiled by its groups' 2 x 24 blocks."""
    C = 48 * pods
    problem = GridProblem(4, C, (48,) * (4 * pods), 20, 1, 0, (tuple(g // 4 for g in range(4 * pods)),),
                          (1.0, 1.0))
    cells = np.zeros((4, C), dtype=np.int64)
    for d in range(pods):
        for i, (r0, c0) in enumerate([(0, 0), (0, 24), (2, 0), (2, 24)]):
            cells[r0:r0 + 2, 48 * d + c0:48 * d + c0 + 24] = 4 * d + i
    return problem, cells


def test_pods_of_three_stages_cannot_be_tiled_by_groups_of_two():
    # Per pod: nested blocks 124 (3 x 64 box) + 4 x 64 (2 x 24 blocks) = 380; the 4 x 48 tiling
    # costs 128 + 256 = 384; the box bound sees 383. Five pods, less the 240 columns' first
    # domains at both tiers (480): 1420 < 1435 <= optimum <= 1440.
    problem, cells = _tiled(5)
    assert tier_cost(problem, cells) == 1440.0
    assert nested_perimeter_bound(problem) == 1420.0
    assert pod_box_bound(problem) == 1435.0
    # the pod patterns bound (tier_bound's choice) sees the tiling's 384 per pod
    assert tier_bound_method(problem, 0) == (1440.0, "ToR and pod tiers jointly (pod patterns)")
    g0 = block_cost(4, 240, 48, 20, 1).astype(float)
    g1 = block_cost(4, 240, 192, 20, 1).astype(float)
    assert nested_blocks([48] * 4, 192, g0)[192] + g1[192] == 380.0
    assert pod_box_costs([48] * 4, problem)[192] == 383.0


def test_three_stage_pod_alone_pays_for_its_columns():
    # The 3-stage box of the pod above (64 columns, all full): groups of at most 2 stages put
    # two groups in every column, so the groups' columns sum to 128 at least, or a group is 3
    # stages tall (or 1 x 48). The zero multipliers see the nested value (124 + 256); the
    # column and row inequalities lift it to 383. The 4-stage box is the tiling's 384.
    problem, _ = _tiled(5)
    assert box_costs([48] * 4, problem, 3, MULTIPLIERS[:1])[192] == 380.0
    assert box_costs([48] * 4, problem, 3)[192] == 383.0
    assert box_costs([48] * 4, problem, 4)[192] == 384.0


def _pod_terms(problem: GridProblem, cells: np.ndarray) -> list[tuple[int, int, float]]:
    """``(pod, hosts, Phi)`` of every pod of ``cells`` (module docstring of the bound): the
    rows and columns each pod and each of its groups touch, weighted."""
    w0, w1 = problem.weights[:2]
    dom = np.asarray(problem.domains[0])
    out = []
    for d in range(int(dom.max()) + 1):
        groups = np.nonzero(dom == d)[0]
        inside = np.isin(cells, groups)
        phi = w1 * (problem.w_row * inside.any(1).sum() + problem.w_col * inside.any(0).sum())
        phi += w0 * sum(problem.w_row * (cells == g).any(1).sum() + problem.w_col * (cells == g).any(0).sum()
                        for g in groups)
        out.append((d, int(inside.sum()), float(phi)))
    return out


def test_every_pod_of_perturbed_tilings_costs_at_least_its_box_bound():
    # The per-pod inequality itself, on placements whose pods are 3 and 4 stages tall: the
    # tiling above, and 3-stage pods (3 x 64) whose groups cannot all be 2 x 24 blocks, each
    # with 300 random swaps of two cells.
    rng = np.random.default_rng(0)
    four, tiling = _tiled(5)
    three = GridProblem(3, 256, (48,) * 16, 20, 1, 0, (tuple(g // 4 for g in range(16)),), (1.0, 1.0))
    bands = np.zeros((3, 256), dtype=np.int64)
    for d in range(4):
        x, g = 64 * d, 4 * d
        bands[0:2, x:x + 24], bands[0:2, x + 24:x + 48] = g, g + 1
        bands[0:2, x + 48:x + 64], bands[2, x:x + 16], bands[2, x + 16:x + 64] = g + 2, g + 2, g + 3
    bound = pod_box_costs([48] * 4, four)
    assert bound[192] == 383.0
    for problem, start, least in ((four, tiling, 384.0), (three, bands, 412.0)):
        cells, bound = start.copy(), pod_box_costs([48] * 4, problem)
        assert min(phi for _, _, phi in _pod_terms(problem, cells)) == least   # 3 x 64: 124 + 64 + 64 + 92 + 68
        for _ in range(300):
            (r1, r2), (c1, c2) = rng.integers(0, problem.rows, 2), rng.integers(0, problem.cols, 2)
            cells[r1, c1], cells[r2, c2] = cells[r2, c2], cells[r1, c1]
            for _, hosts, phi in _pod_terms(problem, cells):
                assert phi >= bound[hosts] - 1e-9, (hosts, phi, bound[hosts])


@pytest.mark.parametrize("problem", [
    GridProblem(2, 4, (3, 1, 2, 2), 10, 1, 0, ((0, 0, 1, 1),), (1.0, 1.0)),   # a pod holds a whole ring
    GridProblem(2, 5, (4, 4), 10, 1, 0, (), (1.0,)),                           # no pods
    GridProblem(4, 5, (4, 3, 2), 10, 1, 0, ((0, 1, 2),), (1.0, 1.0)),          # too few hosts
])
def test_not_applicable_returns_zero(problem):
    assert pod_box_bound(problem) == 0.0
