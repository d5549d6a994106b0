"""Spare hosts spent where a nested band layout's pods miss whole columns: a second pass.

A nested band layout (:mod:`rankmap.placement.nested_bands_layout`) lays each band of ``H``
stages as pods side by side, each pod's ToR groups in sub-bands of ``s`` rows inside its
columns; a pod whose hosts in a sub-band are not a multiple of ``s`` ends part way down a
column (the column it shares with its neighbour sends a pipeline hop across the pod and ToR
tiers inside the band), and a pod whose upper and lower parts differ in width sends the
columns between across the pod tier. The hosts left over once the grid is full
(``sum(free) - R * C``) may stay unused at no cost, so where they let a pod drop the hosts
it has beyond a block of whole columns of its band (:func:`clean_cut`), those hops go.
Which band a pod lands in is known only once the bands are filled, so this is a second
pass: lay the grid, read each pod's band, cut the pods (fewest hosts first) to such blocks
within the spare hosts (:func:`pod_trimmed`), and lay the grid again; :data:`PASSES` times.

On the deep-pipeline benchmark at 100,000 hosts (32 stages), 25% busy: 284 hosts per
stage, 194 spare hosts, 161 of them spent leaving out the smallest pod; the 33 left make 22
of the 48 pods whole blocks (the other 26 would need 145 more), and the best nested start
goes 8,526.7 -> 8,504.7 units (``w_col`` = 1); 50% busy: 189 hosts per stage, 134 spare,
29 left after the smallest pod, 19 pods whole blocks (29 more would need 186), 7,124.2 ->
7,117.4 units, and 7,108.4 with the second smallest pod left out instead (:data:`LEFT_OUT`).

References
----------
The cost of a block of ``r`` rows and ``c`` columns is its boundary (Bollobas and Leader,
"Edge-isoperimetric inequalities in the grid", Combinatorica 11 (1991)): a block whose last
column is partly filled has one more edge step.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import numpy as np

from rankmap.placement.band_pods import without_smallest_pods
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.nested_bands_layout import (
    RAGGED,
    _even_heights,
    _first_heights,
    _heights,
    _last_heights,
    _mixed_heights,
    _spread_heights,
    nested_band_cells,
    trimmed,
)

__all__ = ["LEFT_OUT", "PASSES", "band_index", "clean_cut", "pod_trimmed", "retrimmed_starts"]

# Second passes per layout (each reads the bands of the one before; passes 4-6 found no
# cheaper layout on the deep-pipeline benchmark).
PASSES = 3
# Which pods are left out for the spare hosts: the smallest first (0), and the second
# smallest first (1, where it fits): the pods left differ, and so do their clean cuts
# (deep pipeline, 100,000 hosts, 50% busy: best start 7,117.4 -> 7,108.4 units).
LEFT_OUT = 2
# Pods with more groups than this keep their hosts (2**K splits tried).
MAX_SPLIT_GROUPS = 8
# The row splits of the first pass (:mod:`rankmap.placement.nested_bands_layout`).
SPLITS = (_heights, _even_heights, _last_heights, _first_heights, _mixed_heights, _spread_heights)


def band_index(cells: np.ndarray, heights: list, groups: int) -> np.ndarray:
    """``band[K]``: per ToR group the index of the band (of ``heights[B][m]``, rows per
    sub-band, summing to ``R``) it lies in; -1 for a group in no band or in more than one.

    Examples
    --------
    >>> band_index(np.array([[0, 1], [0, 1], [2, 2], [2, 1]]), [[1, 1], [2]], 4).tolist()
    [0, -1, 1, -1]
    """
    index_row = np.concatenate([[b] * sum(band) for b, band in enumerate(heights)])   # (R,)
    g = cells.ravel()                                                                  # (R * C,)
    at = index_row[np.repeat(np.arange(cells.shape[0]), cells.shape[1])]               # (R * C,)
    first = np.full(groups, len(heights))
    last = np.full(groups, -1)
    np.minimum.at(first, g, at)
    np.maximum.at(last, g, at)
    return np.where(first == last, first, -1)


def clean_cut(sizes: list[int], band: list[int]) -> tuple[int, list[int]] | None:
    """The fewest hosts a pod of groups ``sizes[k]`` drops to lie in a band of two
    sub-bands (``band = [s1, s2]`` rows) as a block of whole columns, ``w`` wide in both:
    over every split of its groups into an upper and a lower half, ``w`` the most whole
    columns both halves fill; each half's cut is taken first from its groups' hosts past a
    whole column (the group farthest past first, then the group index), then from its
    largest groups, so that where the half holds two groups both fill whole columns.
    Returns ``(hosts dropped, sizes after)``; None for another band shape or more than
    :data:`MAX_SPLIT_GROUPS` groups.

    Examples
    --------
    Groups of 40, 47, 44 and 45 hosts, sub-bands of 3 rows: 40 + 47 = 87 = 29 * 3 over and
    44 + 45 = 89 below; the lower half drops 2 (from the group of 44, 2 past 42), leaving a
    block 29 columns wide, the groups of 42 and 45 whole columns each; the upper half's 40
    (1 past 39) and 47 (2 past) cannot both fill whole columns without dropping 3 more.

    >>> clean_cut([40, 47, 44, 45], [3, 3])
    (2, [40, 47, 42, 45])
    """
    if len(band) != 2 or not 2 <= len(sizes) <= MAX_SPLIT_GROUPS:
        return None
    n, (s1, s2) = sum(sizes), band
    best = None
    for mask in range(1, (1 << len(sizes)) - 1):
        upper = sum(a for i, a in enumerate(sizes) if mask >> i & 1)
        w = min(upper // s1, (n - upper) // s2)
        if best is None or n - (s1 + s2) * w < best[0]:
            best = (n - (s1 + s2) * w, mask, w)
    cut, mask, w = best
    after = list(sizes)
    for inside, s in ((True, s1), (False, s2)):
        half = [i for i in range(len(sizes)) if bool(mask >> i & 1) == inside]
        extra = sum(sizes[i] for i in half) - s * w
        for i in sorted(half, key=lambda i: (-(after[i] % s), i)):      # hosts past a whole column
            take = min(extra, after[i] % s)
            after[i] -= take
            extra -= take
        for i in sorted(half, key=lambda i: (-after[i], i)):            # then the largest groups
            take = min(extra, after[i])
            after[i] -= take
            extra -= take
    return cut, after


def pod_trimmed(problem: GridProblem, band: np.ndarray, heights: list) -> tuple[int, ...]:
    """``free[K]`` with as many pods as the spare hosts allow cut to blocks of whole columns
    of their band (:func:`clean_cut`; ``band[K]`` the band index of each group, ``heights``
    its sub-band heights), the pods that drop fewest hosts first, then the pod index. Pods
    with a group in no band or in another band than the rest keep their hosts.

    Examples
    --------
    Two rows of 3 on one pod of groups 3 and 4 (one band of two sub-bands of one row): 7
    hosts, 1 spare; the pod drops 1 host, from the group of 4, for two rows of 3.

    >>> p = GridProblem(2, 3, (3, 4), 10, 1, domains=((0, 0),), weights=(1.0, 1.0))
    >>> pod_trimmed(p, np.array([0, 0]), [[1, 1]])
    (3, 3)
    """
    free = np.asarray(problem.free, dtype=np.int64).copy()
    dom = np.asarray(problem.domains[0])
    spare = int(free.sum()) - problem.rows * problem.cols
    cuts = []
    for p in range(int(dom.max()) + 1):
        groups = np.flatnonzero((dom == p) & (free > 0))
        if groups.size and band[groups].min() >= 0 and np.unique(band[groups]).size == 1:
            found = clean_cut(free[groups].tolist(), heights[band[groups[0]]])
            if found is not None:
                cuts.append((found[0], p, groups, found[1]))
    for cut, p, groups, after in sorted(cuts, key=lambda c: c[:2]):
        if 0 < cut <= spare:
            spare -= cut
            free[groups] = after
    return tuple(int(f) for f in free)


def retrimmed_starts(problem: GridProblem) -> Iterator[np.ndarray]:
    """Nested band layouts of two sub-bands per band whose bands differ in shape (the
    layouts of :func:`~rankmap.placement.nested_bands_layout.nested_bands_starts` whose
    bands each take the pods that round best in them), the smallest pods left out (or,
    the :data:`LEFT_OUT` ways of
    :func:`~rankmap.placement.band_pods.without_smallest_pods`, the second smallest pod
    first), laid again :data:`PASSES` times with the spare hosts spent by
    :func:`pod_trimmed` on the bands of the pass before; every pass's layout is yielded
    (the caller keeps the best). None on a one-tier fabric. Work is counted (layouts),
    never timed."""
    if not problem.domains or problem.rows < 2:
        return
    bases = [without_smallest_pods(problem)]
    for first in range(1, LEFT_OUT):                  # where that pod fits the spare hosts
        free = without_smallest_pods(problem, first)
        if free != problem.free and free not in bases:
            bases.append(free)
    for free in bases:
        yield from _passes(dataclasses.replace(problem, free=free))


def _passes(base: GridProblem) -> Iterator[np.ndarray]:
    """:func:`retrimmed_starts` on ``base``, whose pods left out are already left out."""
    seen = set()
    for s, split, ragged in itertools.product(range(1, 5), SPLITS, RAGGED):
        heights = split(base.rows, s, 2)
        key = (tuple(map(tuple, heights)), ragged)
        if 2 * s > base.rows or key in seen or len(set(key[0])) < 2:
            continue
        seen.add(key)
        cells = nested_band_cells(dataclasses.replace(base, free=trimmed(base, s)), s, 2, heights, ragged,
                                  part=True, fit=True)
        for _ in range(PASSES if cells is not None else 0):
            band = band_index(cells, heights, len(base.free))
            cells = nested_band_cells(dataclasses.replace(base, free=pod_trimmed(base, band, heights)), s, 2,
                                      heights, ragged, part=True, fit=True)
            if cells is None:
                break
            yield cells
