"""Nested bands: pods in bands of stages, each pod's ToR groups in sub-bands inside it.

On a fabric of several tiers the two tiers want blocks of different heights: a ToR group
of ``f`` hosts costs least as a block of about ``sqrt(f * w_col / w_row)`` stages, a pod of
four such groups as a block about twice as tall (a block of ``h`` rows and ``w`` columns
costs ``h * w_row`` ring crossings plus ``w * w_col`` pipeline hops on its boundary). A
band layout per tier (:mod:`rankmap.placement.band_layout`) meets one of the two heights;
this layout meets both at once: the grid is cut into *bands* of ``m * s`` rows, every band
holds whole pods (side by side, each in its own columns), and each pod's ToR groups are
shared out over its ``m`` *sub-bands* of ``s`` rows, each group a block of ``s`` rows inside
the pod's columns. Every row then crosses its ring once per group piece and once per pod
it passes, and the pipeline hops cross a pod only between bands.

Per band, the pods are the fewest whole pods whose free hosts fill the band exactly
(:mod:`rankmap.placement.subset_sum`; with no exact subset the last one is cut, its rest
kept for the next band); the groups of each pod go to the sub-bands
(:mod:`rankmap.placement.band_split`) by dynamic programming over the sub-band's total (it
must be exactly ``s * C`` hosts), keeping each pod's share of every sub-band as near its
share of the band as the group sizes allow, so that a pod's columns in one sub-band line
up with its columns in the next (a pod whose upper part is wider than its lower part sends
the difference of pipeline hops across the pod tier). Pods
are then ordered along the band, and each pod's groups inside its shares, so that as few
pipeline hops as possible step across group and pod edges or cross between misaligned pod
edges (exactly, by dynamic programming over subsets, :mod:`rankmap.placement.pod_order`;
greedily in bands of more pods). Sub-bands are laid as in the band layout: group by group,
each group's columns dealt round robin over the sub-band's rows.

References
----------
Arnold (arXiv 2509.15940): DP and PP groups kept within the fewest minipods; MegaScale
(NSDI 2024): pods of ToR groups under a three-layer Clos.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import numpy as np

from rankmap.placement.band_pods import band_pods, without_smallest_pods
from rankmap.placement.band_split import split_band
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pod_fit import band_fits

__all__ = ["nested_band_cells", "nested_bands_starts", "trimmed"]

# Columns of misalignment worth one pod share that does not fill whole columns of its
# sub-band (its edge steps by a column between rows: a pipeline hop across the pod on
# both tiers), tried in turn by :func:`nested_bands_starts`; 0 keeps the shares nearest
# the pod's fraction only.
RAGGED = (0.0, 2.0)
# Pods per band: the fewest that fill it (False), or each band its share of the pods left
# (True, :func:`~rankmap.placement.band_pods.band_pods`); both are tried.
BALANCED = (False, True)


def nested_bands_starts(problem: GridProblem) -> Iterator[np.ndarray]:
    """Nested band layouts of ``problem`` for sub-bands of 1-4 rows and 2-4 sub-bands per
    band, the rows that do not fill a band laid six ways (:func:`_heights`,
    :func:`_even_heights`, :func:`_last_heights`, :func:`_first_heights`, :func:`_mixed_heights`,
    :func:`_spread_heights`), each with the pod shares of every
    :data:`RAGGED` weight, the pods per band of both :data:`BALANCED` ways, and with the
    groups as they are and :func:`trimmed` (those that fit the grid and succeed), then
    :func:`_fitted_starts`; none on a one-tier fabric. A generator: at 100,000 hosts each start
    is ~1 MB and the caller keeps only the best few."""
    if not problem.domains or problem.rows < 2:
        return
    seen = set()
    for s, m, split, ragged, trim, balanced in itertools.product(
            range(1, 5), range(2, 5), (_heights, _even_heights, _last_heights, _first_heights, _mixed_heights,
                                          _spread_heights), RAGGED,
            (0, 1, 2), BALANCED):
        if s * m > problem.rows:
            continue
        heights = split(problem.rows, s, m)
        if (tuple(map(tuple, heights)), ragged, trim, balanced) in seen:
            continue
        seen.add((tuple(map(tuple, heights)), ragged, trim, balanced))
        sub = problem
        if trim == 2:
            sub = dataclasses.replace(sub, free=without_smallest_pods(sub))
        if trim:
            sub = dataclasses.replace(sub, free=trimmed(sub, s))
        cells = nested_band_cells(sub, s, m, heights, ragged, balanced, part=trim == 2)
        if cells is not None:
            yield cells
    yield from _fitted_starts(problem)


def _fitted_starts(problem: GridProblem) -> list[np.ndarray]:
    """Layouts of two sub-bands per band whose bands differ in shape, the smallest pods left
    out and the groups :func:`trimmed`, each band's pods chosen by ``fit`` (deep pipeline,
    100,000 hosts, 25% busy: best nested start 8,537.7 -> 8,526.7 units)."""
    out, seen = [], set()
    sub = dataclasses.replace(problem, free=without_smallest_pods(problem))
    for s, split, ragged in itertools.product(range(1, 5), (_heights, _even_heights, _last_heights, _first_heights,
                                                             _mixed_heights, _spread_heights), RAGGED):
        heights = split(problem.rows, s, 2)
        key = (tuple(map(tuple, heights)), ragged)
        if 2 * s > problem.rows or key in seen or len(set(key[0])) < 2:
            continue
        seen.add(key)
        for aligned in (False, True):
            cells = nested_band_cells(dataclasses.replace(sub, free=trimmed(sub, s)), s, 2, heights, ragged,
                                      part=True, fit=True, aligned=aligned)
            if cells is not None:
                out.append(cells)
    return out


def trimmed(problem: GridProblem, s: int) -> tuple[int, ...]:
    """``free[K]`` with as many groups as the spare hosts allow cut down to a multiple of
    ``s`` (fewest hosts dropped first, then the group index): a group that fills whole
    columns of its sub-band has straight edges, so no pipeline hop steps across them.

    Examples
    --------
    Two rows of 7 on groups of 4, 5 and 8 hosts (3 spare), sub-bands of 3 rows: the group of
    4 loses one host, the group of 5 two; the group of 8 would need two more.

    >>> trimmed(GridProblem(2, 7, (4, 5, 8), 10, 1), 3)
    (3, 3, 8)
    """
    free = list(problem.free)
    spare = sum(free) - problem.rows * problem.cols
    for g in sorted(range(len(free)), key=lambda g: (free[g] % s, g)):
        cut = free[g] % s
        if 0 < cut <= spare:
            free[g] -= cut
            spare -= cut
    return tuple(free)


def _heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: bands of ``m`` sub-bands of ``s`` rows, the last sub-band
    taking the rows left over."""
    subs = [min(s, rows - q) for q in range(0, rows, s)]
    return [subs[i:i + m] for i in range(0, len(subs), m)]


