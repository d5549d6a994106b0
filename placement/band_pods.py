"""Which pods fill a band of pipeline stages exactly, and which of a pod's ToR groups may
share a sub-band: the subset sums of the nested band layout
(:mod:`rankmap.placement.nested_bands_layout`).

A band of ``h`` stages of ``C`` hosts takes whole pods whose free hosts sum to exactly
``h * C`` where it can (every pod then sits in one band, so no pipeline hop crosses the pod
tier inside the band): the fewest pods (:func:`~rankmap.placement.subset_sum.pick_subset`)
or, ``balanced``, the band's share of the pods left
(:func:`~rankmap.placement.subset_sum.exact_k_subset`, a fixed item count); else whole pods and whole groups of one more pod (:func:`part_pod`); else whole
pods and part of one. Dynamic programming over sums as in Cormen et al., *Introduction to
Algorithms*, 3rd ed., ch. 35.5.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.subset_sum import exact_k_subset, min_counts, pick_subset

__all__ = ["band_pods", "part_pod", "group_subsets", "without_smallest_pods"]

# Pods with more usable groups than this split their groups among sub-bands by prefixes
# of the group list (largest first) instead of every subset.
MAX_SUBSET_GROUPS = 8
# Pods tried as the one a band takes only some whole groups of (:func:`part_pod`).
PART_PODS = 8


def without_smallest_pods(problem: GridProblem, first: int = 0) -> tuple[int, ...]:
    """``free[K]`` with the smallest pods (smallest first, then the pod index) left out as
    long as the spare hosts cover them: every band then fills with fewer, whole pods.
    ``first``: the pod of that rank in this order is left out before the others, which then
    follow smallest first while the spare hosts cover them (nothing is left out where they
    do not cover that pod); e.g. 1: the second smallest pod instead of the smallest where
    the spare hosts hold only one.

    Examples
    --------
    >>> p = GridProblem(2, 5, (3, 3, 4, 4, 2), 10, 1, 0, ((0, 0, 1, 1, 2),), (1.0, 1.0))
    >>> without_smallest_pods(p)
    (3, 3, 4, 4, 0)
    >>> without_smallest_pods(p, first=1)
    (0, 0, 4, 4, 2)
    """
    free = np.asarray(problem.free).copy()
    dom = np.asarray(problem.domains[0])
    spare = int(free.sum()) - problem.rows * problem.cols
    room = np.bincount(dom, weights=free).astype(np.int64)
    order = sorted(np.nonzero(room)[0].tolist(), key=lambda p: (room[p], p))
    if first:
        if first >= len(order) or room[order[first]] > spare:
            return tuple(int(f) for f in free)
        order.insert(0, order.pop(first))
    for p in order:
        if room[p] > spare:
            break
        free[dom == p] = 0
        spare -= int(room[p])
    return tuple(int(f) for f in free)


def band_pods(dom: np.ndarray, free: np.ndarray, need: int, balanced: bool = False,
               part: bool = False, prefer: np.ndarray | None = None) -> list | None:
    """:func:`_band_pods`, memoised: the nested band layouts fill their first bands from the
    same free hosts again and again (deep pipeline, 100,000 hosts: 993 distinct calls of
    3,456). The memo is keyed on the bytes of ``dom``, ``free`` and ``prefer`` and keeps
    :data:`MEMO_SIZE` results, each the pods and ``free`` after them (a few KB)."""
    key = _array_key(dom), _array_key(free), int(need), bool(balanced), bool(part), _array_key(prefer)
    pods, after = _band_pods_memo(*key)
    free[:] = np.frombuffer(after, dtype=free.dtype)
    return None if pods is None else [list(pod) for pod in pods]


# Results kept by :func:`band_pods`' memo.
MEMO_SIZE = 2048


def _array_key(a: np.ndarray | None) -> tuple | None:
    """A hashable copy of ``a``: its dtype, shape and bytes."""
    return None if a is None else (a.dtype.str, a.shape, a.tobytes())


@functools.lru_cache(maxsize=MEMO_SIZE)
def _band_pods_memo(dom: tuple, free: tuple, need: int, balanced: bool, part: bool,
                    prefer: tuple | None) -> tuple[tuple | None, bytes]:
    """:func:`_band_pods` on :func:`_array_key` copies: the pods as tuples and ``free`` after them."""
    def array(key: tuple) -> np.ndarray:
        return np.frombuffer(key[2], dtype=key[0]).reshape(key[1])
    left = array(free).copy()
    pods = _band_pods(array(dom), left, need, balanced, part, None if prefer is None else array(prefer))
    return (None if pods is None else tuple(tuple(pod) for pod in pods)), left.tobytes()


def _band_pods(dom: np.ndarray, free: np.ndarray, need: int, balanced: bool = False,
               part: bool = False, prefer: np.ndarray | None = None) -> list | None:
    """The pods of one band, as ``[[(group, hosts), ...] per pod]`` summing to ``need``: the
    fewest whole pods that fill it exactly (``balanced``: as many whole pods as the band's
    share of the pods left, those nearest the mean size first, :func:`~rankmap.placement.subset_sum.exact_k_subset`), else
    (``part``) whole pods and whole groups of one more (:func:`part_pod`), else whole pods
    and part of one (its largest groups first, the last cut); taken hosts leave ``free``.
    ``prefer[D]`` (lowest first, then the largest pod) orders the pods where fills tie."""
    room = np.bincount(dom, weights=free, minlength=int(dom.max()) + 1).astype(np.int64)
    if room.sum() < need:
        return None
    rank = np.lexsort((-room, prefer)) if prefer is not None else np.argsort(-room, kind="stable")
    items = [(int(p), int(room[p])) for p in rank if room[p] > 0]
    exact = None
    if balanced:
        k = max(1, round(need / float(np.mean([f for _, f in items]))))
        exact = exact_k_subset(sorted(items, key=lambda pf: (abs(pf[1] - need / k), pf[0])), need, k)
    if exact is None:
        exact = pick_subset(items, need)
    if exact is None and part:
        pods = part_pod(dom, free, items, need)
        if pods is not None:
            return pods
    if exact is not None:
        chosen = [(p, int(room[p])) for p in exact]
    else:  # whole pods, largest first, then part of the next one
        chosen, left = [], need
        for p, f in items:
            if left == 0:
                break
            chosen.append((p, min(f, left)))
            left -= min(f, left)
    out = []
    for p, hosts in chosen:
        groups = [int(g) for g in np.nonzero((dom == p) & (free > 0))[0]]
        groups.sort(key=lambda g: (-free[g], g))
        pod = []
        for g in groups:
            if hosts == 0:
                break
            take = int(min(free[g], hosts))
            pod.append((g, take))
            free[g] -= take
            hosts -= take
        out.append(pod)
    return out


def part_pod(dom: np.ndarray, free: np.ndarray, items: list[tuple[int, int]], need: int) -> list | None:
    """Whole pods and whole groups of one more pod (tried smallest first, at most
    :data:`PART_PODS` of them) whose hosts fill ``need`` exactly, the fewest pods in all
    (then the most hosts of the partial pod), as :func:`band_pods` returns them (taken hosts
    leave ``free``); None when there are none."""
    best = None
    for part, _ in sorted(items, key=lambda pf: (pf[1], pf[0]))[:PART_PODS]:
        groups = [(int(g), int(free[g])) for g in np.nonzero((dom == part) & (free > 0))[0]]
        others = [(p, f) for p, f in items if p != part]
        counts = min_counts(others, need)
        for option in group_subsets(groups)[1:]:                      # at least one group of the partial pod
            taken = sum(groups[i][1] for i in option)
            if taken <= need and counts[need - taken] <= len(others):
                score = (int(counts[need - taken]) + 1, -taken, part, option)
                best = score if best is None or score < best else best
    if best is None:
        return None
    _, taken, part, option = best
    groups = [(int(g), int(free[g])) for g in np.nonzero((dom == part) & (free > 0))[0]]
    pods = pick_subset([(p, f) for p, f in items if p != part], need + taken)
    out = [[(int(g), int(free[g])) for g in np.nonzero((dom == p) & (free > 0))[0]] for p in pods]
    out.append([groups[i] for i in option])
    for pod in out:
        for g, n in pod:
            free[g] -= n
    return out


def group_subsets(groups: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    """Subsets (as index tuples) of a pod's groups that may go to one sub-band."""
    n = len(groups)
    if n <= MAX_SUBSET_GROUPS:
        return [c for k in range(n + 1) for c in itertools.combinations(range(n), k)]
    return [tuple(range(k)) for k in range(n + 1)]
