"""Nested bands: pods in bands of stages, their ToR groups in sub-bands inside them."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.grid_search import search
from rankmap.placement.nested_bands_layout import nested_band_cells, nested_bands_starts
from rankmap.placement.status import SolverStatus
from rankmap.placement.tier_search import level_view, tier_bound, tier_costs

# Two pods of four groups of 8 hosts; 4 stages of 16 hosts; a ring crossing costs 2 pipeline
# hops. A group's cheapest block is 2 x 4 (2*2 + 4 = 8 against 2 + 8 = 10 for 1 x 8), a
# pod's 4 x 8 (4*2 + 8 = 16 against 2*2 + 16 = 20 for 2 x 16).
TWO_PODS = GridProblem(4, 16, (8,) * 8, 2, 1, 0, ((0, 0, 0, 0, 1, 1, 1, 1),), (1.0, 1.0))


def _within(problem: GridProblem, cells: np.ndarray) -> bool:
    return bool((np.bincount(cells.ravel(), minlength=len(problem.free)) <= np.asarray(problem.free)).all())


def test_two_pods_each_a_block_of_four_stages_its_groups_2_by_4():
    cells = nested_band_cells(TWO_PODS, 2, 2)
    assert cells.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 4, 4, 4, 4, 5, 5, 5, 5],
                              [0, 0, 0, 0, 1, 1, 1, 1, 4, 4, 4, 4, 5, 5, 5, 5],
                              [2, 2, 2, 2, 3, 3, 3, 3, 6, 6, 6, 6, 7, 7, 7, 7],
                              [2, 2, 2, 2, 3, 3, 3, 3, 6, 6, 6, 6, 7, 7, 7, 7]]
    # ToR tier: 4 rows x 4 pieces x 2 + 16 hops between the sub-bands = 48;
    # pod tier: 4 rows x 2 pods x 2, no hop leaves a pod = 16
    assert tier_costs(TWO_PODS, cells) == (48, 16)


def test_two_pods_meet_the_bound_and_the_planner_proves_it():
    cells = nested_band_cells(TWO_PODS, 2, 2)
    assert sum(tier_costs(TWO_PODS, cells)) == tier_bound(TWO_PODS, 0) == 64
    sol, bound, _ = search(TWO_PODS, np.repeat(np.arange(8), 8).reshape(4, 16), objectives=("tiers", "uplink"))
    assert sol.status == SolverStatus.OPTIMAL and bound == 64 and sum(tier_costs(TWO_PODS, sol.cells)) == 64


def test_eight_stages_two_bands_meet_the_bound():
    # 8 stages of 8 hosts, pods of four groups of 8: a pod per band of 4 stages (56 + 8 = 64)
    p = GridProblem(8, 8, (8,) * 8, 2, 1, 0, ((0, 0, 0, 0, 1, 1, 1, 1),), (1.0, 1.0))
    cells = nested_band_cells(p, 2, 2)
    assert set(level_view(p, cells[:4], 1).ravel()) == {0} and set(level_view(p, cells[4:], 1).ravel()) == {1}
    assert tier_costs(p, cells) == (56, 8) and tier_bound(p, 0) == 64


def test_uneven_groups_split_by_sub_band_totals():
    # pod 0: groups of 6, 10, 5, 11 (32 hosts); pod 1 the same: sub-bands of 2 rows x 16
    # columns take exactly 32 hosts each: {6, 10} | {5, 11} per pod, 8 columns per pod
    p = GridProblem(4, 16, (6, 10, 5, 11, 6, 10, 5, 11), 2, 1, 0, ((0, 0, 0, 0, 1, 1, 1, 1),), (1.0, 1.0))
    cells = nested_band_cells(p, 2, 2)
    assert _within(p, cells)
    pods = level_view(p, cells, 1)
    assert (pods[:, :8] == pods[0, 0]).all() and (pods[:, 8:] == pods[0, 8]).all()   # pods line up
    for g in range(8):
        rows = set(np.nonzero(cells == g)[0].tolist())
        assert rows in ({0, 1}, {2, 3}), (g, rows)                                   # one sub-band each


def test_no_exact_split_cuts_one_group():
    # pods of 7 + 9 + 9 = 25 hosts, a band of 48: pod 0 whole and 23 hosts of pod 1; no
    # whole groups fill a sub-band of 24 exactly (23 at most), so one group is cut in two
    p = GridProblem(4, 12, (7, 9, 9, 7, 9, 9), 3, 1, 0, ((0, 0, 0, 1, 1, 1),), (1.0, 1.0))
    cells = nested_band_cells(p, 2, 2)
    assert _within(p, cells)
    assert np.bincount(cells.ravel(), minlength=6).tolist() == [7, 9, 9, 5, 9, 9]
    both = [g for g in range(6) if {0, 1} <= set((np.nonzero(cells == g)[0] // 2).tolist())]
    assert len(both) == 1


def test_starts_are_deterministic_and_feasible():
    rng = np.random.default_rng(5)
    free = tuple(int(x) for x in rng.integers(15, 58, size=24))
    p = GridProblem(16, int(sum(free) * 0.98) // 16, free, 20, 1, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))
    a, b = list(nested_bands_starts(p)), list(nested_bands_starts(p))
    assert a and len(a) == len(b) and all((x == y).all() for x, y in zip(a, b))
    assert all(_within(p, c) and c.shape == (16, p.cols) for c in a)


@pytest.mark.parametrize("problem", [GridProblem(4, 4, (4,) * 4, 2, 1), GridProblem(1, 8, (4, 4), 2, 1, 0, ((0, 1),),
                                                                                  (1.0, 1.0))])
def test_not_offered_on_one_tier_or_one_row(problem):
    assert list(nested_bands_starts(problem)) == []


def test_too_few_free_hosts():
    assert nested_band_cells(GridProblem(4, 4, (4, 4, 4, 3), 2, 1, 0, ((0, 0, 1, 1),), (1.0, 1.0)), 2, 2) is None


def test_even_band_heights_share_the_rows_out():
    from rankmap.placement.nested_bands_layout import _even_heights, _heights, _last_heights

    assert _heights(32, 3, 2) == [[3, 3], [3, 3], [3, 3], [3, 3], [3, 3], [2]]
    assert _even_heights(32, 3, 2) == [[3, 3], [3, 3], [3, 3], [3, 4], [3, 4]]
    assert _even_heights(16, 2, 2) == [[2, 2]] * 4
    assert _last_heights(32, 3, 2) == [[3, 3]] * 4 + [[4, 4]]
    assert _last_heights(16, 2, 2) == [[2, 2]] * 4 and _last_heights(7, 2, 3) == [[2, 2, 3]]


def test_balanced_bands_take_their_share_of_the_pods():
    # six pods of 8, 8, 8, 6, 6, 4 hosts (one group each), two bands of 20: the fewest pods
    # give 8 + 8 + 4 then 8 + 6 + 6; balanced (3 pods a band, nearest 20/3 first) the same
    # count, 6 + 6 + 8 then 8 + 8 + 4
    p = GridProblem(4, 10, (8, 8, 8, 6, 6, 4), 2, 1, 0, ((0, 1, 2, 3, 4, 5),), (1.0, 1.0))
    for balanced in (False, True):
        cells = nested_band_cells(p, 1, 2, None, 0.0, balanced)
        assert _within(p, cells)
        top = sorted(set(cells[:2].ravel().tolist()))
        assert len(top) == 3 and sum(p.free[g] for g in top) == 20


def test_pieces_that_end_on_whole_columns_go_first():
    from rankmap.placement.band_split import _straight
    from rankmap.placement.nested_bands_layout import _lay_sub_band

    # sub-band of 2 rows: groups of 3, 4, 3 hosts in that order step twice (after 3 and
    # after 3 + 4 the total is odd); with the group of 4 first, once
    pieces = _straight([[(0, 3), (1, 4), (2, 3)]], 2)
    assert pieces == [(1, 4), (0, 3), (2, 3)]
    for order, steps in ((pieces, 1), ([(0, 3), (1, 4), (2, 3)], 2)):
        cells = np.empty((2, 5), dtype=np.int64)
        _lay_sub_band(cells, 0, 2, order)
        assert int((cells[0] != cells[1]).sum()) == steps


def test_leftover_rows_also_go_to_the_first_band():
    from rankmap.placement.nested_bands_layout import _first_heights

    assert _first_heights(32, 3, 2) == [[4, 4]] + [[3, 3]] * 4
    assert _first_heights(16, 2, 2) == [[2, 2]] * 4 and _first_heights(7, 2, 3) == [[2, 2, 3]]
    # 16 rows in bands of 3 + 3: the 10 rows past the first band's 6 go first (5 + 5, then 3 + 3)
    rng = np.random.default_rng(5)
    free = tuple(int(x) for x in rng.integers(15, 58, size=24))
    p = GridProblem(16, int(sum(free) * 0.98) // 16, free, 20, 1, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))
    first = nested_band_cells(p, 3, 2, _first_heights(16, 3, 2))
    last = nested_band_cells(p, 3, 2, [[3, 3], [5, 5]])
    assert first is not None and last is not None and not (first == last).all()
    assert any((first == c).all() for c in nested_bands_starts(p))


def test_pods_with_odd_counts_side_by_side_step_once():
    # one band of 2 rows x 8 columns; four pods of one group each, 3, 5, 4 and 4 hosts. Taken
    # largest first (5, 4, 4, 3) three pod edges would step; laid 4, 4, 5, 3 only the edge
    # after 13 hosts steps: 2 rows x 4 pieces + 1 hop on each tier (w_row = w_col = 1)
    p = GridProblem(2, 8, (3, 5, 4, 4), 1, 1, 0, ((0, 1, 2, 3),), (1.0, 1.0))
    cells = nested_band_cells(p, 2, 1, [[2]])
    assert cells.tolist() == [[2, 2, 3, 3, 1, 1, 1, 0], [2, 2, 3, 3, 1, 1, 0, 0]]
    assert tier_costs(p, cells) == (9, 9)


def test_short_bands_then_tall_ones_where_neither_height_alone_fits():
    from rankmap.placement.nested_bands_layout import (
        _even_heights,
        _first_heights,
        _heights,
        _last_heights,
        _mixed_heights,
    )

    assert _mixed_heights(32, 3, 2) == [[2, 2]] * 2 + [[3, 3]] * 4
    assert _mixed_heights(16, 3, 2) == [[2, 2], [3, 3], [3, 3]] and _mixed_heights(12, 3, 2) == [[3, 3]] * 2
    # 16 stages of 12 hosts, eight pods of four groups of 6; a ring crossing costs 2, a hop 3.
    # One band of 2 + 2 rows (two pods, each 4 x 6, its groups 2 x 3) and two of 3 + 3 (three
    # pods each, 6 x 4, groups 3 x 2): ToR tier (4 rows x 4 + 12 rows x 6 pieces) x 2 + 5
    # sub-band edges x 12 hops x 3 = 356; pod tier (4 x 2 + 12 x 3) x 2 + 2 x 12 x 3 = 160.
    p = GridProblem(16, 12, (6,) * 32, 2, 3, 0, (tuple(g // 4 for g in range(32)),), (1.0, 1.0))
    cells = nested_band_cells(p, 3, 2, _mixed_heights(16, 3, 2))
    assert tier_costs(p, cells) == (356, 160)
    assert len(set(cells[:4].ravel().tolist())) == 8 and len(set(cells[4:10].ravel().tolist())) == 12
    assert min(sum(tier_costs(p, c)) for c in nested_bands_starts(p)) == 516
    # every other way to cut the rows costs more (the best, bands of 3 + 3 and a last of 3 + 1: 524)
    others = [nested_band_cells(p, s, m, split(16, s, m)) for s in range(1, 5) for m in range(2, 5)
              for split in (_heights, _even_heights, _last_heights, _first_heights)]
    assert min(sum(tier_costs(p, c)) for c in others if c is not None) == 524


def test_short_bands_spread_among_tall_ones_find_exact_pod_fills():
    from rankmap.placement.nested_bands_layout import _mixed_heights, _spread_heights

    assert _spread_heights(32, 3, 2) == [[2, 2], [3, 3], [3, 3], [2, 2], [3, 3], [3, 3]]
    assert _spread_heights(20, 3, 2) == [[2, 2], [3, 3], [2, 2], [3, 3]]
    assert _spread_heights(12, 3, 2) == _mixed_heights(12, 3, 2) == [[3, 3]] * 2
    # 20 stages of 3 hosts, pods of 14, 16, 12 and 18 hosts; bands of 12 and 18 hosts. Short
    # bands first: the second short band finds no pod of 12 and cuts the pod of 18, so every
    # later band cuts a pod too; spread: 12 | 18 | 12 of the 16 | 14 + the 16's other 4.
    p = GridProblem(20, 3, (1, 10, 3, 16, 1, 8, 3, 3, 13, 2), 2, 3, 0, ((0, 0, 0, 1, 2, 2, 2, 3, 3, 3),),
                    (1.0, 1.0))
    first = nested_band_cells(p, 3, 2, _mixed_heights(20, 3, 2))
    spread = nested_band_cells(p, 3, 2, _spread_heights(20, 3, 2))
    dom = np.asarray(p.domains[0])
    assert [sorted(set(dom[spread[r0:r1]].ravel().tolist())) for r0, r1 in ((0, 4), (4, 10), (10, 14), (14, 20))] \
        == [[2], [3], [1], [0, 1]]
    assert tier_costs(p, first) == (94, 60) and tier_costs(p, spread) == (90, 39)
    assert min(sum(tier_costs(p, c)) for c in nested_bands_starts(p)) == 129
