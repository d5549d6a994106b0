"""Which pods suit which band: the columns a pod loses to whole-column rounding in sub-bands
of each height.

A ToR group of ``a`` hosts laid as a block of ``s`` rows takes ``ceil(a / s)`` columns, not
``a / s``; a pod whose groups split into two sub-bands of ``s`` rows takes the wider of its
two halves and sends the columns by which they differ across the pod tier. These losses
depend on the group sizes modulo ``s``, so a pod that loses little in sub-bands of 4 rows
may lose much in sub-bands of 3 and the other way round. Where a layout's bands have sub-bands
of different heights (e.g. four bands of 3 + 3 rows and one of 4 + 4 for 32 stages), each
band prefers the pods whose loss in it is smallest against their mean loss over the
layout's bands (:func:`band_fits`), instead of the largest pods first.

References
----------
The cost of a block of ``r`` rows and ``c`` columns is its boundary (Bollobas and Leader,
"Edge-isoperimetric inequalities in the grid", Combinatorica 11 (1991)); here only its whole
columns are counted.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from rankmap.placement.grid_problem import GridProblem

__all__ = ["band_fits", "rounding_loss"]

# Pods with more groups than this count only their groups' own rounding (no split enumerated).
MAX_SPLIT_GROUPS = 8


def rounding_loss(groups: list[int], band: tuple[int, ...], w_pod: float = 1.0) -> float:
    """Columns (units of ``w_col``) a pod of ``groups[k]`` hosts loses to rounding in a band of
    sub-bands ``band[m]`` rows high: each group's ``ceil(a / s) - a / s`` in the lowest
    sub-band, plus, for two sub-bands of equal height, ``w_pod`` times the least column
    difference between the pod's halves over every split of its groups (the pod tier's
    misaligned columns) plus the wider half's rounding; 0 for a band of one sub-band.

    Examples
    --------
    Groups of 45, 46, 47 and 48 hosts: in sub-bands of 3 rows the groups lose
    0 + 2/3 + 1/3 + 0 columns, and the halves 45 + 48 and 46 + 47 (93 hosts each) take 31
    whole columns each, nothing more; in sub-bands of 4 the groups lose 3/4 + 1/2 + 1/4 + 0,
    and the same halves take 24 columns each for 23 1/4, 3/4 more.

    >>> rounding_loss([45, 46, 47, 48], (3, 3))
    1.0
    >>> rounding_loss([45, 46, 47, 48], (4, 4))
    2.25
    """
    s = min(band)
    loss = sum(math.ceil(a / s) - a / s for a in groups)
    if len(band) != 2 or band[0] != band[1] or not 2 <= len(groups) <= MAX_SPLIT_GROUPS:
        return loss
    total = sum(groups)
    best = math.inf
    for k in range(1, len(groups)):
        for upper in itertools.combinations(groups, k):
            u = math.ceil(sum(upper) / s)
            l = math.ceil((total - sum(upper)) / s)
            best = min(best, w_pod * abs(u - l) + max(u, l) - total / (2 * s))
    return loss + best


@functools.lru_cache(maxsize=4096)
def _loss(groups: tuple[int, ...], band: tuple[int, ...], w_pod: float) -> float:
    """:func:`rounding_loss`, memoised: :func:`band_fits` meets the same pods in every layout."""
    return rounding_loss(list(groups), band, w_pod)


def band_fits(problem: GridProblem, heights: list) -> dict:
    """``{band: prefer[D]}`` per distinct band shape of ``heights`` (``heights[B][m]``, rows
    per sub-band): each pod's :func:`rounding_loss` in that band less its mean over the
    layout's bands (lower: suits the band better), with ``w_pod`` the pod tier's weight over
    the ToR tier's; empty when every band has the same shape (each pod's preference would be
    the same everywhere).

    Examples
    --------
    Two pods, of groups (45, 46, 47, 48) and (48, 48, 48, 48), bands of 3 + 3 and 4 + 4
    rows: the second pod loses nothing in either; the first loses 1 in the first, 2.25 in
    the second, so the first band prefers it and the second prefers the other.

    >>> p = GridProblem(14, 20, (45, 46, 47, 48) + (48,) * 4, 5, 1, domains=((0,) * 4 + (1,) * 4,), weights=(1.0, 1.0))
    >>> {b: v.tolist() for b, v in band_fits(p, [[3, 3], [4, 4]]).items()}
    {(3, 3): [-0.625, 0.0], (4, 4): [0.625, 0.0]}
    """
    shapes = [tuple(b) for b in heights]
    if len(set(shapes)) < 2:
        return {}
    dom = np.asarray(problem.domains[0])
    free = np.asarray(problem.free)
    w_pod = problem.weights[1] / problem.weights[0] if problem.weights[0] else 1.0
    pods = [sorted(int(f) for f in free[dom == d] if f > 0) for d in range(int(dom.max()) + 1)]
    loss = {b: np.array([_loss(tuple(g), b, w_pod) if g else 0.0 for g in pods]) for b in set(shapes)}
    mean = sum(loss[b] for b in shapes) / len(shapes)
    return {b: loss[b] - mean for b in sorted(set(shapes))}
