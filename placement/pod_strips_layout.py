"""Pod strips: each pod a band of consecutive stages, its ToR groups in column strips.

Deep pipelines on a fabric of several tiers (rows of C hosts that fit inside one ToR
group, ``C <= max free``): a pod kept as one band of consecutive stages crosses the pod
tier only at the band's two edges, and inside the band its ToR groups take blocks of
consecutive stages by consecutive hosts. The best block shape trades ring crossings
(a block of ``c`` columns cuts every row it holds, ``w_row`` each) against pipeline hops
(a block of ``r`` rows leaves ``c`` hops at its top and bottom, ``w_col`` each), and a band
of ``h`` rows holds either strips of the whole band's height or strips cut in two or more
stacked blocks. So each pod chooses, from every way of putting its groups into strips
(compositions: ``[1, 1, 2]`` is two full-height strips and one strip of two stacked
blocks) and strip edges near the groups' share of the band, the one that costs least
inside the pod (the crossings at a pod's edges cross both tiers whatever its groups).

Examples
--------
Two pods of two groups of 6 hosts, 4 stages of 6 hosts: each pod holds two stages, as two
stacked blocks (no ring crossing; 18 hops cross ToR groups, 6 of them the pods too).

>>> p = GridProblem(4, 6, (6, 6, 6, 6), 10, 1, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
>>> pod_strips_cells(p).tolist()
[[0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2], [3, 3, 3, 3, 3, 3]]

References
----------
MegaScale (NSDI 2024): data-intensive ranks under one ToR group; Arnold (arXiv
2509.15940): DP and PP groups to pods first; the block shapes as in 2-D domain
decomposition (surface-to-volume: a block of r x c cells exchanges across its perimeter).
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from rankmap.placement.grid_problem import GridProblem

__all__ = ["pod_bands", "pod_strips_cells", "pod_strips_starts", "MAX_POD_GROUPS", "MAX_ORDERED", "WIDTH_WINDOW"]

# Pods of more ToR groups than this are not laid in strips (2 ** (groups - 1) compositions).
MAX_POD_GROUPS = 6
# Strip widths tried on either side of a strip's share of the band (columns).
WIDTH_WINDOW = 2
# Pods of at most this many ToR groups try every order of them (4! = 24 at most).
MAX_ORDERED = 4


def _compositions(n: int) -> list[tuple]:
    """Every ordered way of writing ``n`` as a sum of positive parts, in a fixed order."""
    out = []
    for cuts in itertools.product((False, True), repeat=n - 1):
        parts, size = [], 1
        for cut in cuts:
            if cut:
                parts.append(size)
                size = 1
            else:
                size += 1
        out.append(tuple(parts + [size]))
    return out


def pod_bands(problem: GridProblem, aligned: bool, rank: Callable = lambda room, d: (-room, d)) -> list[tuple]:
    """``[(pod, groups, first cell, cells)]``: pods (most free hosts first, then index) in
    consecutive row-major ranges of the grid, each about its share of the job by free
    hosts; with ``aligned``, the fewest boundaries inside a stage (a boundary between
    stages cuts no DP ring; :func:`_whole_stage_bounds`). Only as many pods as the job
    needs."""
    free = np.asarray(problem.free)
    dom = np.asarray(problem.domains[0])
    C, need = problem.cols, problem.rows * problem.cols
    pods = []
    for d in sorted(set(dom.tolist()), key=lambda d: rank(int(free[dom == d].sum()), d)):
        groups = sorted((int(g) for g in np.nonzero((dom == d) & (free > 0))[0]), key=lambda g: (-free[g], g))
        if groups:
            pods.append((d, groups, int(free[groups].sum())))
    used, room = [], 0
    for pod in pods:
        if room >= need:
            break
        used.append(pod)
        room += pod[2]
    if room < need:
        return []
    caps = np.array([p[2] for p in used])
    ideal = need * np.cumsum(caps) / caps.sum()                        # ideal[m]: boundaries by share
    if aligned:
        bounds = _whole_stage_bounds(caps, ideal, need, C)
    else:
        bounds, last = [], 0
        for k in range(len(used) - 1):
            lo, hi = max(last + 1, need - int(caps[k + 1:].sum())), last + int(caps[k])
            bounds.append(min(hi, max(lo, int(round(ideal[k])))))
            last = bounds[-1]
    edges = [0, *bounds, need]
    return [(d, groups, a, b - a) for (d, groups, _), a, b in zip(used, edges, edges[1:]) if b > a]


def _whole_stage_bounds(caps: np.ndarray, ideal: np.ndarray, need: int, cols: int) -> list[int]:
    """Boundaries ``b[m-1]`` between consecutive pods (cells before each), pod k taking
    1..caps[k] cells: the fewest inside a stage (``b % cols != 0``), then the least total
    distance from ``ideal``; by dynamic programming over pods and boundary positions.

    Examples
    --------
    Rows of 34, pods of 202, 191, 187, 190, 192 and 180 hosts, 32 rows: two boundaries
    inside a stage (5.9 and 21.5 stages), where nearest whole stages to the shares give three.

    >>> caps = np.array([202, 192, 191, 190, 187, 180])
    >>> b = _whole_stage_bounds(caps, 1088 * np.cumsum(caps) / caps.sum(), 1088, 34)
    >>> sum(x % 34 != 0 for x in b)
    2
    """
    m = caps.size
    pos = np.arange(need + 1)
    big = float(need + 1)                                                  # one cut stage outweighs any distance
    best = np.full(need + 1, np.inf)
    best[0] = 0.0
    back = []
    for k in range(m):
        cap = int(caps[k])
        padded = np.concatenate([np.full(cap, np.inf), best])
        window = np.lib.stride_tricks.sliding_window_view(padded, cap)[: need + 1]   # window[b]: best[b-cap .. b-1]
        arg = window[:, ::-1].argmin(axis=1)                                     # nearest predecessor first on ties
        prev = pos - 1 - arg
        cost = window[pos, cap - 1 - arg]
        if k < m - 1:
            cost = cost + big * (pos % cols != 0) + np.abs(pos - ideal[k])
        back.append(prev)
        best = cost
    bounds, b = [], need
    for k in range(m - 1, 0, -1):
        b = int(back[k][b])
        bounds.append(b)
    return bounds[::-1]


def _stack(cells: np.ndarray, cols: int, caps: list) -> list | None:
    """``share[n]``: a strip's ``cells`` (row-major) cut among its stacked groups, each
    cut at the end of a stage where the groups' free hosts allow (else at its share by free
    hosts); None when they do not fit."""
    size = cells.size
    if size > sum(caps):
        return None
    rows = cells // cols
    row_ends = (np.flatnonzero(rows[1:] != rows[:-1]) + 1).tolist() + [size]  # cumulative cells at stage ends
    share, taken = [], 0
    for i in range(len(caps) - 1):
        lo, hi = max(0, size - taken - sum(caps[i + 1:])), min(caps[i], size - taken)
        if lo > hi:
            return None
        target = (size - taken) * caps[i] / sum(caps[i:])
        ends = [e - taken for e in row_ends if lo <= e - taken <= hi]
        x = min(ends, key=lambda e: (abs(e - target), e)) if ends else min(hi, max(lo, int(round(target))))
        share.append(x)
        taken += x
    if size - taken > caps[-1]:
        return None
    return share + [size - taken]


def _band_pairs(problem: GridProblem, band: np.ndarray) -> tuple:
    """``(ring_a, ring_b, hop_a, hop_b)``: positions in ``band`` of neighbouring cells both
    in the band, along a stage (cyclic on stages the band holds whole) and down a column."""
    C = problem.cols
    at = np.full(problem.rows * problem.cols + 1, -1, dtype=np.int64)
    at[band] = np.arange(band.size)
    right = np.where(band % C == C - 1, band - (C - 1), band + 1)                # the next host of the ring
    whole = np.bincount(band // C, minlength=problem.rows) == C
    ring = (at[right] >= 0) & ((band % C != C - 1) | whole[band // C])
    below = np.minimum(band + C, at.size - 1)
    hop = (band + C < problem.rows * C) & (at[below] >= 0)
    pos = np.arange(band.size)
    return pos[ring], at[right[ring]], pos[hop], at[below[hop]]


def _local_cost(problem: GridProblem, pairs: tuple, labels: np.ndarray) -> float:
    """ToR-tier cost (units) that one pod's labels decide: ring crossings between its own
    neighbouring cells and pipeline hops between its own cells (:func:`_band_pairs`).
    Crossings at the pod's edges cross both tiers whatever the labels."""
    ring_a, ring_b, hop_a, hop_b = pairs
    return (problem.w_row * float((labels[ring_a] != labels[ring_b]).sum())
            + problem.w_col * float((labels[hop_a] != labels[hop_b]).sum()))


