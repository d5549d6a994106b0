"""DP rings as sets of whole ToR groups (:mod:`rankmap.placement.ring_sets_layout`)."""

from __future__ import annotations

import numpy as np
import pytest
from test_pod_profile_bound import _brute_two_levels

from rankmap.placement.count_search import counts_of
from rankmap.placement.cpsat_model import wall_clock_limit
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.ring_sets_layout import ring_sets, ring_sets_counts, ring_sets_starts, span_ring_cells
from rankmap.placement.tier_search import tier_cost, tier_costs

# The benchmark's CP job at 12,288 GPUs on 50% busy hosts (benchmarks/instances.py,
# tiered_instance("cp", 12288, 0.5, seed=3)), as its grid: 8 DP rings of 92 hosts on 24 ToR
# groups of 24-40 free hosts in 6 pods of 4; a ring crossing weighs 161 pipeline hops.
CP_BUSY = GridProblem(8, 92, (35, 29, 25, 40, 36, 28, 36, 32, 24, 31, 35, 32, 33, 31, 29, 29, 33, 33, 37, 36, 29, 35,
                              29, 27), 160845334, 1000000, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))


@pytest.mark.parametrize("rows, cols, free, pods, w_row, best", [
    (2, 4, (1, 3, 1, 1, 3), (0, 0, 1, 2, 2), 23, 100.0),
    (2, 4, (2, 2, 3, 3, 3), (0, 1, 1, 2, 2), 24, 104.0),
    (2, 4, (2, 3, 2, 1), (0, 1, 1, 2), 38, 310.0),
])
def test_small_instances_reach_the_brute_force_optimum(rows, cols, free, pods, w_row, best):
    p = GridProblem(rows, cols, free, w_row, 1, 0, (pods,), (1.0, 1.0))
    assert _brute_two_levels(p) == best
    assert min(tier_cost(p, c) for c in ring_sets_starts(p)) == best


def test_rings_of_whole_groups_cross_the_fewest_groups_and_pods():
    # Two groups hold at most 40 + 37 < 92 hosts, so every ring crosses at least 3 groups: 24
    # crossings at least. A pod's 4 groups hold one ring at most, so two rings span several
    # pods; with one ring inside each pod, the two others take the 6 leftover groups, three
    # pods each: 6 pod crossings, and fewer rings inside pods leave more rings over two pods.
    sets = ring_sets(CP_BUSY)
    pods = np.asarray(CP_BUSY.domains[0])
    assert sorted(g for s in sets for g in s) == list(range(24))      # each group in one ring: 24 pieces
    assert all(np.asarray(CP_BUSY.free)[list(s)].sum() >= 92 for s in sets)
    assert sum(len(set(pods[list(s)])) for s in sets if len(set(pods[list(s)])) > 1) == 6


def test_laid_rings_cost_less_than_the_plan_before():
    # The planner's grid before this layout: 4,808 + 1,473 (10^6 units, ToR + pod tier) = 6,281.
    cells = ring_sets_starts(CP_BUSY)[0]
    assert tier_costs(CP_BUSY, cells) == (4504288016, 1538072004)
    counts = counts_of(CP_BUSY, cells)
    assert (counts.sum(axis=1) == 92).all() and (counts.sum(axis=0) <= np.asarray(CP_BUSY.free)).all()
    assert ((counts > 0).sum(axis=0) <= 1).all()                   # each group in one ring at most


def test_span_rings_end_the_fewest_pieces_inside_a_span():
    # CP x EP groups of 2 hosts: a piece of odd length ends inside a span unless an odd piece
    # beside it ends there too. Rings 0 and 2 hold exactly 92 hosts in two odd pieces and one
    # even (35 + 24 + 33, 36 + 29 + 27); rings 5 and 7 have one spare host, which evens one of
    # their three odd pieces (33 + 31 + 29, 29 + 35 + 29): one end inside a span each, 4 in all.
    cells = span_ring_cells(CP_BUSY, 2)
    assert tier_costs(CP_BUSY, cells) == (4504288016, 1538072004)     # the ring sets' crossings
    counts = counts_of(CP_BUSY, cells)
    assert (counts.sum(axis=0) <= np.asarray(CP_BUSY.free)).all()
    ends = [np.flatnonzero(row[1:] != row[:-1]) + 1 for row in cells]
    odd_pieces = (counts % 2 == 1).sum(axis=1)
    assert [int((e % 2).sum()) for e in ends] == (odd_pieces // 2).tolist()
    assert sum(int((e % 2).sum()) for e in ends) == 4
    assert span_ring_cells(CP_BUSY, 1) is None and span_ring_cells(CP_BUSY, 3) is None   # 92 is no whole of 3


def test_counts_cut_the_largest_piece_and_order_rings_by_pod():
    p = GridProblem(3, 5, (4, 3, 2, 4, 3, 3), 10, 1, 0, ((1, 1, 0, 0, 2, 2),), (1.0, 1.0))
    counts = ring_sets_counts(p, [[0, 1], [2, 3], [4, 5]])
    # ring {0, 1}: 4 + 3 hosts, 2 too many: 4 -> 3, then the tie to the lower group: 3 -> 2;
    # rings in pod order 0, 1, 2
    assert counts.tolist() == [[0, 0, 2, 3, 0, 0], [2, 3, 0, 0, 0, 0], [0, 0, 0, 0, 2, 3]]


def test_not_laid_without_pods_when_a_ring_fits_a_group_or_whole_groups_cannot_cover():
    assert ring_sets_starts(GridProblem(2, 4, (2, 2, 2, 2), 10, 1)) == []
    assert ring_sets_starts(GridProblem(2, 3, (4, 4), 10, 1, 0, ((0, 1),), (1.0, 1.0))) == []
    assert ring_sets(GridProblem(2, 4, (3, 3, 3), 10, 1, 0, ((0, 0, 1),), (1.0, 1.0))) is None


def test_sets_cut_short_by_a_wall_clock_are_not_remembered():
    problem = GridProblem(8, 92, CP_BUSY.free, CP_BUSY.w_row, 999, 0, CP_BUSY.domains, CP_BUSY.weights)
    with wall_clock_limit(0.0):
        assert ring_sets(problem) is None                          # stopped before any solution
    assert ring_sets(problem) == ring_sets(CP_BUSY)                # solved again, not the cut-short None
