"""Pod blocks: bands of whole pods, each pod a block with straight edges, its ToR groups
laid inside the block in the cheapest of a few snake fills.

The nested band layout (:mod:`rankmap.placement.nested_bands_layout`) cuts a band into
sub-bands that every pod of the band shares, so a pod's share of each sub-band must be
made of whole groups. A pod of four ToR groups splits 2 : 2 or 1 : 3, which matches sub-bands
of 3 + 3 or 2 + 2 rows but not 2 + 3: in a band of five rows each pod is then wider in one
sub-band than in the other, and the pipeline hops of the columns between cross the pod tier
(deep pipeline, 100,000 hosts, 50% busy, bands 5,5,5,5,6,6: 34-40 such hops per five-row band
against 5-10 per band of 4 or 6 rows, ~120 units, more than the ring crossings the shorter
pods save). Here each pod keeps the same columns on every row of its band (up to one column,
its hosts dealt round robin over the rows), and its groups fill that block on their own: the
block's rows are cut into one to three stacked parts, filled column by column in a snake
(left to right in the first part, right to left in the next, ...) by the groups in some
order, so a group that does not fit one part goes on in the part below it at the same side.
Every such fill is priced on the ToR tier (ring pieces per row, pipeline hops between rows
inside the block: the pod tier is the same for all) and the cheapest kept, so the pod's
own inside layout no longer depends on its neighbours.

Measured on the deep-pipeline benchmark at 100,000 hosts (units of 1e6): bands 5,5,5,5,6,6
at 50% busy 7,198.7 -> 7,134.2 with blocks, bands 6,6,6,7,7 at 25% busy 8,632.4 -> 8,556.1
(pod tier 2,851.7 -> 2,740.7, ToR tier 5,780.7 -> 5,815.4: four groups cut no better 3 : 4 in
a block than in sub-bands); neither beats the best nested start (7,124.2 and 8,526.7), because
a band of an odd number of rows there holds a fractional number of average pods (C / mean
pod ~1.5 pods a row: 7.5 in five rows, 10.5 in seven), so it takes 7 large or 8 small pods.
The planner therefore does not lay these as starts (200 of them cost ~16 s CPU at that size);
:func:`~rankmap.placement.nested_bands_layout.nested_band_cells` offers them (``blocks``).

References
----------
Arnold (arXiv 2509.15940): DP and PP groups kept within the fewest minipods; the block
shapes as in 2-D domain decomposition (a block exchanges across its perimeter).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np

from rankmap.placement.band_pods import band_pods
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_search import tier_cost

__all__ = ["pod_block_cells", "blocks_if_cheaper", "MAX_PERMUTED_GROUPS"]

# Pods with more pieces than this try only their pieces' given order and its reverse.
MAX_PERMUTED_GROUPS = 5


def pod_block_cells(problem: GridProblem, bands: list[int], balanced: bool = False,
                    part: bool = False) -> np.ndarray | None:
    """Placement ``cells[R, C]`` of bands of ``bands[B]`` rows (summing to R), each band whole
    pods side by side (:func:`~rankmap.placement.band_pods.band_pods`, ``balanced`` and
    ``part`` as there), each pod's groups laid inside its block by :func:`_pod_fill`.

    Returns None when the free hosts do not hold the grid or a band cannot be filled.

    Examples
    --------
    Five rows of 4 hosts; two pods of two groups of 5 hosts each: each pod a block of two
    columns, each group the upper or lower half of its pod's block (two ring pieces a row,
    four hops between groups inside the pods, none across the pod edge).

    >>> p = GridProblem(5, 4, (5, 5, 5, 5), 10, 1, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
    >>> pod_block_cells(p, [5]).tolist()
    [[0, 0, 2, 2], [0, 0, 2, 2], [1, 0, 3, 2], [1, 1, 3, 3], [1, 1, 3, 3]]
    """
    R, C = problem.rows, problem.cols
    if sum(bands) != R:
        raise ValueError(f"band heights {bands} do not sum to the {R} rows")
    free = np.asarray(problem.free, dtype=np.int64).copy()
    if free.sum() < R * C:
        return None
    dom = np.asarray(problem.domains[0])
    cells = np.empty((R, C), dtype=np.int64)
    r = 0
    for h in bands:
        pods = band_pods(dom, free, h * C, balanced, part)
        if pods is None:
            return None
        _lay_band(cells, r, h, _straight_pods(pods, h), problem)
        r += h
    return cells


def blocks_if_cheaper(problem: GridProblem, cells: np.ndarray, r0: int, height: int, pods: list) -> bool:
    """Relay the band of rows ``r0 .. r0 + height - 1`` of ``cells`` (already laid, from the
    pods ``[[(group, hosts)]]``) as pod blocks where that costs less on the band's own rows
    (ring crossings and pipeline hops between its rows, every tier; the hops at its top and
    bottom edges cross every tier whatever the layout, as no pod or group lies in two
    bands); True when relaid."""
    band = dataclasses.replace(problem, rows=height)
    before = cells[r0:r0 + height].copy()
    _lay_band(cells, r0, height, _straight_pods(pods, height), problem)
    if tier_cost(band, cells[r0:r0 + height]) < tier_cost(band, before):
        return True
    cells[r0:r0 + height] = before
    return False


def _straight_pods(pods: list, height: int) -> list:
    """The pods in lay order: next the pod whose hosts bring the running total to a multiple
    of ``height`` (its right edge then steps by no column between rows), ties the given order."""
    out, carry, left = [], 0, list(pods)
    while left:
        i = min(range(len(left)), key=lambda i: ((carry + sum(n for _, n in left[i])) % height != 0, i))
        carry = (carry + sum(n for _, n in left[i])) % height
        out.append(left.pop(i))
    return out


def _lay_band(cells: np.ndarray, r0: int, height: int, pods: list, problem: GridProblem) -> None:
    """Lay one band: each pod's hosts dealt round robin over the rows as its columns
    (``widths[row]``), then its groups inside those columns by :func:`_pod_fill`."""
    col = np.zeros(height, dtype=np.int64)                # next free column per row
    nxt = 0
    for pod in pods:
        q, rem = divmod(sum(n for _, n in pod), height)
        widths = np.full(height, q, dtype=np.int64)
        widths[(nxt + np.arange(rem)) % height] += 1
        nxt = (nxt + rem) % height
        shift = col - col.min()
        block = _pod_fill(tuple(n for _, n in pod), tuple(shift.tolist()), tuple(widths.tolist()),
                          problem.w_row, problem.w_col)
        groups = np.array([g for g, _ in pod])
        for h in range(height):
            cells[r0 + h, col[h]:col[h] + widths[h]] = groups[block[h][shift[h]:shift[h] + widths[h]]]
        col += widths


@functools.lru_cache(maxsize=4096)
def _pod_fill(sizes: tuple, shift: tuple, widths: tuple, w_row: int, w_col: int) -> np.ndarray:
    """``block[h, W]``: the piece index (into ``sizes``) of each cell of a pod's block, row
    ``r`` holding columns ``shift[r] .. shift[r] + widths[r] - 1`` (-1 elsewhere); the
    cheapest on the ToR tier (``w_row`` per ring piece of a row, ``w_col`` per pipeline hop
    between two rows of the block) of every snake fill of :func:`_parts` and piece order
    (all orders of at most :data:`MAX_PERMUTED_GROUPS` pieces; first found wins ties)."""
    h = len(widths)
    W = max(s + w for s, w in zip(shift, widths))
    inside = np.zeros((h, W), dtype=bool)
    for r in range(h):
        inside[r, shift[r]:shift[r] + widths[r]] = True
    k = len(sizes)
    orders = list(itertools.permutations(range(k))) if k <= MAX_PERMUTED_GROUPS else [tuple(range(k)),
                                                                                       tuple(range(k))[::-1]]
    best, best_cost = None, None
    for parts in _parts(h):
        flat = _snake(inside, parts)                                   # (n,) flat cell indices in fill order
        labels = np.stack([np.repeat(o, np.asarray(sizes)[list(o)]) for o in orders])  # (O, n)
        grids = np.full((len(orders), h * W), -1, dtype=np.int64)
        grids[:, flat] = labels
        grids = grids.reshape(len(orders), h, W)
        same = grids[:, :, 1:] == grids[:, :, :-1]
        starts = (grids >= 0).sum(axis=(1, 2)) - (same & (grids[:, :, 1:] >= 0)).sum(axis=(1, 2))
        both = (grids[:, 1:] >= 0) & (grids[:, :-1] >= 0)
        hops = (both & (grids[:, 1:] != grids[:, :-1])).sum(axis=(1, 2))
        cost = w_row * starts + w_col * hops                             # (O,)
        i = int(np.argmin(cost))
        if best_cost is None or cost[i] < best_cost:
            best, best_cost = grids[i], cost[i]
    return best


def _parts(h: int) -> list[tuple[int, ...]]:
    """The ways of cutting ``h`` rows into one to three stacked parts (heights top first).

    >>> _parts(3)
    [(3,), (1, 2), (2, 1), (1, 1, 1)]
    """
    out = [(h,)]
    out += [(a, h - a) for a in range(1, h)]
    out += [(a, b, h - a - b) for a in range(1, h) for b in range(1, h - a)]
    return out


def _snake(inside: np.ndarray, parts: tuple) -> np.ndarray:
    """Flat indices of the block's cells in fill order: part by part (``parts`` rows each,
    top first), column by column inside a part, left to right in even parts and right to
    left in odd ones, top to bottom inside a column."""
    h, W = inside.shape
    out, r0 = [], 0
    for j, rows in enumerate(parts):
        cols = range(W) if j % 2 == 0 else range(W - 1, -1, -1)
        for c in cols:
            out += [r * W + c for r in range(r0, r0 + rows) if inside[r, c]]
        r0 += rows
    return np.array(out, dtype=np.int64)
