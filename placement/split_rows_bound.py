"""A lower bound on the crossings of one tier when rings are narrower than a domain: a split
ring keeps the pipeline hops of at most two groups' remainders.

Notation as in :mod:`rankmap.placement.grid_problem`: R rows (DP rings, one per pipeline
stage) of C hosts, ``free[K]`` hosts per ToR group, ``w_row`` per ring crossing and
``w_col`` per pipeline hop between groups, H = (R-1) C hops.

Take any placement. Group g uses ``a_g`` hosts: ``w_g`` whole rows (every host of the row in
g) and ``y_g = a_g - C w_g`` hosts in ``j_g`` split rows (rows over >= 2 groups); there are
``n = R - sum_g w_g`` split rows. A split row over k groups crosses at least k times, so the
rings cross at least ``sum_g j_g`` times. The hops kept inside g, ``M_g``, are its hosts less
its vertical runs (one per column at least), so:

- ``M_g <= a_g - C`` when ``w_g >= 1`` (g touches every column), and
  ``M_g <= y_g - ceil(y_g / j_g)`` when ``w_g = 0`` (some column holds its largest piece);
- when ``j_g = 1`` and no whole row of g is next to g's split row, g's remainder keeps no
  hop: ``M_g <= C (w_g - 1)`` (only between g's whole rows). Call g *served* otherwise.
  A split row has two neighbouring rows, each whole in at most one group, so at most
  ``2 n`` groups are served.

So every placement costs at least ``w_col H - max sum_g (w_col M_g - w_row j_g)`` over the
choices ``(a_g, w_g, j_g, served_g)`` with ``sum_g a_g = R C`` and at most ``2 n`` served
groups; a dynamic programme over the groups (state: whole rows, served groups, unused hosts)
solves it exactly. The wrap hop of interleaved pipelines is not counted (it only adds cost).
When more than :data:`SPLIT_ROWS_MAX_SPARE` hosts are spare, ``sum_g a_g = R C`` is relaxed
(any ``a_g <= free[g]``), which keeps the bound valid.

The bound is strongest for deep pipelines on ToR groups a little larger than a ring (rings
of 36 on groups of 48: each group holds one whole ring, and three remainders of 12 share a
split row whose two neighbours keep only two of them), where the perimeter bound
(:mod:`rankmap.placement.perimeter_bound`) lets every remainder keep its hops.

References
----------
MegaScale (NSDI 2024): data-intensive ranks under one ToR group; Arnold (arXiv 2509.15940):
minimise the pods a DP or PP group spans.
"""

from __future__ import annotations

import math

import numpy as np

from rankmap.placement.crossing_bound import crossing_lower_bound
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.lower_bounds import analytic_lower_bound, band_lower_bound
from rankmap.placement.perimeter_bound import perimeter_lower_bound
from rankmap.placement.tier_search import level_problem

__all__ = ["split_rows_lower_bound", "split_rows_tier_bound", "SPLIT_ROWS_MAX_SPARE", "SPLIT_ROWS_MAX_WORK"]

# Spare hosts (free less R * C) up to which the host count is kept exact in the programme.
SPLIT_ROWS_MAX_SPARE = 16
# Above this many state updates (groups x options x states) the bound returns 0.
SPLIT_ROWS_MAX_WORK = 200_000_000

_NEG = -math.inf


