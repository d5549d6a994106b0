"""Which pods fill a band of stages exactly (the nested band layout's subset sums)."""

from __future__ import annotations

import numpy as np

from rankmap.placement.band_pods import band_pods
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
