"""Fewest whole ToR groups that fill a number of hosts exactly: subset-sum with fewest items.

The constructive layouts (:mod:`rankmap.placement.snake_layout`,
:mod:`rankmap.placement.band_layout`) fill grid rows with whole ToR groups, since every
group a row uses costs one ring crossing. Dynamic programming over sums, as in the
textbook subset-sum algorithm (Cormen et al., *Introduction to Algorithms*, 3rd ed.,
ch. 35.5), with the item count minimised instead of feasibility.

Groups of equal size are interchangeable for the sums, so the tables are built over the
distinct sizes only: a bounded knapsack over ``(size, count)`` pairs, each count split
into parts 1, 2, 4, ... (binary splitting: Kellerer, Pferschy and Pisinger, *Knapsack
Problems*, Springer 2004, ch. 7, the bounded problem turned 0/1). The work grows with
the number of distinct sizes (times the log of their counts), not with the number of
groups: a cluster of 1,563 groups of two sizes (1,562 of 64 hosts, one of 32) costs 12
array passes per table instead of 1,563.

Which subset is returned when several have the fewest items is fixed by the preference
order (:func:`pick_subset`): the one whose latest item comes earliest, then its second
latest, and so on (the colexicographic least), which is what reading the item-by-item
0/1 table back from its last item gives.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter

import numpy as np

__all__ = ["min_counts", "pick_subset", "min_count_subset", "distinct_sizes", "exact_k_subset"]


def _bounded_counts(classes: list[tuple[int, int]], target: int, inf: int) -> np.ndarray:
    """``best[target + 1]``: fewest items summing to each s, ``classes`` = [(size, count)],
    ``inf`` where no multiset within the counts does (binary splitting, module docstring)."""
    best = np.full(target + 1, inf, dtype=np.int64)
    best[0] = 0
    for size, count in classes:
        part = 1
        while count > 0 and 0 < size:
            take = min(part, count)
            weight = size * take
            if weight > target:
                break
            # Each part is one 0/1 item of `take` groups: read the sums before this part.
            best[weight:] = np.minimum(best[weight:], best[:target + 1 - weight] + take)
            count -= take
            part *= 2
    return best


def _classes(sizes: list[int], end: int, target: int) -> list[tuple[int, int]]:
    """``[(size, count)]`` of the items ``sizes[:end]`` of size 1..target, by size."""
    return sorted(Counter([v for v in sizes[:end] if 0 < v <= target]).items())


def min_counts(sizes: list[tuple[object, int]], target: int) -> np.ndarray:
    """Fewest items summing exactly to each sum up to ``target``.

    Parameters
    ----------
    sizes : list of (item, size)
        The items (their order does not matter here).
    target : int
        The largest sum of interest.

    Returns
    -------
    ndarray
        ``best[target + 1]`` (int64): fewest items summing exactly to each s
        (``len(sizes) + 1`` where no subset does).

    Examples
    --------
    >>> min_counts([("a", 2), ("b", 3)], 5).tolist()
    [0, 3, 1, 1, 3, 2]
    """
    values = [v for _, v in sizes]
    return _bounded_counts(_classes(values, len(values), target), target, len(sizes) + 1)


def pick_subset(sizes: list[tuple[object, int]], s: int) -> list | None:
    """The fewest items summing exactly to ``s``, ties broken by the preference order.

    Among the subsets with fewest items, the one whose latest item (in the order of
    ``sizes``) is earliest, then the second latest, and so on. Its items of one size are
    always the earliest of that size (a later one could be swapped for an earlier one
    left out), so the latest item is found by bisecting on the prefix of ``sizes`` that
    still reaches ``s`` with that many items; it fixes how many of its size are taken, and
    the search repeats on the sizes left, at most once per distinct size.

    Parameters
    ----------
    sizes : list of (item, size)
        Candidate items in preference order.
    s : int
        The sum to reach.

    Returns
    -------
    list of item or None
        The chosen items in the order of ``sizes``; None if no subset sums to ``s``.

    Examples
    --------
    >>> pick_subset([("a", 3), ("b", 2), ("c", 3), ("d", 2)], 5)
    ['a', 'b']
    >>> pick_subset([("a", 4)], 3) is None
    True
    """
    values = [v for _, v in sizes]
    classes = _classes(values, len(values), s)
    passes = sum(c.bit_length() for _, c in classes)        # array passes per table by sizes
    if len(classes) * max(1, len(values).bit_length()) * passes >= sum(c for _, c in classes):
        return _pick_by_items(sizes, values, s)             # few items: one pass each is cheaper
    return _pick_by_sizes(sizes, values, classes, s)


def _pick_by_sizes(sizes: list, values: list[int], classes: list[tuple[int, int]], s: int) -> list | None:
    """:func:`pick_subset` by bisection over tables of distinct sizes (its docstring)."""
    inf = len(sizes) + 1
    need = int(_bounded_counts(classes, s, inf)[s])
    if need >= inf:
        return None
    # where[size]: positions of the items of each size not yet fixed, so that a prefix's classes
    # are counted by bisection instead of a pass over the items (the same classes as _classes).
    where: dict[int, list[int]] = {}
    for j, v in enumerate(values):
        if 0 < v <= s:
            where.setdefault(v, []).append(j)
    picked: list[int] = []
    end = len(values)  # the items left to choose from are values[:end], sizes not yet fixed
    while s > 0:
        def reaches(m: int) -> bool:  # can values[:m + 1] (unfixed sizes) make s with `need` items?
            prefix = ((v, bisect_right(where[v], m)) for v in sorted(where) if v <= s)
            return _bounded_counts([(v, c) for v, c in prefix if c], s, inf)[s] <= need

        lo, hi = 0, end - 1  # reaches(end - 1) holds
        while lo < hi:
            mid = (lo + hi) // 2
            if reaches(mid):
                hi = mid
            else:
                lo = mid + 1
        size = values[lo]
        same = where.pop(size)  # this size is settled: its items up to lo, no more of it
        same = same[:bisect_right(same, lo)]
        picked.extend(same)
        s -= size * len(same)
        need -= len(same)
        end = lo
    return [sizes[j][0] for j in sorted(picked)]


def _pick_by_items(sizes: list, values: list[int], s: int) -> list | None:
    """:func:`pick_subset` by the item-by-item 0/1 table (``took[i, t]``: item i first
    improves sum t), read back from the last item; the same subset, cheaper for few items.

    The fewest items ``need`` comes first from the table of distinct sizes; then the table
    stops at the first item that reaches ``s`` with ``need`` items (the chosen subset's latest
    item: no later item improves ``s``), and leaves out the c-th item of a size when
    ``c > min(need, s // size)`` (the chosen subset takes the earliest items of each size, at
    most that many): the subset read back is the same, from fewer passes.
    """
    inf = len(sizes) + 1
    need = int(_bounded_counts(_classes(values, len(values), s), s, inf)[s])
    if need >= inf:
        return None
    if s == 0:
        return []
    best = np.full(s + 1, inf, dtype=np.int64)
    best[0] = 0
    took = np.zeros((len(values), s + 1), dtype=bool)
    seen: Counter = Counter()
    last = len(values) - 1
    for i, size in enumerate(values):
        if 0 < size <= s:
            seen[size] += 1
            if seen[size] > min(need, s // size):
                continue
            cand = best[:s + 1 - size] + 1                  # from items 0..i-1
            tail = best[size:]
            np.less(cand, tail, out=took[i, size:])
            np.minimum(tail, cand, out=tail)
            if best[s] <= need:
                last = i
                break
    picked = []
    for i in range(last, -1, -1):
        if s == 0:
            break
        if took[i, s]:
            picked.append(sizes[i][0])
            s -= values[i]
    return picked[::-1]


def min_count_subset(sizes: list[tuple[object, int]], target: int) -> list | None:
    """Fewest items whose sizes sum exactly to ``target``.

    Parameters
    ----------
    sizes : list of (item, size)
        Candidate items in preference order (ties as in :func:`pick_subset`).
    target : int

    Returns
    -------
    list of item or None
        None if no subset sums to ``target``.

    Examples
    --------
    >>> min_count_subset([("a", 54), ("b", 48), ("c", 46), ("d", 42)], 144)
    ['a', 'b', 'd']
    >>> min_count_subset([("a", 5)], 3) is None
    True
    """
    return pick_subset(sizes, target)


def distinct_sizes(items: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The first item of each size: groups of equal size are interchangeable as the one cut.

    Examples
    --------
    >>> distinct_sizes([("a", 4), ("b", 4), ("c", 2)])
    [('a', 4), ('c', 2)]
    """
    seen: set[int] = set()
    return [(g, f) for g, f in items if not (f in seen or seen.add(f))]


