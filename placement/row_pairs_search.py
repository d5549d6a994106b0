"""Two-ring repartition: local search that shares two DP rings' ToR groups out again, exactly.

Where a DP ring (a row of C hosts) needs several ToR groups, its cost is mostly its ring
crossings: ``k >= 2`` groups cross the ToR tier ``k`` times, and the pod tier once per pod
(when more than one), tier-weighted. The count search (:mod:`rankmap.placement.count_search`)
moves one piece at a time, so it cannot trade, say, one group of 16 hosts for two pieces of
14 and 3 between two rings, nor take a spare host to let a group leave a ring. This search
takes two rows ``r, q`` and every group either holds (``counts[r] + counts[q]`` plus the
group's spare hosts), and tries every way of giving each group to ``r`` only, ``q`` only,
both, or neither (``4 ** n`` patterns for ``n`` groups, scored at once with numpy): a pattern
is possible when each row can get its C hosts (Hall's condition on the two rows: what ``r``
may take is at least C, what ``q`` may take is at least C, and all of it at least 2C), and
it costs the two rows' tier-weighted crossings. The cheapest possible pattern below the
current one is laid (each row's hosts in the groups' one order,
:func:`rankmap.placement.tier_model.decode_counts`) and kept when the planner's key
improves; first improvement, pairs in a fixed order, at most ``max_rounds`` improvements
(deterministic).

On the 12,288-GPU three-tier instances, 50% busy (rings of 86-92 hosts over 3-5 groups of
24-40 free hosts): the EP job of seed 2 in whole spans 3,712 -> 3,641 (10^6 units; its bound
3,557), its printed gap 5.25 -> 3.42%; GPT-3 seed 6 4.82 -> 3.15%.

References
----------
Large neighbourhood search (destroy two rings, repair exactly): Shaw, "Using constraint
programming and local search methods to solve vehicle routing problems", CP 1998; Hall's
marriage theorem for the two rows' supply (P. Hall, J. London Math. Soc. 10, 1935).
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from rankmap.placement.count_search import counts_of
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_model import decode_counts

__all__ = ["row_pairs_search", "repartition", "MAX_UNION", "MAX_PATTERNS"]

# Two rows holding more groups than this are not repartitioned (4 ** 8 = 65,536 patterns).
MAX_UNION = 8
# Patterns scored per search, at most (a count, not a clock: the same inputs stop at the same
# place); the 12,288-GPU instances score 0.1-0.8 million.
MAX_PATTERNS = 5_000_000
R_ONLY, Q_ONLY, BOTH, NEITHER = 0, 1, 2, 3


@functools.lru_cache(maxsize=MAX_UNION + 1)
def _patterns(n: int) -> np.ndarray:
    """``pat[4 ** n, n]``: every assignment of n groups to r only, q only, both or neither."""
    pat = np.indices((4,) * n).reshape(n, -1).T
    pat.flags.writeable = False
    return pat


def _crossings(problem: GridProblem, groups: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``cost[P]``: tier-weighted ring crossings of a row holding ``groups[present[p]]``."""
    cost = np.zeros(present.shape[0])
    levels = [np.arange(len(problem.free))] + [np.asarray(d) for d in problem.domains]
    for weight, dom in zip(problem.weights, levels):
        _, label = np.unique(dom[groups], return_inverse=True)
        onehot = np.eye(label.max() + 1, dtype=np.int64)[label]                 # (n, D)
        k = ((present.astype(np.int64) @ onehot) > 0).sum(axis=1)            # domains the row uses
        cost += weight * np.where(k >= 2, k, 0)
    return cost


