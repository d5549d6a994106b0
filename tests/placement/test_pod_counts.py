"""Pods as bands of stages, each band's counts by CP-SAT (:mod:`rankmap.placement.pod_counts_layout`)."""

from __future__ import annotations

import numpy as np
import pytest
from test_pod_profile_bound import _brute_two_levels

from rankmap.placement.count_search import counts_of
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pod_counts_layout import aligned_rows, band_counts, pod_counts_cells, pod_counts_starts
from rankmap.placement.pod_strips_layout import pod_bands, pod_strips_starts
from rankmap.placement.tier_search import tier_cost, tier_costs

# The benchmark's deep pipeline at 12,288 GPUs on 50% busy hosts (benchmarks/instances.py,
# tiered_instance("deep", 12288, 0.5, seed=5)): 32 stages of 23 hosts on 24 ToR groups of
# 23-41 free hosts in 6 pods of 4; a ring crossing weighs 4.86 pipeline hops.
# The same at 25% busy (seed 14): 32 stages of 35 hosts on groups of 41-55.
DEEP_QUARTER = GridProblem(32, 35, (41, 46, 50, 48, 45, 51, 50, 44, 46, 49, 48, 50, 55, 47, 44, 50, 46, 51, 47, 44, 49,
                                    46, 48, 50), 4936461, 1000000, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))
DEEP_BUSY = GridProblem(32, 23, (28, 35, 34, 32, 27, 30, 31, 33, 23, 34, 30, 35, 31, 30, 29, 34, 34, 28, 23, 41,
                                 36, 37, 34, 30), 4860710, 1000000, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))


@pytest.mark.parametrize("rows, cols, free, pods, w_row, w_col, best", [
    (3, 3, (3, 5, 5, 4), (0, 0, 0, 0), 2, 5, 17.0),      # staggered: a group 2, 2, 1 wide beside one 1, 1, 2 wide
    (3, 3, (5, 4, 6, 5), (0, 0, 0, 0), 11, 3, 9.0),
    (3, 4, (6, 8, 5), (0, 0, 0), 12, 1, 4.0),
    (3, 3, (4, 5, 3, 5), (0, 0, 1, 1), 4, 3, 17.0),       # two pods, the first cut inside a stage
])
def test_small_instances_reach_the_brute_force_optimum(rows, cols, free, pods, w_row, w_col, best):
    p = GridProblem(rows, cols, free, w_row, w_col, 0, (pods,), (1.0, 1.0))
    assert _brute_two_levels(p) == best
    starts = pod_counts_starts(p)
    assert min(tier_cost(p, cells) for cells in starts) == best
    assert all((np.bincount(cells.ravel(), minlength=len(free)) <= free).all() for cells in starts)


def test_staggered_bands_cost_less_than_strips_on_busy_hosts():
    # Before this layout the planner's best here was 739.9 (10^6 units; ToR tier 605.5, pod
    # tier 134.4); the strips gave the same. The bands, each solved to its optimum: 714.4.
    cells = pod_counts_cells(DEEP_BUSY)
    assert tier_costs(DEEP_BUSY, cells) == (579946150, 134442840)
    assert tier_cost(DEEP_BUSY, cells) < min(tier_cost(DEEP_BUSY, c) for c in pod_strips_starts(DEEP_BUSY))
    assert (np.bincount(cells.ravel(), minlength=24) <= np.array(DEEP_BUSY.free)).all()
    pods = np.asarray(DEEP_BUSY.domains[0])[cells]
    for d in range(6):                                          # each pod a band of consecutive stages
        rows = np.flatnonzero((pods == d).any(axis=1))
        assert rows[-1] - rows[0] + 1 == rows.size


def test_three_groups_per_stage_where_groups_hold_one_and_a_half_stages():
    # Before the bands of three the planner's best here was 953.7 (10^6 units; ToR tier 749.1);
    # bands of two per stage: 957.4; of three: 947.3 (ToR tier 742.7, the pod tier the same).
    two, three = pod_counts_cells(DEEP_QUARTER, pieces=2), pod_counts_cells(DEEP_QUARTER, pieces=3)
    assert tier_costs(DEEP_QUARTER, two) == (752806426, 204618766)
    assert tier_costs(DEEP_QUARTER, three) == (742679348, 204618766)
    assert np.count_nonzero(counts_of(DEEP_QUARTER, three), axis=1).max() == 3
    assert len(pod_counts_starts(DEEP_QUARTER)) == 2


def test_bands_are_laid_as_counted():
    # Every pair of consecutive rows keeps sum_g min(x[r][g], x[r+1][g]) hops inside groups: the
    # most two rows of those counts can keep (the count model's assumption).
    cells = pod_counts_cells(DEEP_BUSY)
    counts = counts_of(DEEP_BUSY, cells)
    kept = (cells[1:] == cells[:-1]).sum(axis=1)
    assert (kept == np.minimum(counts[1:], counts[:-1]).sum(axis=1)).all()
    assert (np.count_nonzero(counts, axis=1) <= 3).all()        # two per pod, three where pods meet


def test_band_counts_fill_the_band_within_free_hosts():
    for _, groups, start, size in pod_bands(DEEP_BUSY, True):
        rows, counts = band_counts(DEEP_BUSY, groups, start, size)
        assert counts.sum() == size
        assert (counts.sum(axis=0) <= np.array(DEEP_BUSY.free)[groups]).all()
        assert (np.count_nonzero(counts, axis=1) <= 2).all()
        for j in range(len(groups)):                              # each group's rows consecutive
            used = np.flatnonzero(counts[:, j])
            assert used.size == 0 or used[-1] - used[0] + 1 == used.size


def test_aligned_rows_keep_the_counts():
    counts = np.array([[3, 0, 2, 0], [0, 2, 3, 0], [0, 2, 0, 3]])
    cells = aligned_rows(counts)
    assert (counts_of(GridProblem(3, 5, (5, 5, 5, 5), 1, 1), cells) == counts).all()
    assert cells.tolist() == [[0, 0, 0, 2, 2], [1, 1, 2, 2, 2], [1, 1, 3, 3, 3]]


def test_a_stage_shared_by_two_pods_keeps_each_pods_pieces_together():
    # Two levels above the ToR groups; stage 2 is shared by the bands of two pods: every stage
    # crosses each level at most twice (each domain one arc of the ring).
    p = GridProblem(5, 6, (2, 7, 8, 4, 10), 3, 12, 3, ((0, 1, 1, 2, 2), (0, 0, 0, 1, 1)), (1.0, 2.0, 5.0))
    cells = pod_counts_cells(p)
    for dom in p.domains:
        labels = np.asarray(dom)[cells]
        assert ((labels != np.roll(labels, 1, axis=1)).sum(axis=1) <= 2).all()
    assert tier_cost(p, cells) < 1056.0        # laid for the columns kept alone, one pod in two arcs: 1056


def test_not_laid_without_pods_or_when_a_stage_needs_several_groups():
    assert pod_counts_starts(GridProblem(4, 3, (6, 6), 5, 1)) == []
    assert pod_counts_starts(GridProblem(2, 5, (4, 4, 4), 5, 1, 0, ((0, 0, 1),), (1.0, 1.0))) == []