def _pod_options(problem: GridProblem, groups: list, band: np.ndarray) -> list[np.ndarray]:
    """Strip layouts of one pod's band (module docstring), as ``labels[band.size]``.

    Strip s holds the band's cells in whole columns, its edges within
    :data:`WIDTH_WINDOW` columns of where the band's cells reach the strips' share of free
    hosts (the bottom of its last column going to the next strip where its groups are
    full); inside a strip the stacked groups take its cells stage by stage (:func:`_stack`)."""
    C = problem.cols
    free = np.asarray(problem.free)
    col = band % C
    by_col = np.lexsort((band // C, col))                                # band positions, column-major
    per_col = np.bincount(col, minlength=C)
    cum = np.concatenate([[0], np.cumsum(per_col)])                     # cum[C+1]: band cells left of column
    total = free[groups].sum()
    options, strips = [], {}
    for order in _orders(groups, free):
        options += _layouts(order, band, C, free, by_col, cum, total, strips)
    return options


def _orders(groups: list, free: np.ndarray) -> list[list]:
    """The pod's groups in every order that differs in free hosts (which group is a strip of
    its own and which are stacked), up to :data:`MAX_ORDERED` groups; else as given."""
    if len(groups) > MAX_ORDERED:
        return [list(groups)]
    out, seen = [], set()
    for order in itertools.permutations(groups):
        key = tuple(int(free[g]) for g in order)
        if key not in seen:
            seen.add(key)
            out.append(list(order))
    return out


def _layouts(groups: list, band: np.ndarray, C: int, free: np.ndarray, by_col: np.ndarray, cum: np.ndarray,
             total: int, strips: dict) -> list[np.ndarray]:
    """The strip layouts of :func:`_pod_options` for one order of the groups (``strips``:
    each strip's cells and labels, by its first cell, size and groups, shared by the orders)."""
    options = []
    for parts in _compositions(len(groups)):
        if len(parts) > C:
            continue
        stacks = np.split(np.asarray(groups), np.cumsum(parts)[:-1])
        shares = np.cumsum([free[st].sum() for st in stacks])[:-1] * band.size / total
        near = [int(np.searchsorted(cum, x)) for x in shares]
        window = WIDTH_WINDOW if len(parts) <= 3 else 1
        for inner in itertools.product(*[range(max(1, e - window), min(C - 1, e + window) + 1) for e in near]):
            edges = (0, *inner, C)
            if any(b <= a for a, b in zip(edges, edges[1:])):
                continue
            labels = np.empty(band.size, dtype=np.int64)
            start = 0
            for k, st in enumerate(stacks):
                room = int(free[st].sum())
                size = band.size - start if k == len(stacks) - 1 else min(room, max(0, int(cum[edges[k + 1]]) - start))
                key = (start, size, tuple(st))
                if key not in strips:
                    where = np.sort(by_col[start:start + size])            # row-major inside the strip
                    share = _stack(band[where], C, [int(free[g]) for g in st]) if size else None
                    strips[key] = None if share is None else (where, np.repeat(st, share))
                if strips[key] is None:
                    break
                labels[strips[key][0]] = strips[key][1]
                start += size
            else:
                options.append(labels)
    return options


def pod_strips_cells(problem: GridProblem, aligned: bool = False,
                     rank: Callable = lambda room, d: (-room, d)) -> np.ndarray | None:
    """Placement ``cells[R, C]``: pods as bands of consecutive stages, each band's ToR groups
    in the strips that cost least inside the pod (module docstring); None when the fabric
    has no pods, a pod has more than :data:`MAX_POD_GROUPS` groups, or no strip layout fits.

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.
    aligned : bool
        Pod boundaries moved to whole stages where the pods' free hosts allow.
    """
    if not problem.domains:
        return None
    R, C = problem.rows, problem.cols
    bands = pod_bands(problem, aligned, rank)
    if not bands or max(len(g) for _, g, _, _ in bands) > MAX_POD_GROUPS:
        return None
    flat = np.empty(R * C, dtype=np.int64)
    for _, groups, start, size in bands:
        band = np.arange(start, start + size)
        options = _pod_options(problem, groups, band)
        if not options:
            return None
        pairs = _band_pairs(problem, band)
        flat[band] = min(options, key=lambda lab: _local_cost(problem, pairs, lab))   # first of the least
    return flat.reshape(R, C)


def pod_strips_starts(problem: GridProblem) -> list[np.ndarray]:
    """:func:`pod_strips_cells` with pod boundaries by share and on whole stages; only
    where every stage fits in one ToR group (``C <= max free``) and pods lie above them."""
    if not problem.domains or problem.cols > max(problem.free) or problem.rows < 2:
        return []
    out = [pod_strips_cells(problem, aligned) for aligned in (False, True)]
    return [c for c in out if c is not None]
