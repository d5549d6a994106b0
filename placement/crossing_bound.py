"""A counting lower bound on the crossings of one tier: whole rings against split ones.

Notation as in :mod:`rankmap.placement.grid_problem`: R rows (DP rings, one per pipeline
stage) of C hosts, ``free[K]`` hosts per domain of one tier level (ToR groups, or pods with
their free hosts summed, :func:`rankmap.placement.tier_search.level_problem`), ``w_row``
per ring crossing and ``w_col`` per pipeline hop between domains.

The counting argument. Take any placement and let ``s`` be the number of rows whose hosts
all lie in one domain ("whole" rows; the other ``R - s`` rows are "split"). Domain d holds
at most ``m_d = floor(F_d / C)`` whole rows, so ``s <= sum_d m_d``, and every placement
has some such ``s``. For that ``s``:

- Ring crossings. A ring over k >= 2 domains changes domain at least k times (a cyclic
  sequence of k distinct labels). A split row's pieces lie in distinct domains and each
  piece in d is at most ``u_d = min(C - 1, F_d - C * w_d)`` with ``w_d`` the whole rows
  in d, and ``w_d >= max(0, s - sum_{e != d} m_e)``; so the row has at least ``k(s)``
  pieces, the fewest (>= 2) whose largest bounds ``u_d`` sum to C.
- Pipeline hops (between rows r and r+1; the wrap hop of interleaved pipelines is not
  counted, it only adds cost). Group the whole rows, in row order, into maximal runs of
  consecutive rows in the same domain; there are at least ``beta(s)`` runs, the fewest
  domains whose ``m_d`` sum to s. Two adjacent runs lie in different domains: all C hops
  between them cross. A split row next to a whole row in d keeps at most its piece in d,
  at most ``rho(s) = max_{d: m_d >= 1} min(C - 1, F_d - C max(1, w_d))`` hops (``w_d``
  its least value above), so at least ``C - rho(s)`` cross. With ``t`` runs of split rows between runs of whole rows and ``e <= 2`` at the
  ends (``t + e >= 1`` when both kinds exist, ``t + e <= R - s``)::

      hops >= C * (beta - 1 - t) + (C - rho) * (2 t + e)

  and, whatever s, each of the columns (pipelines) that no domain holds whole crosses at
  least once: ``hops >= C - sum_d floor(F_d / R)``.

So every placement costs at least ``min_s w_row (R - s) k(s) + w_col hops(s)``.
The bound is strongest on the upper tiers, where a pod can hold a ring whole but not two
(Arnold's setting: a DP ring kept inside one pod forces its neighbours' pipeline hops out).

References
----------
Arnold (arXiv 2509.15940): place DP and PP groups to minimise the pods they spread over.
"""

from __future__ import annotations

import math

__all__ = ["crossing_lower_bound", "split_row_pieces"]


def crossing_lower_bound(rows: int, cols: int, free: tuple, w_row: int, w_col: int) -> int:
    """Lower bound (integer cost units) on ``w_row * ring crossings + w_col * hops crossing``
    of every placement of ``rows x cols`` hosts on domains of ``free`` hosts (module docstring).

    Parameters
    ----------
    rows, cols : int
        R rows (pipeline stages) of C hosts (one DP ring each).
    free : tuple of int
        ``free[K]``: usable hosts per domain.
    w_row, w_col : int
        Cost of one ring crossing and of one pipeline hop between domains.

    Returns
    -------
    int
        The bound, 0 when one domain may hold every row whole.

    Examples
    --------
    8 rings of 144 hosts on 6 pods of 192: one ring per pod at most, so either rings split
    or the pipeline hops between whole rings leave their pods.

    >>> crossing_lower_bound(8, 144, (192,) * 6, 100, 1)
    1224
    >>> crossing_lower_bound(2, 4, (8, 8), 10, 1)
    0
    """
    f = sorted((x for x in free if x > 0), reverse=True)
    if not f or rows < 1 or cols < 1:
        return 0
    R, C = rows, cols
    m = [x // C for x in f]
    total_m = sum(m)
    whole_cols = sum(x // R for x in f)
    col_hops = max(0, C - whole_cols) if R > 1 else 0
    best = math.inf
    for s in range(min(R, total_m) + 1):
        if s < R and C < 2:
            continue                                   # a row of one host is always whole
        pieces = _pieces(f, m, total_m, s, C) if s < R else 0
        if pieces is None:
            continue                                   # no split row fits: no placement has this s
        # a split row beside a whole row in d keeps at most d's residual after its whole rows
        rho = max((min(C - 1, x - C * max(1, s - (total_m - k))) for x, k in zip(f, m) if k >= 1), default=0)
        hops = max(col_hops, _row_hops(R, C, s, _runs(m, s), rho))
        best = min(best, w_row * (R - s) * pieces + w_col * hops)
    return 0 if best == math.inf else int(best)


def split_row_pieces(free: tuple, cols: int, whole: int) -> int | None:
    """``k(s)``: the fewest domains (>= 2) a split row spans when ``whole`` rows lie whole in
    one domain each (module docstring); None when no placement has that many whole rows
    or no split row fits.

    Examples
    --------
    >>> split_row_pieces((192,) * 6, 144, 6), split_row_pieces((192,) * 6, 144, 7)
    (3, None)
    """
    f = sorted((x for x in free if x > 0), reverse=True)
    m = [x // cols for x in f]
    if whole > sum(m):
        return None
    return _pieces(f, m, sum(m), whole, cols)


def _pieces(f: list, m: list, total_m: int, s: int, C: int) -> int | None:
    """``k(s)``: the fewest pieces (>= 2) of a split row; None when none fits."""
    u = sorted((min(C - 1, x - C * max(0, s - (total_m - k))) for x, k in zip(f, m)), reverse=True)
    acc = 0
    for k, x in enumerate(u, start=1):
        acc += max(0, x)
        if k >= 2 and acc >= C:
            return k
    return None


def _runs(m: list, s: int) -> int:
    """``beta(s)``: the fewest domains whose whole-row capacities ``m_d`` sum to ``s``."""
    acc = 0
    for n, k in enumerate(sorted(m, reverse=True), start=1):
        if acc >= s:
            return n - 1
        acc += k
    return len(m)


def _row_hops(R: int, C: int, s: int, beta: int, rho: int) -> int:
    """Least hops crossing between consecutive rows with ``s`` whole rows in ``beta`` runs."""
    n_split = R - s
    if s == 0 or R < 2:
        return 0
    if n_split == 0:
        return C * (beta - 1)
    return min(C * (beta - 1 - t) + (C - rho) * (2 * t + e)
               for t in range(min(n_split, beta - 1) + 1) for e in range(3)
               if 1 <= t + e <= n_split)
