"""Whole rings in the larger pods, split rings paired in the smaller ones.

On a three-tier fabric whose pods hold one DP ring (row) each but not two, a ring whole
in a pod saves its pod crossings, but when no set of the pod's ToR groups holds exactly C
free hosts it costs a shared ToR group, and every hop between two whole rings in different
pods crosses the core (the trade :mod:`rankmap.placement.pod_profile_bound` bounds). This
layout keeps the ``q`` smallest pods free of whole rings: each of the other pods holds one
whole ring, and each split ring takes the remainder of one such pod plus a piece of a free
pod. Split rings sharing a free pod are consecutive stages, between the whole rings whose
remainders they take, so their pipeline hops stay inside those pods::

    W_a  S_1  S_2  W_b      S_1 = rest of pod a + piece of pod x
                            S_2 = rest of pod b + piece of pod x

Counts per (row, ToR group) are laid by :func:`rankmap.placement.tier_model.decode_counts`
(every pod one arc of each ring, shared pods in the same columns).

References
----------
Arnold (arXiv 2509.15940): DP and PP groups to minipods (pods) first.
"""

from __future__ import annotations

import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_model import decode_counts

__all__ = ["split_pairs_starts"]

# Pods of more ToR groups than this take groups largest first instead of the best subset.
SUBSET_MAX_GROUPS = 12


def _take(groups: np.ndarray, left: np.ndarray, need: int) -> dict:
    """``{group: hosts}`` covering ``need`` hosts from ``groups``' remainders ``left``: the fewest
    whole groups summing exactly to ``need`` when some do, else the fewest groups covering it
    with the least overshoot, the last (smallest) of them cut."""
    have = [int(g) for g in groups if left[g] > 0]
    if sum(int(left[g]) for g in have) < need:
        return {}
    best = None
    if len(have) <= SUBSET_MAX_GROUPS:
        for k in range(1, len(have) + 1):
            for sub in itertools.combinations(have, k):
                total = sum(int(left[g]) for g in sub)
                if total >= need:
                    score = (total != need, k, total - need, sub)
                    best = score if best is None or score < best else best
            if best is not None and not best[0]:
                break
        chosen = list(best[3])
    else:
        chosen = sorted(have, key=lambda g: (-left[g], g))
    out, rest = {}, need
    for g in sorted(chosen, key=lambda g: (-left[g], g)):
        n = int(min(rest, left[g]))
        if n:
            out[g] = n
            rest -= n
    return out


def _assign(t, homes: list, slots: dict, free_room: dict, C: int) -> dict:
    """``{free pod: [home pods]}``: each free pod's split rings, one whole-ring pod's remainder
    each, chosen so that the free pod's pieces (C less each remainder) fill it best."""
    out, unused = {}, list(homes)
    for x in sorted(slots, key=lambda x: (-free_room[x], x)):
        k = min(slots[x], len(unused))
        best = min(itertools.combinations(unused, k),
                   key=lambda hs: (max(0, sum(C - t[h] for h in hs) - free_room[x]),
                                   abs(sum(C - t[h] for h in hs) - free_room[x]), hs))
        out[x] = list(best)
        unused = [h for h in unused if h not in best]
    return out


def _layout(problem: GridProblem, free_pods: list) -> np.ndarray | None:
    """``counts[R, K]`` for one choice of pods kept free of whole rings (module docstring)."""
    R, C, K = problem.rows, problem.cols, len(problem.free)
    dom, left = np.asarray(problem.domains[0]), np.asarray(problem.free, dtype=np.int64).copy()
    pods = [int(p) for p in np.unique(dom)]

    def rest(p: int) -> int:
        return int(left[dom == p].sum())

    def put(r: int, piece: dict) -> int:
        for g, n in piece.items():
            counts[r, g] += n
            left[g] -= n
        return sum(piece.values())

    whole_pods = sorted((p for p in pods if p not in free_pods and rest(p) >= C), key=lambda p: (-rest(p), p))
    whole_pods = whole_pods[:R - 1]
    counts = np.zeros((R, K), dtype=np.int64)
    whole_row = {p: i for i, p in enumerate(whole_pods)}
    for p, i in whole_row.items():
        put(i, _take(np.nonzero(dom == p)[0], left, C))
    n_split = R - len(whole_pods)
    slots = {x: n_split // len(free_pods) + (j < n_split % len(free_pods)) for j, x in enumerate(free_pods)}
    remainder = {h: min(C - 1, rest(h)) for h in whole_pods}
    plan = _assign(remainder, whole_pods, slots, {x: rest(x) for x in free_pods}, C)
    order, r = [], len(whole_pods)
    for x in free_pods:
        homes = plan[x] + [None] * (slots[x] - len(plan[x]))
        for k, h in enumerate(homes):
            need = C
            if h is not None:
                need -= put(r, _take(np.nonzero(dom == h)[0], left, remainder[h]))
            for p in [x] + sorted(pods, key=lambda p: (-rest(p), p)):
                if need > 0 and rest(p) > 0:
                    need -= put(r, _take(np.nonzero(dom == p)[0], left, min(need, rest(p))))
            if need > 0:
                return None
            if k == 0 and h is not None:
                order.append(whole_row.pop(h))
            order.append(r)
            r += 1
        if homes and homes[-1] is not None and homes[-1] in whole_row:
            order.append(whole_row.pop(homes[-1]))
    order = list(whole_row.values()) + order
    return counts[order]


def split_pairs_starts(problem: GridProblem) -> list[np.ndarray]:
    """Placements ``cells[R, C]`` with the ``q`` smallest pods kept free of whole rings, for
    q = 1..3 (module docstring); empty on a one-tier fabric, when a row fits in one ToR group
    or when a pod could hold two rings.

    Examples
    --------
    Rings of 4; pods of groups (3, 2), (3, 2) and (2, 2): two whole rings in the larger pods
    and one ring over the remainder of the first (1 host) and the small pod, beside it.

    >>> p = GridProblem(3, 4, (3, 2, 3, 2, 2, 2), 10, 1, domains=((0, 0, 1, 1, 2, 2),), weights=(1.0, 1.0))
    >>> split_pairs_starts(p)[0].tolist()
    [[2, 2, 2, 3], [0, 0, 0, 1], [1, 4, 4, 5]]
    """
    if not problem.domains or problem.rows < 3:
        return []
    dom, free = np.asarray(problem.domains[0]), np.asarray(problem.free)
    C = problem.cols
    room = np.bincount(dom, weights=free, minlength=int(dom.max()) + 1)
    if C <= free.max() or room.max() >= 2 * C or free.sum() < problem.rows * C:
        return []
    by_size = sorted((int(p) for p in np.unique(dom)), key=lambda p: (room[p], p))
    out = []
    for q in range(1, min(3, len(by_size) - 1) + 1):
        counts = _layout(problem, by_size[:q])
        if counts is None or (counts.sum(axis=0) > free).any() or (counts.sum(axis=1) != C).any():
            continue
        out += decode_counts(problem, counts)
    return out