def exact_k_subset(items: list[tuple[object, int]], need: int, k: int) -> list | None:
    """``k`` of ``items`` (``[(item, size)]``, sizes >= 0) whose sizes sum to ``need`` exactly,
    the earliest items preferred (the colexicographic least subset); None when there are none.

    Dynamic programming over (count, sum) (Cormen et al., *Introduction to Algorithms*, 3rd
    ed., ch. 35.5, with the item count fixed), each count's reachable sums one Python integer
    used as a bitset (bit t: some items so far sum to t): an item is k shifts and ors of
    ``need + 1``-bit integers instead of passes over a ``(k + 1) x (need + 1)`` table, and the
    rows kept for the walk back take a bit per sum, not a byte. The walk back from the last
    item takes item i when its count and sum were not reachable before it.

    Examples
    --------
    >>> exact_k_subset([("a", 5), ("b", 3), ("c", 2), ("d", 3)], 9, 2) is None
    True
    >>> exact_k_subset([("a", 5), ("b", 3), ("c", 2), ("d", 3), ("e", 1)], 6, 2)
    ['b', 'd']
    >>> exact_k_subset([("a", 4), ("b", 2), ("c", 2)], 6, 2)
    ['a', 'b']
    """
    mask = (1 << (need + 1)) - 1
    rows = [1] + [0] * k                       # rows[c]: sums reachable with c items so far
    before = []                                # rows before each item (lists are replaced, not changed)
    for _, size in items:
        before.append(rows)
        if size <= need:
            rows = [rows[0]] + [rows[c] | ((rows[c - 1] << size) & mask) for c in range(1, k + 1)]
    if not (rows[k] >> need) & 1:
        return None
    picked, c, t = [], k, need
    for i in range(len(items) - 1, -1, -1):
        if c == 0:
            break
        if not (before[i][c] >> t) & 1:         # item i is needed
            picked.append(items[i][0])
            c, t = c - 1, t - items[i][1]
    return picked[::-1]