def repartition(problem: GridProblem, counts: np.ndarray, r: int, q: int) -> np.ndarray | None:
    """``counts[R, K]`` with rows ``r`` and ``q`` shared out again at the fewest tier-weighted
    crossings (module docstring); None when no pattern beats theirs or they hold more than
    :data:`MAX_UNION` groups.

    Examples
    --------
    Two rows over groups 0-2 (5 crossings); with group 1's spare host each row takes one group
    whole (no crossing):

    >>> p = GridProblem(2, 4, (4, 4, 4), 10, 1)
    >>> repartition(p, np.array([[2, 2, 0], [2, 1, 1]]), 0, 1).tolist()
    [[4, 0, 0], [0, 4, 0]]
    """
    C = problem.cols
    spare = np.asarray(problem.free) - counts.sum(axis=0)
    groups = np.flatnonzero(counts[r] + counts[q])
    n = groups.size
    if n > MAX_UNION:
        return None
    avail = counts[r, groups] + counts[q, groups] + spare[groups]                  # (n,)
    pat = _patterns(n)
    in_r, in_q, both = (pat == R_ONLY) | (pat == BOTH), (pat == Q_ONLY) | (pat == BOTH), pat == BOTH
    cap_r = in_r @ avail - both.sum(axis=1)          # a group in both rows leaves at least one host to q
    cap_q = in_q @ avail - both.sum(axis=1)
    total = (pat != NEITHER) @ avail
    ok = (cap_r >= C) & (cap_q >= C) & (total >= 2 * C) & (in_r.sum(axis=1) <= C) & (in_q.sum(axis=1) <= C)
    ok &= ~(both & (avail < 2)).any(axis=1)
    # rows r and q under every pattern, then as they are now: one pass over the levels
    rows = _crossings(problem, groups, np.concatenate([in_r, in_q, counts[[r, q]][:, groups] > 0]))
    P = pat.shape[0]
    cost, now = rows[:P] + rows[P:2 * P], rows[2 * P] + rows[2 * P + 1]
    cost = np.where(ok, cost, np.inf)
    best = int(cost.argmin())                                                 # first of the cheapest
    if not cost[best] < now - 1e-9:
        return None
    return _laid(counts, r, q, groups, avail, pat[best], C)


def _laid(counts: np.ndarray, r: int, q: int, groups: np.ndarray, avail: np.ndarray, pattern: np.ndarray,
          C: int) -> np.ndarray | None:
    """The two rows' hosts for one pattern: one host each first, row r filled from its own
    groups then from the shared ones (each keeping one for q), row q from its own then the
    shared ones' rest; None where this filling falls short."""
    out = counts.copy()
    out[r, groups] = 0
    out[q, groups] = 0
    a_r = np.where(pattern == Q_ONLY, 0, 1) * (pattern != NEITHER)
    room_r = np.where(pattern == R_ONLY, avail - 1, np.where(pattern == BOTH, avail - 2, 0))
    a_r = a_r + _fill(C - a_r.sum(), room_r, order=np.argsort(pattern == BOTH, kind="stable"))
    a_q = ((pattern == Q_ONLY) | (pattern == BOTH)).astype(np.int64)
    room_q = np.where(pattern == Q_ONLY, avail - 1, np.where(pattern == BOTH, avail - a_r - 1, 0))
    a_q = a_q + _fill(C - a_q.sum(), room_q, order=np.argsort(pattern == BOTH, kind="stable"))
    if a_r.sum() != C or a_q.sum() != C:
        return None
    out[r, groups] = a_r
    out[q, groups] = a_q
    return out


def _fill(need: int, room: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``add[n]``: ``need`` hosts taken from ``room`` in ``order`` (each up to its room)."""
    add = np.zeros_like(room)
    for i in order:
        take = int(min(max(need, 0), room[i]))
        add[i] = take
        need -= take
    return add


def row_pairs_search(problem: GridProblem, cells: np.ndarray, key: Callable, max_rounds: int = 40,
                     max_patterns: int = MAX_PATTERNS) -> np.ndarray:
    """The best placement reached from ``cells[R, C]`` by two-ring repartitions (module
    docstring), each laid by :func:`~rankmap.placement.tier_model.decode_counts` and kept when
    ``key`` improves; ``cells`` itself when none does. Stops after ``max_rounds`` improvements
    or ``max_patterns`` patterns scored."""
    counts = counts_of(problem, cells)
    best, best_key = cells, key(cells)
    scored = 0
    for _ in range(max_rounds):
        for r, q in ((r, q) for r in range(problem.rows) for q in range(r + 1, problem.rows)):
            n = np.count_nonzero(counts[r] + counts[q])
            scored += 4 ** n if n <= MAX_UNION else 0
            if scored > max_patterns:
                return best
            moved = repartition(problem, counts, r, q)
            if moved is None:
                continue
            laid = min(decode_counts(problem, moved), key=key)
            if key(laid) < best_key:
                counts, best, best_key = moved, laid, key(laid)
                break
        else:
            break
    return best