def split_rows_lower_bound(rows: int, cols: int, free: tuple, w_row: int, w_col: int) -> int:
    """Lower bound (integer cost units) on ``w_row * ring crossings + w_col * hops crossing``
    of every placement of ``rows x cols`` hosts on groups of ``free`` hosts (module docstring).

    Parameters
    ----------
    rows, cols : int
        R rows (pipeline stages) of C hosts (one DP ring each).
    free : tuple of int
        ``free[K]``: usable hosts per group.
    w_row, w_col : int
        Cost of one ring crossing and of one pipeline hop between groups.

    Returns
    -------
    int
        The bound; 0 when the groups cannot hold the grid or the programme is too large
        (:data:`SPLIT_ROWS_MAX_WORK`).

    Examples
    --------
    4 rows of 3 on three groups of 4: a whole row each, and one split row of 1 + 1 + 1 whose
    two neighbours keep two of its hops (3 crossings, 7 hops crossing).

    >>> split_rows_lower_bound(4, 3, (4, 4, 4), 10, 1)
    37
    """
    f = [int(x) for x in free if x > 0]
    R, C = rows, cols
    if not f or R < 1 or C < 1 or sum(f) < R * C:
        return 0
    spare = sum(f) - R * C
    exact = spare <= SPLIT_ROWS_MAX_SPARE
    U = spare + 1 if exact else 1                       # unused-host states
    S, V = R + 1, min(2 * R, len(f)) + 1                # whole-row and served-group states
    opts = [_options(x, R, C, w_row, w_col, spare if exact else None) for x in f]
    if sum(len(o) for o in opts) * S * V * U > SPLIT_ROWS_MAX_WORK:
        return 0
    best = np.full((S, V, U), _NEG)                     # best[s, v, u]: max sum of benefits
    best[0, 0, 0] = 0.0
    for group in opts:
        nxt = np.full_like(best, _NEG)
        for w, v, u, b in group:
            if w < S and v < V and u < U:
                src = best[:S - w, :V - v, :U - u] + b
                np.maximum(nxt[w:, v:, u:], src, out=nxt[w:, v:, u:])
        best = nxt
    top = _NEG
    for s in range(S):
        served = min(V - 1, 2 * (R - s))
        top = max(top, best[s, :served + 1, U - 1 if exact else 0].max())
    if top == _NEG:
        return 0
    return max(0, int(math.floor(w_col * (R - 1) * C - top + 1e-9)))


def split_rows_tier_bound(problem: GridProblem) -> float:
    """A lower bound (units) on the tier cost of every placement
    (:func:`~rankmap.placement.tier_search.tier_cost`): per level the largest of the analytic,
    band, crossing-count, perimeter and split-row bounds of that level's problem, weighted and
    summed (each level's cost is at least its own bound, so the sum bounds the sum)."""
    total = 0.0
    for lv, w in enumerate(problem.weights):
        p = level_problem(problem, lv)
        b = max(analytic_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col, p.w_wrap),
                band_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col),
                crossing_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col),
                perimeter_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col),
                split_rows_lower_bound(p.rows, p.cols, p.free, p.w_row, p.w_col))
        total += w * b
    return float(total)


def _options(f: int, R: int, C: int, w_row: int, w_col: int, spare: int | None) -> list:
    """A group's choices as ``(whole rows, served 0/1, unused hosts, benefit)``, the benefit
    an upper bound on ``w_col * M_g - w_row * j_g``; unused hosts count 0 when ``spare`` is
    None (relaxed). Dominated choices of the same key are dropped."""
    out: dict = {}

    def add(w: int, v: int, u: int, b: float) -> None:
        key = (w, v, u)
        if b > out.get(key, _NEG):
            out[key] = b

    for a in range(f + 1):
        u = f - a
        if spare is not None and u > spare:
            continue
        uu = u if spare is not None else 0
        for w in range(min(a // C, R) + 1):
            y = a - C * w
            if y == 0:
                add(w, 0, uu, w_col * C * max(0, w - 1))
                continue
            j_min = max(1, -(-y // (C - 1))) if C > 1 else None
            if j_min is None:
                continue                                 # a row of one host is never split
            if j_min == 1:
                if w >= 1:
                    add(w, 1, uu, w_col * (a - C) - w_row)           # served
                add(w, 0, uu, w_col * C * max(0, w - 1) - w_row)     # unserved (or w = 0)
            for j in range(max(2, j_min), max(2, j_min) + 1 if w >= 1 else min(R, y) + 1):
                kept = a - C if w >= 1 else y - -(-y // j)
                add(w, 0, uu, w_col * kept - w_row * j)
    return [(w, v, u, b) for (w, v, u), b in out.items()]
