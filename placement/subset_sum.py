"""Fewest whole ToR groups that fill a number of hosts exactly: 0/1 subset-sum with fewest items.

The constructive layouts (:mod:`rankmap.placement.snake_layout`,
:mod:`rankmap.placement.band_layout`) fill grid rows with whole ToR groups, since every
group a row uses costs one ring crossing. Dynamic programming over sums, as in the
textbook subset-sum algorithm (Cormen et al., *Introduction to Algorithms*, 3rd ed.,
ch. 35.5), with the item count minimised instead of feasibility.
"""

from __future__ import annotations

import numpy as np

__all__ = ["min_count_subset", "subset_table", "walk_subset", "distinct_sizes"]


def subset_table(sizes: list[tuple[int, int]], target: int) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic programme's tables for every sum up to ``target``.

    Parameters
    ----------
    sizes : list of (item, size)
        Items in preference order (ties go to earlier items).
    target : int
        The largest sum of interest.

    Returns
    -------
    best : ndarray
        ``best[target + 1]``: fewest items summing exactly to each s (``len(sizes) + 1``
        where no subset does).
    took : ndarray
        ``took[len(sizes), target + 1]`` (bool): item i is in the best subset for s among
        items 0..i.

    Examples
    --------
    >>> best, _ = subset_table([("a", 2), ("b", 3)], 5)
    >>> best.tolist()
    [0, 3, 1, 1, 3, 2]
    """
    inf = len(sizes) + 1
    best = np.full(target + 1, inf, dtype=np.int64)
    best[0] = 0
    took = np.zeros((len(sizes), target + 1), dtype=bool)
    for i, (_, size) in enumerate(sizes):
        if 0 < size <= target:
            cand = best[:target + 1 - size] + 1  # from items 0..i-1 (computed before the update)
            better = cand < best[size:]
            took[i, size:] = better
            best[size:] = np.where(better, cand, best[size:])
    return best, took


def walk_subset(sizes: list[tuple[int, int]], took: np.ndarray, s: int) -> list:
    """The items of the best subset for sum ``s``, read back from ``took`` (see
    :func:`subset_table`), in the order of ``sizes``."""
    picked = []
    for i in range(len(sizes) - 1, -1, -1):
        if s == 0:
            break
        if took[i, s]:
            picked.append(sizes[i][0])
            s -= sizes[i][1]
    return picked[::-1]


def min_count_subset(sizes: list[tuple[int, int]], target: int) -> list | None:
    """Fewest items whose sizes sum exactly to ``target``.

    Parameters
    ----------
    sizes : list of (item, size)
        Candidate items in preference order (ties go to earlier items).
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
    best, took = subset_table(sizes, target)
    if best[target] > len(sizes):
        return None
    return walk_subset(sizes, took, target)


def distinct_sizes(items: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The first item of each size: groups of equal size are interchangeable as the one cut.

    Examples
    --------
    >>> distinct_sizes([("a", 4), ("b", 4), ("c", 2)])
    [('a', 4), ('c', 2)]
    """
    seen: set[int] = set()
    return [(g, f) for g, f in items if not (f in seen or seen.add(f))]
