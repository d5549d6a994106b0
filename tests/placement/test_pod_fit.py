"""Which pods suit which band: columns lost to whole-column rounding (hand-counted)."""

from __future__ import annotations

import pytest

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.nested_bands_layout import _fitted_starts, nested_band_cells
from rankmap.placement.pod_fit import band_fits, rounding_loss

# Pods of two groups: three of 3 + 5 hosts, two of 4 + 4; 4 columns; a band of 2 + 2 rows
# (16 hosts: two pods) above one of 3 + 3 rows (24 hosts: three pods).
MIXED = GridProblem(10, 4, (3, 5, 3, 5, 3, 5, 4, 4, 4, 4), 2, 1, 0, ((0, 0, 1, 1, 2, 2, 3, 3, 4, 4),), (1.0, 1.0))


@pytest.mark.parametrize("groups, band, loss", [
    # 2-row sub-bands: the groups of 3 and 5 lose half a column each; halves of 2 and 3
    # columns (4 wanted): one misaligned column and the wider half 1 over
    ([3, 5], (2, 2), 3.0),
    # 3-row sub-bands: the group of 5 loses 1/3; halves of 1 and 2 columns (4/3 wanted)
    ([3, 5], (3, 3), 2.0),
    ([4, 4], (2, 2), 0.0),
    # 3-row sub-bands: 2/3 per group, halves of 2 columns each (4/3 wanted)
    ([4, 4], (3, 3), 2.0),
    ([6, 6, 6, 6], (3, 3), 0.0),
    # one sub-band: only the groups' own rounding (5 -> 2 columns of 3: 1/3)
    ([3, 5], (3,), 1 / 3),
])
def test_rounding_loss_counts_the_columns_by_hand(groups, band, loss):
    assert rounding_loss(groups, band) == pytest.approx(loss)


def test_pod_tier_weight_scales_the_misaligned_columns():
    assert rounding_loss([3, 5], (2, 2), w_pod=3.0) == pytest.approx(5.0)    # 1 + 3 * 1 + 1


def test_each_band_prefers_the_pods_that_round_best_in_it():
    fits = band_fits(MIXED, [[2, 2], [3, 3]])
    # losses (3 + 5): 3 and 2, mean 2.5; (4 + 4): 0 and 2, mean 1
    assert fits[(2, 2)].tolist() == pytest.approx([0.5, 0.5, 0.5, -1.0, -1.0])
    assert fits[(3, 3)].tolist() == pytest.approx([-0.5, -0.5, -0.5, 1.0, 1.0])
    assert band_fits(MIXED, [[2, 2], [2, 2]]) == {}                    # one shape: nothing to prefer


def test_fitted_bands_take_the_pods_that_suit_them():
    plain = nested_band_cells(MIXED, 2, 2, [[2, 2], [3, 3]])
    fitted = nested_band_cells(MIXED, 2, 2, [[2, 2], [3, 3]], fit=True)
    pod = lambda g: g // 2                                             # noqa: E731
    assert {pod(g) for g in plain[:4].ravel()} == {0, 1}               # largest first, ties by index
    assert {pod(g) for g in fitted[:4].ravel()} == {3, 4}              # the 4 + 4 pods: whole columns
    assert {pod(g) for g in fitted[4:].ravel()} == {0, 1, 2}
    # the 2-row band of 4 + 4 pods: every group a 2 x 2 block
    assert fitted[:4].tolist() == [[6, 6, 8, 8], [6, 6, 8, 8], [7, 7, 9, 9], [7, 7, 9, 9]]


def test_fitted_starts_only_where_band_shapes_differ():
    assert _fitted_starts(GridProblem(4, 4, (4,) * 4, 2, 1, 0, ((0, 0, 1, 1),), (1.0, 1.0))) == []
    starts = _fitted_starts(MIXED)
    assert starts and all(c.shape == (10, 4) for c in starts)
