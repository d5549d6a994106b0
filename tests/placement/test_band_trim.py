"""Spare hosts cutting pods to whole columns of their band (hand-counted costs)."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.placement.band_trim import band_index, clean_cut, pod_trimmed, retrimmed_starts
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.nested_bands_layout import nested_bands_starts
from rankmap.placement.tier_search import tier_cost, tier_costs

# 5 stages of 3 hosts (15 cells), w_row 2, w_col 1; pods of groups (4, 3) and (4, 6): 17 free
# hosts, 2 spare.
SMALL = GridProblem(5, 3, (4, 3, 4, 6), 2, 1, 0, ((0, 0, 1, 1),), (1.0, 1.0))


@pytest.mark.parametrize("sizes, band, cut, after", [
    ([3, 3], [1, 1], 0, [3, 3]),                 # already two rows of 3
    ([3, 4], [1, 1], 1, [3, 3]),                 # the wider half drops its extra host
    ([4, 3], [2, 2], 3, [2, 2]),                 # halves of 4 and 3 hosts in 2 rows: 1 column each
    ([4, 4, 4, 6], [2, 2], 2, [4, 4, 4, 4]),     # 4 + 4 | 4 + 6 -> 2 columns each side
    ([40, 47, 44, 45], [3, 3], 2, [40, 47, 42, 45]),
    ([5, 7], [2, 3], 2, [4, 6]),                 # 2 columns: 4 above, 6 below
])
def test_clean_cut_counts_the_hosts_by_hand(sizes, band, cut, after):
    assert clean_cut(sizes, band) == (cut, after)


def test_clean_cut_only_for_two_sub_bands_and_few_groups():
    assert clean_cut([3, 4], [3]) is None
    assert clean_cut([3], [1, 1]) is None
    assert clean_cut([1] * 9, [1, 1]) is None


def test_band_index_marks_groups_across_bands():
    cells = np.array([[0, 1], [0, 1], [2, 2], [2, 1]])
    assert band_index(cells, [[1, 1], [2]], 4).tolist() == [0, -1, 1, -1]   # group 3 unused


def test_pod_trimmed_spends_only_the_spare_hosts_fewest_first():
    # 2 stages of 5 hosts; pods (3, 4), (2, 2), (3, 3): 17 free, 7 spare; one band of
    # sub-bands of 1 row. Cuts: 1, 0, 0 -> pod 0 drops one host; then nothing left to cut.
    p = GridProblem(2, 5, (3, 4, 2, 2, 3, 3), 2, 1, 0, ((0, 0, 1, 1, 2, 2),), (1.0, 1.0))
    assert pod_trimmed(p, np.zeros(6, dtype=np.int64), [[1, 1]]) == (3, 3, 2, 2, 3, 3)
    # no spare host: nothing cut
    tight = GridProblem(2, 9, (3, 5, 2, 2, 3, 3), 2, 1, 0, ((0, 0, 1, 1, 2, 2),), (1.0, 1.0))
    assert pod_trimmed(tight, np.zeros(6, dtype=np.int64), [[1, 1]]) == tight.free
    # a pod with a group in no band keeps its hosts
    assert pod_trimmed(p, np.array([-1, 0, 0, 0, 0, 0]), [[1, 1]]) == p.free


def test_trimming_strictly_lowers_the_cost_of_the_best_nested_start():
    """Every nested start costs 15 at best; the second pass lays the groups as whole rows
    (4 -> 3 and 4 -> 3 hosts, the 2 spare): rows of groups 0, 1, 3, 3, 2, so 3 ToR edges of
    3 columns (9) and one pod edge of 3 columns (3): 12, which is least (5 rows over 4 groups
    of at most 2 rows each need 3 ToR edges of 3 hops, and two pods one pod edge)."""
    nested = min(tier_cost(SMALL, c) for c in nested_bands_starts(SMALL))
    best = min(retrimmed_starts(SMALL), key=lambda c: tier_cost(SMALL, c))
    assert nested == 15.0
    assert tier_costs(SMALL, best) == (9, 3)
    assert sorted(np.unique(best, return_counts=True)[1].tolist()) == [3, 3, 3, 6]
    assert all(len(set(row)) == 1 for row in best.tolist())


def test_starts_are_deterministic_and_within_the_free_hosts():
    p = GridProblem(5, 4, (2, 5, 6, 2, 4, 5), 2, 1, 0, ((0, 0, 1, 1, 2, 2),), (1.0, 1.0))
    first = [c.tobytes() for c in retrimmed_starts(p)]
    assert first and first == [c.tobytes() for c in retrimmed_starts(p)]
    for c in retrimmed_starts(p):
        assert (np.bincount(c.ravel(), minlength=6) <= np.array(p.free)).all()


def test_not_offered_on_one_tier():
    assert list(retrimmed_starts(GridProblem(4, 2, (4, 4), 2, 1))) == []
