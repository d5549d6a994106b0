"""Which pods fill a band of stages exactly (the nested band layout's subset sums)."""

from __future__ import annotations

import numpy as np

from rankmap.placement.band_pods import band_pods, without_smallest_pods
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.subset_sum import exact_k_subset


def test_a_fixed_count_of_pods_prefers_the_earliest_items():
    items = [(0, 5), (1, 4), (2, 3), (3, 2)]
    assert exact_k_subset(items, 7, 2) == [1, 2]        # {4, 3} before {5, 2}: its latest item comes first
    assert exact_k_subset(items, 9, 3) == [1, 2, 3]
    assert exact_k_subset(items, 6, 1) is None


def test_a_band_takes_whole_groups_of_one_more_pod_before_cutting():
    # pods of 5 + 5 and 3 + 3 hosts; a band of 13: no whole pods fill it, pod 0 and one
    # group of pod 1 do
    dom, free = np.array([0, 0, 1, 1]), np.array([5, 5, 3, 3])
    assert band_pods(dom, free, 13, part=True) == [[(0, 5), (1, 5)], [(2, 3)]]
    assert free.tolist() == [0, 0, 0, 3]
    # pods of 5 + 5 and 4 + 2: a band of 12 takes pod 0 and the whole group of 2; without
    # the partial-pod fill, 2 hosts cut from the group of 4
    dom, free = np.array([0, 0, 1, 1]), np.array([5, 5, 4, 2])
    assert band_pods(dom, free, 12, part=True) == [[(0, 5), (1, 5)], [(3, 2)]]
    free = np.array([5, 5, 4, 2])
    assert band_pods(dom, free, 12, part=False) == [[(0, 5), (1, 5)], [(2, 2)]]


def test_a_preference_breaks_ties_among_the_fewest_pods():
    # three pods of 5 hosts, a band of 10: largest first keeps the index order; a lower
    # preference for pod 0 moves it last
    dom = np.array([0, 1, 2])
    assert band_pods(dom, np.array([5, 5, 5]), 10) == [[(0, 5)], [(1, 5)]]
    assert band_pods(dom, np.array([5, 5, 5]), 10, prefer=np.array([1.0, 0.0, 0.0])) == [[(1, 5)], [(2, 5)]]
    # the fewest pods still come first: 6 + 4 over 3 + 3 + 4 (listed in preference order)
    dom, free = np.array([0, 1, 2, 3]), np.array([6, 3, 3, 4])
    assert band_pods(dom, free, 10, prefer=np.array([5.0, 0.0, 0.0, 0.0])) == [[(3, 4)], [(0, 6)]]


def test_the_second_smallest_pod_left_out_first():
    # pods of 2, 6 and 8 hosts on 10 cells: 6 spare; smallest first: only the pod of 2
    # (the pod of 6 no longer fits); second smallest first: the pod of 6, then nothing
    p = GridProblem(2, 5, (3, 3, 4, 4, 2), 10, 1, 0, ((0, 0, 1, 1, 2),), (1.0, 1.0))
    assert without_smallest_pods(p, first=0) == (3, 3, 4, 4, 0)
    assert without_smallest_pods(p, first=1) == (0, 0, 4, 4, 2)
    # the third smallest (8 hosts) does not fit the spare: nothing left out
    assert without_smallest_pods(p, first=2) == p.free
    # 14 spare: the pod of 6 first, then the pod of 2 (8 left, the pod of 8 does not fit)
    wide = GridProblem(1, 4, (3, 3, 4, 4, 2), 10, 1, 0, ((0, 0, 1, 1, 2),), (1.0, 1.0))
    assert without_smallest_pods(wide, first=1) == (0, 0, 4, 4, 0)
