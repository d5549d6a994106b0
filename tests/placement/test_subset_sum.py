"""The distinct-size subset-sum (bounded knapsack) against the item-by-item 0/1 table it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.placement.subset_sum import (
    _classes,
    _pick_by_items,
    _pick_by_sizes,
    distinct_sizes,
    exact_k_subset,
    min_count_subset,
    min_counts,
    pick_subset,
)


def reference_table(sizes: list[tuple[object, int]], target: int) -> tuple[np.ndarray, np.ndarray]:
    """The former implementation: a 0/1 dynamic programme item by item (CLRS 35.5), the
    fewest items per sum, ``took[i, s]`` when item i first improves sum s."""
    inf = len(sizes) + 1
    best = np.full(target + 1, inf, dtype=np.int64)
    best[0] = 0
    took = np.zeros((len(sizes), target + 1), dtype=bool)
    for i, (_, size) in enumerate(sizes):
        if 0 < size <= target:
            cand = best[:target + 1 - size] + 1
            better = cand < best[size:]
            took[i, size:] = better
            best[size:] = np.where(better, cand, best[size:])
    return best, took


def reference_pick(sizes: list[tuple[object, int]], target: int) -> list | None:
    """The former walk back through ``took`` from the last item."""
    best, took = reference_table(sizes, target)
    if best[target] > len(sizes):
        return None
    picked, s = [], target
    for i in range(len(sizes) - 1, -1, -1):
        if s == 0:
            break
        if took[i, s]:
            picked.append(sizes[i][0])
            s -= sizes[i][1]
    return picked[::-1]


def test_hand_computed():
    # 54 + 48 + 42 = 144 with three groups; 54 + 46 + 44 would tie, but the earlier 48 wins
    assert min_count_subset([("a", 54), ("b", 48), ("c", 46), ("d", 42)], 144) == ["a", "b", "d"]
    # two groups of 3 and 2 make 5; of the equal pairs the earliest ones are taken
    assert pick_subset([("a", 3), ("b", 2), ("c", 3), ("d", 2)], 5) == ["a", "b"]
    assert pick_subset([("a", 2), ("b", 3), ("c", 3), ("d", 2)], 5) == ["a", "b"]
    # 64 * 3 + 32 = 224: four groups, the 32 is the last item
    assert pick_subset([(g, 64) for g in range(5)] + [(9, 32)], 224) == [0, 1, 2, 9]
    assert min_counts([("a", 2), ("b", 3)], 5).tolist() == [0, 3, 1, 1, 3, 2]
    assert pick_subset([("a", 64)] * 3, 100) is None
    assert pick_subset([("a", 0), ("b", 4)], 0) == []


@pytest.mark.parametrize("seed", range(40))
def test_same_as_item_by_item_table(seed):
    """Random size lists with ties and repeated sizes (few distinct sizes, as in ToR groups
    that are all alike but a few): same table, same subset for every reachable sum."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    palette = rng.integers(0, 20, size=int(rng.integers(1, 6)))     # few distinct sizes, zero included
    sizes = [(int(g), int(v)) for g, v in enumerate(rng.choice(palette, size=n))]
    order = rng.permutation(n)
    sizes = [sizes[i] for i in order]                                  # a random preference order
    target = int(rng.integers(1, 120))
    best_ref, _ = reference_table(sizes, target)
    assert min_counts(sizes, target).tolist() == best_ref.tolist()
    arr = [v for _, v in sizes]
    for s in range(target + 1):
        want = reference_pick(sizes, s)
        assert pick_subset(sizes, s) == want, (sizes, s)
        assert _pick_by_sizes(sizes, arr, _classes(arr, len(arr), s), s) == want, (sizes, s)
        assert _pick_by_items(sizes, arr, s) == want, (sizes, s)


def test_many_equal_groups():
    """1,000 groups of 64 and 63 hosts, shuffled: the bisection path (the one large
    clusters take) picks what the item table picks."""
    rng = np.random.default_rng(7)
    sizes = [(g, int(v)) for g, v in enumerate(rng.choice([64, 63, 32], size=1000, p=[0.6, 0.39, 0.01]))]
    arr = [v for _, v in sizes]
    for s in (64 * 100 + 63 * 5, 12_500, 64 * 190 + 32):
        want = reference_pick(sizes, s)
        assert want is not None
        assert _pick_by_sizes(sizes, arr, _classes(arr, len(arr), s), s) == want
        assert pick_subset(sizes, s) == want


def test_distinct_sizes():
    assert distinct_sizes([("a", 4), ("b", 4), ("c", 2)]) == [("a", 4), ("c", 2)]


def test_large_cluster_rows():
    """The 100,000-host cluster's rows: 1,562 groups of 64 and one of 32. 12,500 hosts have
    no exact subset (not a multiple of 32); 12,480 = 195 x 64 takes the first 195 groups;
    12,512 = 195 x 64 + 32 takes them and the 32 (last in the order)."""
    sizes = [(g, 64) for g in range(1562)] + [(1562, 32)]
    best = min_counts(sizes, 12_512)
    assert (best[12_500], best[12_480], best[12_512]) == (1564, 195, 196)
    assert pick_subset(sizes, 12_500) is None
    assert pick_subset(sizes, 12_480) == list(range(195))
    assert pick_subset(sizes, 12_512) == list(range(195)) + [1562]
    # largest-first order puts the 32 first: it is then the earliest choice for the 32
    assert pick_subset(sizes[::-1], 12_512) == [1562] + list(range(1561, 1366, -1))


def reference_exact_count(items: list[tuple[object, int]], need: int, k: int) -> list | None:
    """A (count, sum) boolean table copied before each item, read back from the last item
    (the table :func:`exact_k_subset` keeps as bitsets)."""
    reach = np.zeros((k + 1, need + 1), dtype=bool)
    reach[0, 0] = True
    before = []
    for _, size in items:
        before.append(reach.copy())
        if size <= need:
            reach[1:, size:] |= before[-1][:-1, :need + 1 - size]
    if not reach[k, need]:
        return None
    picked, c, t = [], k, need
    for i in range(len(items) - 1, -1, -1):
        if c == 0:
            break
        if not before[i][c, t]:
            picked.append(items[i][0])
            c, t = c - 1, t - items[i][1]
    return picked[::-1]


def test_exact_k_hand_computed():
    # 5 + 1 and 3 + 3 both make 6 with two items: the pair whose latest item is earlier wins
    assert exact_k_subset([("a", 5), ("b", 3), ("c", 2), ("d", 3), ("e", 1)], 6, 2) == ["b", "d"]
    assert exact_k_subset([("a", 5), ("b", 3), ("c", 2), ("d", 3)], 9, 2) is None
    assert exact_k_subset([("a", 0), ("b", 4)], 4, 2) == ["a", "b"]
    assert exact_k_subset([], 0, 0) == [] and exact_k_subset([("a", 1)], 0, 1) is None


@pytest.mark.parametrize("seed", range(30))
def test_exact_k_same_as_the_table(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(40):
        n = int(rng.integers(0, 14))
        items = [(i, int(v)) for i, v in enumerate(rng.integers(0, 20, size=n))]
        need, k = int(rng.integers(0, 60)), int(rng.integers(0, 7))
        assert exact_k_subset(items, need, k) == reference_exact_count(items, need, k), (items, need, k)
