"""Pods as bands of stages with their ToR groups in strips (:mod:`rankmap.placement.pod_strips_layout`)."""

from __future__ import annotations

import numpy as np
import pytest
from test_pod_profile_bound import _brute_two_levels

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pod_strips_layout import pod_strips_cells, pod_strips_starts
from rankmap.placement.tier_search import tier_cost, tier_costs

# The benchmark's deep pipeline on a fresh three-tier fabric, without failures: 32 stages of
# 46 hosts, 24 ToR groups of 64 in pods of 4; a ring crossing weighs 5 pipeline hops.
DEEP = GridProblem(32, 46, (64,) * 24, 5, 1, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))


def test_each_pod_is_one_band_of_stages_within_its_groups():
    for cells in pod_strips_starts(DEEP):
        assert (np.bincount(cells.ravel(), minlength=24) <= 64).all()
        pod = np.asarray(DEEP.domains[0])[cells].ravel()
        assert (np.diff(pod) != 0).sum() == len(set(pod.tolist())) - 1   # each pod one row-major range


def test_deep_pipeline_costs_less_than_before_the_strips():
    # Pod boundaries on whole stages where the pods allow (2 pods of 5 stages, 4 of 5.5):
    # ToR tier 854, pod tier 250 (the pod tier's perimeter bound). The search without these
    # starts reached 1155 on this instance; the tier bound is 1042.
    aligned = pod_strips_cells(DEEP, aligned=True)
    assert tier_costs(DEEP, aligned) == (854, 250)
    assert min(tier_cost(DEEP, c) for c in pod_strips_starts(DEEP)) == 1104.0


@pytest.mark.parametrize("rows, cols, free, w_row, w_col, best", [
    (3, 3, (5, 3, 5, 3), 10, 6, 54.0),
    (3, 3, (3, 3, 3, 3), 11, 2, 18.0),
    (4, 2, (3, 2, 2, 3), 9, 2, 16.0),
])
def test_small_deep_instances_reach_the_optimum(rows, cols, free, w_row, w_col, best):
    p = GridProblem(rows, cols, free, w_row, w_col, 0, ((0, 0, 1, 1),), (1.0, 1.0))
    assert _brute_two_levels(p) == best
    assert min(tier_cost(p, c) for c in pod_strips_starts(p)) == best


def test_not_laid_without_pods_or_when_a_stage_needs_several_groups():
    assert pod_strips_starts(GridProblem(4, 3, (6, 6), 5, 1)) == []
    assert pod_strips_starts(GridProblem(2, 5, (4, 4, 4), 5, 1, 0, ((0, 0, 1),), (1.0, 1.0))) == []
