"""Pod blocks: each pod of a band the same columns on every row, its groups inside it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.nested_bands_layout import nested_band_cells
from rankmap.placement.pod_blocks_layout import _pod_fill, pod_block_cells
from rankmap.placement.tier_search import tier_cost, tier_costs

# One band of five stages of 8 hosts; two pods of four groups of 5 hosts; a ring crossing
# costs 5 pipeline hops (about the deep-pipeline benchmark's ratio). Sub-bands of 2 + 3 rows
# want 8 + 12 hosts of each pod, which groups of 5 do not make: the pods' shares differ in
# width between the sub-bands.
FIVE_ROWS = GridProblem(5, 8, (5,) * 8, 5, 1, 0, ((0, 0, 0, 0, 1, 1, 1, 1),), (1.0, 1.0))


def test_five_row_band_as_pod_blocks_beats_its_sub_bands():
    cells = nested_band_cells(FIVE_ROWS, 2, 2, [[2, 3]], blocks=True)
    assert cells.tolist() == [[0, 0, 0, 1, 4, 4, 4, 5],
                              [0, 0, 1, 1, 4, 4, 5, 5],
                              [2, 2, 1, 1, 6, 6, 5, 5],
                              [2, 2, 3, 3, 6, 6, 7, 7],
                              [2, 3, 3, 3, 6, 7, 7, 7]]
    # ToR tier: every row crosses 4 group edges (cyclic), 20 x 5 = 100, and 2 + 4 + 4 + 2 = 12
    # hops between rows: 112. Pod tier: 2 pod edges a row, 10 x 5 = 50, no hop (straight
    # pod edges): 50. In all 162.
    assert tier_costs(FIVE_ROWS, cells) == (112, 50)
    sub_bands = nested_band_cells(FIVE_ROWS, 2, 2, [[2, 3]])
    assert tier_costs(FIVE_ROWS, sub_bands) == (123, 52)      # the pod edges step twice
    assert tier_cost(FIVE_ROWS, cells) == 162 < tier_cost(FIVE_ROWS, sub_bands) == 175


def test_pod_block_cells_lays_each_pod_inside_its_own_columns():
    cells = pod_block_cells(FIVE_ROWS, [5])
    pods = np.asarray(FIVE_ROWS.domains[0])[cells]
    assert pods.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]] * 5
    assert tier_cost(FIVE_ROWS, cells) == 162


def test_groups_of_4_4_6_6_take_one_row_each_and_a_three_row_block():
    p = GridProblem(5, 8, (4, 4, 6, 6) * 2, 5, 1, 0, ((0, 0, 0, 0, 1, 1, 1, 1),), (1.0, 1.0))
    cells = pod_block_cells(p, [5])
    assert cells.tolist() == [[0, 0, 0, 0, 4, 4, 4, 4],
                              [1, 1, 1, 1, 5, 5, 5, 5],
                              [2, 2, 3, 3, 6, 6, 7, 7],
                              [2, 2, 3, 3, 6, 6, 7, 7],
                              [2, 2, 3, 3, 6, 6, 7, 7]]
    # ToR: rows of 2, 2, 4, 4, 4 pieces = 16 x 5 = 80, plus 8 + 8 hops; pod: 10 x 5 = 50.
    assert tier_costs(p, cells) == (96, 50)


def test_pod_fill_of_a_121_host_pod_in_five_rows():
    # Groups of 22, 27, 32 and 34 free hosts (a pod of the deep-pipeline benchmark at 50% busy)
    # in 5 rows of 23 columns: the group of 22 in the upper left two rows, the group of 34 in
    # the upper right three, the group of 32 in the lower left three and the group of 27 in the
    # lower right two. Two ring pieces a row (10) and 27 hops: 10 * 5,054,764 + 27 * 1,000,000
    # = 77.55e6 units, the minimum an exact pattern integer programme finds for this pod and
    # shape (rows 4, 5 and 6 tall: 73.49e6, 77.55e6, 82.66e6 for the block fill).
    block = _pod_fill((22, 27, 32, 34), (0,) * 5, (23, 23, 23, 23, 23), 5_054_764, 1_000_000)
    pieces = sum(len({int(g) for g in row if g >= 0}) for row in block)     # one run per group a row here
    both = (block[1:] >= 0) & (block[:-1] >= 0)
    hops = int((both & (block[1:] != block[:-1])).sum())
    assert (pieces, hops) == (10, 27)
    assert block[:2, 0].tolist() == [0, 0] and block[2:, 0].tolist() == [2, 2, 2]
    assert np.bincount(block[block >= 0]).tolist() == [22, 27, 32, 34]


def test_blocks_never_cost_more_than_sub_bands_and_are_deterministic():
    rng = np.random.default_rng(7)
    for _ in range(12):
        pods = int(rng.integers(2, 4))
        free = tuple(int(f) for f in rng.integers(3, 9, size=4 * pods))
        rows = int(rng.integers(4, 8))
        cols = sum(free) // rows - int(rng.integers(0, 2))
        p = GridProblem(rows, cols, free, 5, 1, 0, (tuple(np.repeat(np.arange(pods), 4).tolist()),), (1.0, 1.0))
        for heights in ([[2, rows - 2]], [[rows // 2, rows - rows // 2]]):
            plain = nested_band_cells(p, 2, 2, heights)
            if plain is None:
                continue
            blocks = nested_band_cells(p, 2, 2, heights, blocks=True)
            assert tier_cost(p, blocks) <= tier_cost(p, plain)
            assert (np.bincount(blocks.ravel(), minlength=len(free)) <= np.asarray(free)).all()
            _pod_fill.cache_clear()
            assert nested_band_cells(p, 2, 2, heights, blocks=True).tobytes() == blocks.tobytes()


def test_band_heights_must_sum_to_the_rows():
    with pytest.raises(ValueError, match="do not sum"):
        pod_block_cells(FIVE_ROWS, [2, 2])


@pytest.mark.parametrize("h", [3, 4, 5, 6])
def test_pod_fill_places_every_host_once(h):
    for sizes in itertools.islice(itertools.product((5, 7, 9), repeat=3), 6):
        n = sum(sizes)
        widths = tuple(n // h + (r < n % h) for r in range(h))
        block = _pod_fill(sizes, (0,) * h, widths, 5, 1)
        assert np.bincount(block[block >= 0], minlength=3).tolist() == list(sizes)
        assert [(row >= 0).sum() for row in block] == list(widths)
