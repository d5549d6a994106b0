"""A joint lower bound on the ToR and pod tiers: one profile per pod, combined by dynamic programming.

The per-tier bounds (:func:`rankmap.placement.tier_search.tier_bound`) are added level by
level, so they miss the trade between the tiers: a DP ring whole inside one pod saves its
pod crossings, but when no set of that pod's ToR groups holds exactly ``C`` free hosts it
shares a ToR group with another ring, one more ToR crossing. This bound sees that trade.

Notation as in :mod:`rankmap.placement.grid_problem`: R rows (DP rings) of C hosts,
``free[K]`` per ToR group, level-1 domains (pods), weights ``w0`` (ToR level) and ``w1``
(pod level), H = (R - 1) C pipeline hops between consecutive stages. It applies when
``C > max free`` (every ring crosses the ToR tier once per ToR group it uses).

Take any placement. In pod d, join a row's piece (its hosts in d) and a ToR group by an
edge when the row uses the group. A component of that graph holds as many hosts in its
pieces as in its groups, and a forest bound gives ``edges >= pieces + groups - components``.
Let ``W_d`` rows be whole in d (pieces of C hosts), ``S_d`` pieces belong to rings split
over several pods (each of 1..C-1 hosts), ``A_d`` hosts used, ``u_d`` groups used,
``m_d`` components, ``n_d = u_d + W_d + S_d - m_d`` edges and ``e_d = n_d - u_d``. Then

- ToR ring crossings are ``sum_d n_d`` at least (a ring over k groups crosses k times), and
  pod ring crossings ``sum_d S_d`` at least (whole rings cross nothing);
- hops kept inside pod d: ``K1_d <= A_d - (largest piece)`` (a chain of pieces p_1..p_R
  keeps at most ``sum_i min(p_i, p_i+1) <= sum p - max p``); kept inside its groups:
  ``K0_d <= min(K1_d, e_d max(free) / 2)`` (a group in j pieces keeps at most
  ``f (j - 1) / j <= (j - 1) f / 2``);

so the cost is at least ``w0 w_col H + w1 w_col H + sum_d c_d`` with
``c_d = w0 w_row n_d + w1 w_row S_d - w0 w_col K0_d - w1 w_col K1_d``. For each pod the
least ``c_d`` per (W_d, S_d, hosts left unused) is found by enumerating its components
(set partitions of its groups, each block holding whole rows and split pieces whose sizes
fit the block, :func:`pod_profiles`); a dynamic programme over pods then takes the least
sum with ``sum W_d = s`` whole rows, ``sum S_d >= (R - s) k(s)`` split pieces (``k(s)`` the
fewest pods a split ring needs, :func:`rankmap.placement.crossing_bound.split_row_pieces`)
and the unused hosts summing to the spare ones. Levels above the pods add their own
per-level bounds.

References
----------
Arnold (arXiv 2509.15940): whole DP and PP groups to pods (minipods) first; the forest
bound on the edges of a transportation problem's support: Dantzig, "Linear Programming and
Extensions" (1963), ch. 14 (a basic solution has at most m + n - 1 positive entries, one
fewer per independent block).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np

from rankmap.placement.crossing_bound import split_row_pieces
from rankmap.placement.grid_problem import GridProblem

__all__ = ["pod_profile_bound", "pod_profiles", "MAX_POD_GROUPS", "MAX_TRACKED_SPARE", "MAX_DP_WORK"]

# Pods of more ToR groups than this are not enumerated (the bound returns 0).
MAX_POD_GROUPS = 6
# The hosts left unused are tracked exactly up to this many spare hosts (and this much work
# in the dynamic programme); above it each pod may leave up to all the spare hosts unused (a
# weaker, still valid, relaxation).
MAX_TRACKED_SPARE = 64
MAX_DP_WORK = 400_000_000


@functools.lru_cache(maxsize=4096)
def pod_profiles(free: tuple, cols: int) -> frozenset:
    """Every component structure of one pod: ``(u, m, W, S0, lo, hi, grows, F_U)`` per way of
    splitting the pod's used groups into components (blocks).

    ``u`` groups (``F_U`` free hosts) used in ``m`` blocks holding ``W`` whole rows and ``S0`` split pieces (at
    most one per block); the hosts used lie in ``[lo, hi]``; ``grows``: a block holds a
    split piece, so more split pieces (each adding 1..C-1 hosts, at most the used groups'
    free hosts) may join it.

    Examples
    --------
    Two groups of 3 hosts, rows of 4: a whole row needs both groups, one block.

    >>> sorted(p for p in pod_profiles((3, 3), 4) if p[2] == 1)
    [(2, 1, 1, 0, 4, 4, False, 6), (2, 1, 1, 1, 5, 6, True, 6)]
    """
    out = set()
    n = len(free)

    def blocks(rest: tuple, u: int, m: int, W: int, S: int, lo: int, hi: int, grows: bool, used: int) -> None:
        if not rest:
            out.add((u, m, W, S, lo, hi, grows, used))
            return
        first, others = rest[0], rest[1:]
        blocks(others, u, m, W, S, lo, hi, grows, used)               # the first group unused
        for k in range(len(others) + 1):
            for extra in _subsets(others, k):
                block = (first,) + extra
                left = tuple(i for i in others if i not in extra)
                size = sum(free[i] for i in block)
                for w in range(size // cols + 1):
                    for s in (0, 1):
                        b_lo = max(len(block), w * cols + s)
                        b_hi = min(size, w * cols + s * (cols - 1))
                        if w + s >= 1 and b_lo <= b_hi:
                            blocks(left, u + len(block), m + 1, W + w, S + s, lo + b_lo, hi + b_hi,
                                   grows or s == 1, used + size)

    blocks(tuple(range(n)), 0, 0, 0, 0, 0, 0, False, 0)
    return frozenset(out)


def _subsets(items: tuple, k: int):
    """Subsets of ``items`` of size ``k`` in a fixed order."""
    return itertools.combinations(items, k)


def _pod_table(free: tuple, problem: GridProblem, spare_max: int) -> dict:
    """``{(W, S): cost[spare_max + 1]}``: least ``c_d`` (module docstring) of one pod with W
    whole rows, S split pieces and ``waste`` of its free hosts unused (inf where impossible);
    per profile, every count of split pieces at once (rows ``x``: ``S = S0 + x``)."""
    R, C = problem.rows, problem.cols
    w0, w1 = problem.weights[0], problem.weights[1]
    F, f_max = sum(free), max(free)
    waste = np.arange(spare_max + 1)
    A = (F - waste)[None, :]                                        # A[1, V]: hosts used
    table: dict = {}
    for u, m, W, S0, lo, hi, grows, used in pod_profiles(tuple(sorted(free)), C):
        x = np.arange(R - S0 + 1 if grows else 1)[:, None]          # (X, 1)
        ok = (A >= lo) & (A <= np.minimum(used, hi + x * (C - 1))) & (A >= 0)   # (X, V)
        x = x[ok.any(axis=1)]
        if not x.size:
            continue
        ok, S = ok[ok.any(axis=1)], S0 + x
        largest = C if W else np.ceil(A / np.maximum(1, S))
        k1 = np.where(W + S >= 2, np.maximum(0, A - largest), 0)
        e = W + S - m
        if problem.w_row >= problem.w_col * f_max / 2:
            k0_term = w0 * (problem.w_row * e - problem.w_col * np.minimum(k1, e * f_max / 2))
        else:                                                       # more pieces may pay: the least over e' >= e
            e_star = np.maximum(e, 2 * k1 / f_max)
            k0_term = w0 * (problem.w_row * e_star - problem.w_col * np.minimum(k1, e_star * f_max / 2))
        cost = np.where(ok, w0 * problem.w_row * u + k0_term + w1 * (problem.w_row * S - problem.w_col * k1), np.inf)
        for key, row in zip(((W, int(s)) for s in S[:, 0]), cost):
            table[key] = np.minimum(table[key], row) if key in table else row
    return table


def pod_profile_bound(problem: GridProblem, pair: float = 0.0) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs,
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement (module docstring);
    with ``pair``, plus ``pair`` times each tier's weight per span of columns ``(2j, 2j + 1)``
    split at that tier (CP x EP groups over two hosts, :mod:`rankmap.placement.pair_split_bound`).

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains above the ToR groups.
    pair : float
        Units a span split between two ToR groups sends across (0: spans are not counted).
        Each pod then costs the lesser of its profile in whole spans (every row piece of its
        groups starts and ends on a span's edge: the pod of the problem in spans of two
        columns, each group ``floor(free / 2)`` spans, its odd hosts unused) and its profile
        in hosts plus ``w0 pair / 2`` per piece end inside a span (the split charged half to
        each side): at least one, and at least as many as its groups of odd free hosts less
        the hosts it leaves unused (a group using an odd number of hosts has a piece of odd
        length); ``w1 pair / 2`` more when it uses an odd number of hosts (so does a pod
        piece). It serves rings narrower than pods, where the patterns' bounds of
        :func:`~rankmap.placement.pair_split_bound.whole_spans_bound` do not apply. On the
        12,288-GPU three-tier benchmark clusters of seed 3, 50% busy (rings of 92 hosts, pods of
        ~126), the printed gap: CP 9.32% -> 7.85%, EP 7.56% -> 5.04%.

    Returns
    -------
    float
        The bound; 0 when it does not apply (no pods, ``C <= max free``, a pod of more
        than :data:`MAX_POD_GROUPS` ToR groups, or too few free hosts).

    Examples
    --------
    Rings of 5 on pods of groups (3, 3) and (2, 2, 2): each ring whole in a pod takes 2 and
    3 ToR groups (3 + 2 of 3; 2 + 2 + 1), 5 ToR crossings, and its 5 hops leave both tiers
    (the optimum; the per-tier bounds, added, give 50).

    >>> p = GridProblem(2, 5, (3, 3, 2, 2, 2), 10, 1, domains=((0, 0, 1, 1, 1),), weights=(1.0, 1.0))
    >>> pod_profile_bound(p)
    60.0
    """
    R, C, free = problem.rows, problem.cols, np.asarray(problem.free)
    if not problem.domains or C < 2 or C <= free.max() or free.sum() < R * C:
        return 0.0
    dom = np.asarray(problem.domains[0])
    pods = [tuple(int(x) for x in free[dom == d] if x > 0) for d in range(int(dom.max()) + 1)]
    pods = [p for p in pods if p]
    if max(len(p) for p in pods) > MAX_POD_GROUPS:
        return 0.0
    spare = int(free.sum()) - R * C
    pod_free = sorted((sum(p) for p in pods), reverse=True)
    need = {s: split_row_pieces(pod_free, C, s) for s in range(R + 1)}
    cap = max([(R - s) * k for s, k in need.items() if k is not None and s < R] + [0])
    # unused hosts tracked exactly only while the programme stays small (a relaxation otherwise)
    tracked = spare <= MAX_TRACKED_SPARE and len(pods) * (R + 1) ** 2 * (cap + 1) * (spare + 1) ** 2 <= MAX_DP_WORK
    V = spare + 1 if tracked else 1
    inf = np.inf
    dp = np.full((R + 1, cap + 1, V), inf)                          # dp[s, S, waste]
    dp[0, 0, 0] = 0.0
    for p in pods:
        spare_max = min(spare, sum(p))
        table = _pod_table(p, problem, spare_max)
        if pair > 0 and C % 2 == 0:
            table = _with_spans(p, problem, table, pair, spare_max)
        new = np.full_like(dp, inf)
        for (W, S), cost in table.items():
            if W > R:
                continue
            c = cost if tracked else np.array([cost.min()])
            moved = _shift_pieces(dp[:R + 1 - W], S, cap)           # (R+1-W, cap+1, V)
            for v in np.nonzero(np.isfinite(c))[0]:
                new[W:, :, v:] = np.minimum(new[W:, :, v:], moved[:, :, :V - v] + c[v])
        dp = new
    best = inf
    for s in range(R + 1):
        k = need[s]
        if s < R and k is None:
            continue                                                 # no placement has s whole rows
        low = min(cap, (R - s) * k) if s < R else 0
        tail = dp[s, low:, spare] if tracked else dp[s, low:, 0]
        best = min(best, float(tail.min()))
    if not math.isfinite(best):
        return 0.0
    hops = (problem.weights[0] + problem.weights[1]) * problem.w_col * (R - 1) * C
    return max(0.0, best + hops)


