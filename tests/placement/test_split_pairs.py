"""Whole rings in the larger pods, split rings paired in the smaller ones: the default's grid."""

from __future__ import annotations

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pod_profile_bound import pod_profile_bound
from rankmap.placement.split_pairs_layout import split_pairs_starts
from rankmap.placement.tier_search import level_view, tier_cost

# The grid of `rankmap plan` with no arguments (megascale-3tier, 9,216 ranks): 8 stages of
# 144 hosts on 24 ToR groups (every free host used) in 6 pods of 4 groups, a ring crossing
# ~108x a pipeline hop.
FREE = (46, 52, 45, 49, 48, 51, 53, 50, 47, 48, 43, 48, 42, 48, 45, 49, 49, 48, 47, 54, 52, 43, 50, 45)
DEFAULT = GridProblem(8, 144, FREE, 107655739, 999999, 0, (tuple(g // 4 for g in range(24)),), (1.0, 1.0))


def test_default_grid_four_whole_rings_and_paired_split_rings():
    best = min(split_pairs_starts(DEFAULT), key=lambda c: tier_cost(DEFAULT, c))
    assert (np.bincount(best.ravel(), minlength=24) <= np.asarray(FREE)).all()
    pods = level_view(DEFAULT, best, 1)
    spans = [len(set(row)) for row in pods.tolist()]
    # the two smallest pods (186 and 184 hosts) hold no whole ring; each of the four split
    # rings takes the remainder of a whole ring's pod and a piece of a small pod
    assert sorted(spans) == [1, 1, 1, 1, 2, 2, 2, 2]
    for r, k in enumerate(spans):
        if k == 2:
            home = [set(pods[q]) for q in (r - 1, r + 1) if 0 <= q < 8 and spans[q] == 1]
            assert any(h <= set(pods[r]) for h in home), r   # beside the whole ring whose pod it shares
    # pod ring crossings: 2 per split ring
    assert sum(k for k in spans if k > 1) == 8
    # below the plan of the previous release (5.644e9 units), within 4% of the joint bound
    cost = tier_cost(DEFAULT, best)
    assert cost < 5.55e9 and cost < 1.04 * pod_profile_bound(DEFAULT)


def test_not_offered_where_a_ring_fits_a_tor_group_or_a_pod_holds_two():
    assert split_pairs_starts(GridProblem(4, 3, (4,) * 8, 10, 1, 0, ((0, 0, 1, 1, 2, 2, 3, 3),), (1.0, 1.0))) == []
    assert split_pairs_starts(GridProblem(4, 5, (4,) * 8, 10, 1, 0, ((0, 0, 0, 1, 1, 1, 2, 2),), (1.0, 1.0))) == []