def _last_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: bands of ``m`` sub-bands of ``s`` rows, the rows left over
    shared out over the last band's sub-bands (e.g. 32 rows, s=3, m=2: four bands of 3 + 3
    rows and one of 4 + 4)."""
    bands = rows // (s * m)
    last = rows - (bands - 1) * s * m
    return [[s] * m] * (bands - 1) + [[last // m + (j >= m - last % m) for j in range(m)]]


def _first_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """:func:`_last_heights` with the taller band first (e.g. 32 rows, s=3, m=2: one band of
    4 + 4 rows, then four of 3 + 3): the pods left after the earlier bands differ, so the
    band that takes the leftover rows gets other pods."""
    return _last_heights(rows, s, m)[::-1]


def _mixed_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: bands of ``m`` sub-bands of ``s - 1`` rows first, then as
    many bands of ``m`` sub-bands of ``s`` rows as leave a whole number of the shorter bands
    (e.g. 32 rows, s=3, m=2: two bands of 2 + 2 rows, then four of 3 + 3); :func:`_heights`
    when no such mix of both exists. Where ToR groups are best about ``s - 1/2`` rows tall
    (and pods ``m`` times that) and ``s * m`` does not divide the rows, most of the grid then
    takes the taller blocks and the rest the shorter, every band still of whole pods.

    >>> _mixed_heights(32, 3, 2)
    [[2, 2], [2, 2], [3, 3], [3, 3], [3, 3], [3, 3]]
    >>> _mixed_heights(12, 3, 2) == _heights(12, 3, 2)
    True
    """
    tall, short = s * m, (s - 1) * m
    for a in range(rows // tall, 0, -1) if short else ():
        if (rows - a * tall) % short == 0 and rows > a * tall:
            return [[s - 1] * m] * ((rows - a * tall) // short) + [[s] * m] * a
    return _heights(rows, s, m)


def _spread_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """:func:`_mixed_heights` with its shorter bands spread evenly among the taller ones
    (short band ``i`` of ``b`` at position ``i * n // b`` of the ``n`` bands) instead of all
    first: the pods left for each band differ, so the bands find other exact fills (e.g. the
    deep-pipeline benchmark at 100,000 hosts, 50% busy: 45.910 -> 45.884 TB, gap 1.98 -> 1.92%).

    >>> _spread_heights(32, 3, 2)
    [[2, 2], [3, 3], [3, 3], [2, 2], [3, 3], [3, 3]]
    """
    bands = _mixed_heights(rows, s, m)
    short = [b for b in bands if b[0] < s]
    tall = [b for b in bands if b[0] >= s]
    if not short or not tall:
        return bands
    n = len(bands)
    at = {i * n // len(short) for i in range(len(short))}
    return [short.pop() if i in at else tall.pop() for i in range(n)]


def _even_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: as many bands as ``rows / (s * m)`` rounds to, the rows
    shared out as evenly as possible over the bands and, in each, over its ``m`` sub-bands
    (e.g. 32 rows, s=3, m=2: five bands of 6, 6, 6, 7, 7 rows, sub-bands of 3 and 4)."""
    bands = max(1, round(rows / (s * m)))
    out = []
    for b in range(bands):
        height = rows // bands + (b >= bands - rows % bands)
        k = min(m, height)
        out.append([height // k + (j >= k - height % k) for j in range(k)])
    return out


def nested_band_cells(problem: GridProblem, s: int, m: int, heights: list | None = None,
                      ragged: float = 0.0, balanced: bool = False, part: bool = False,
                      fit: bool = False, aligned: bool = False) -> np.ndarray | None:
    """Placement ``cells[R, C]`` of bands of ``m`` sub-bands of ``s`` rows (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With ``domains[0][K]``, the pod of each ToR group.
    s : int
        Rows per sub-band (the last sub-band of the grid takes the rows left over).
    m : int
        Sub-bands per band.
    heights : list of list of int, optional
        ``heights[B][m]``: the rows of each sub-band of each band, summing to R (default:
        ``m`` sub-bands of ``s`` rows per band, the last sub-band taking the rows left over).
    ragged : float
        Columns of misalignment that a pod share not filling whole columns of its sub-band
        is worth (:data:`RAGGED`).
    balanced : bool
        Each band takes its share of the pods left rather than the fewest (:data:`BALANCED`).
    part : bool
        A band that whole pods cannot fill takes whole groups of one more pod where they fill
        it (:func:`~rankmap.placement.band_pods.part_pod`) before cutting a group.
    fit : bool
        Bands of several shapes: each takes, among its fills, the pods that round best in it
        (:func:`~rankmap.placement.pod_fit.band_fits`) rather than the largest first.
    aligned : bool
        In bands of two sub-bands, the pods' splits are chosen again along the pods' order
        so that their edges line up between the sub-bands
        (:func:`~rankmap.placement.aligned_shares.aligned_shares`), and the pods reordered.

    Returns
    -------
    ndarray or None
        ``cells[R, C]`` within every group's free hosts, or None when the free hosts do not
        hold the grid or a band's sub-bands cannot be filled exactly.

    Examples
    --------
    Four rows of 4 hosts; two pods, each of two groups of 4 hosts: one band of two
    sub-bands of two rows, each pod two columns wide, its groups one above the other.

    >>> p = GridProblem(4, 4, (4, 4, 4, 4), 10, 1, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
    >>> nested_band_cells(p, 2, 2).tolist()
    [[0, 0, 2, 2], [0, 0, 2, 2], [1, 1, 3, 3], [1, 1, 3, 3]]
    """
    R, C = problem.rows, problem.cols
    free = np.asarray(problem.free, dtype=np.int64).copy()
    if free.sum() < R * C:
        return None
    dom = np.asarray(problem.domains[0])
    cells = np.empty((R, C), dtype=np.int64)
    r = 0
    heights = heights or _heights(R, s, m)
    fits = band_fits(problem, heights) if fit else {}
    for band in heights:
        pieces = band_pods(dom, free, sum(band) * C, balanced, part, fits.get(tuple(band)))
        if pieces is None:
            return None
        split = split_band(pieces, band, C, ragged, tuple(problem.weights[:2]), aligned)
        if split is None:
            return None
        for h, row in zip(band, split):
            _lay_sub_band(cells, r, h, row)
            r += h
    return cells


def _lay_sub_band(cells: np.ndarray, r0: int, height: int, pieces: list[tuple[int, int]]) -> None:
    """Lay ``pieces`` (``[(group, hosts)]``, ``height * C`` hosts in all) on rows
    ``r0 .. r0 + height - 1`` left to right, each piece's columns dealt round robin over
    the rows (every row gets exactly C; a piece's rows differ by at most one column)."""
    flat = np.fromiter(itertools.chain.from_iterable(pieces), dtype=np.int64, count=2 * len(pieces))
    groups, hosts = flat[0::2], flat[1::2]                           # (pieces,) each
    q, rem = np.divmod(hosts, height)
    nxt = (np.cumsum(rem) - rem) % height                            # the row each piece's extras start on
    # piece i's extra columns go to rows nxt_i, nxt_i + 1, ... (mod height): widths[row, piece]
    widths = q + ((np.arange(height)[:, None] - nxt) % height < rem)
    cells[r0:r0 + height] = groups[None].repeat(height, axis=0).repeat(widths.ravel()).reshape(height, -1)