def _with_spans(free: tuple, problem: GridProblem, table: dict, pair: float, spare_max: int) -> dict:
    """``table`` (:func:`_pod_table` of a pod of groups ``free``) with ``pair`` (units per split
    span) charged as :func:`pod_profile_bound` says: per ``(W, S)`` and unused hosts, the lesser
    of the pod in whole spans and the pod in hosts with its half of a split span."""
    w0, w1 = problem.weights[0], problem.weights[1]
    waste = np.arange(spare_max + 1)
    used = sum(free) - waste                                         # [V]: hosts the pod uses
    # a group using an odd number of hosts has a piece of odd length, one of whose ends lies
    # inside a span; each unused host makes at most one group's count even; a pod that uses
    # no host has no piece: nothing to charge
    ends = np.maximum(1, sum(f % 2 for f in free) - waste)
    charge = np.where(used > 0, w0 * pair / 2 * ends, 0.0) + np.where(used % 2 == 1, w1 * pair / 2, 0.0)
    out = {key: cost + charge for key, cost in table.items()}
    halves = tuple(f // 2 for f in free if f // 2 > 0)
    if not halves:
        return out
    spans = dataclasses.replace(problem, cols=problem.cols // 2, free=halves, w_col=2 * problem.w_col,
                                w_wrap=2 * problem.w_wrap)
    lost = sum(free) - 2 * sum(halves)                               # hosts no whole span can use
    if lost > spare_max:
        return out
    for key, cost in _pod_table(halves, spans, (spare_max - lost) // 2).items():
        at = lost + 2 * np.arange(cost.size)                         # unused hosts of each entry
        row = out.get(key, np.full(spare_max + 1, np.inf)).copy()
        row[at] = np.minimum(row[at], cost)
        out[key] = row
    return out


def _shift_pieces(dp: np.ndarray, S: int, cap: int) -> np.ndarray:
    """``dp`` with S more split pieces along axis 1, saturating at ``cap``."""
    if S == 0:
        return dp
    out = np.full_like(dp, np.inf)
    if S <= cap:
        out[:, S:cap] = dp[:, :cap - S]
    out[:, cap] = dp[:, max(0, cap - S):].min(axis=1)
    return out
