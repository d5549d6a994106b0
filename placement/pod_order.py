"""The order of the pods along a band, and of each pod's groups in its sub-bands, that leaves
the fewest pipeline hops stepping across group and pod edges.

In a sub-band of ``h`` rows laid left to right with each piece's columns dealt round robin
(:func:`rankmap.placement.nested_bands_layout._lay_sub_band`), the edge after a running
total of ``P`` hosts lies at column ``P // h`` on rows ``P % h`` to ``h - 1`` and one column
further on the rows above them: unless ``P`` is a multiple of ``h`` it steps once, and one
pipeline hop crosses it. A step at a pod edge crosses both tiers (ToR group and pod), one at a group edge
inside a pod the ToR tier only. Between two sub-bands of a band every hop leaves its ToR
group anyway, but a pod edge that sits at another column in the sub-band below sends the
hops of the columns between across the pod tier.

Every one of these costs depends only on which pods lie left of the edge, so the best order
of at most :data:`MAX_EXACT_PODS` pods is found exactly by dynamic programming over the
subsets of pods laid so far (Held and Karp, *J. SIAM* 10(1), 1962, with set costs instead of
arc costs); each pod's groups take the order, for the running total they start from, with
the fewest steps inside the pod (all orders of at most :data:`MAX_ORDERED_GROUPS` groups).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

__all__ = ["MAX_EXACT_PODS", "pod_order"]

# Bands with more pods than this keep the caller's order (the subset table has 2**P entries).
MAX_EXACT_PODS = 12
# Pod shares with more groups than this keep their order.
MAX_ORDERED_GROUPS = 5


def pod_order(shares: list, heights: list[int], w_tor: float = 1.0,
              w_pod: float = 1.0) -> tuple[list[int], list[list[list[tuple[int, int]]]]] | None:
    """The pods' order along the band and each pod's pieces per sub-band in lay order.

    Parameters
    ----------
    shares : list
        ``shares[P][m]``: the ``[(group, hosts)]`` each pod gives each sub-band.
    heights : list of int
        ``heights[m]``: rows per sub-band; sub-band ``j`` holds ``heights[j] * C`` hosts.
    w_tor, w_pod : float
        Weight of a pipeline hop crossing the ToR tier and the pod tier.

    Returns
    -------
    (list of int, list) or None
        ``order[P]`` and ``pieces[P][m]`` (the pod's share in lay order); None when there are
        more than :data:`MAX_EXACT_PODS` pods.

    Examples
    --------
    One sub-band of 3 rows; pods of groups (2, 3), (3) and (1, 3) hosts, 12 in all. No order
    puts every pod edge on a whole column (5, 3 and 4 hosts), but pod 1 first, then pod 0
    with its group of 3 first (6 hosts: a whole column), then pod 2 steps only at the edge
    after 8 hosts (one hop on each tier); pod 2, entering at 8, starts with its group of 1.

    >>> order, pieces = pod_order([[[(0, 2), (1, 3)]], [[(2, 3)]], [[(3, 1), (4, 3)]]], [3])
    >>> order, [pieces[i][0] for i in order]
    ([1, 0, 2], [[(2, 3)], [(1, 3), (0, 2)], [(3, 1), (4, 3)]])
    """
    if len(shares) > MAX_EXACT_PODS:
        return None
    key = tuple(tuple(tuple(share) for share in pod) for pod in shares)
    order, pieces = _pod_order(key, tuple(heights), float(w_tor), float(w_pod))
    return list(order), [[list(piece) for piece in pod] for pod in pieces]


@functools.lru_cache(maxsize=1024)
def _pod_order(shares: tuple, heights: tuple, w_tor: float, w_pod: float) -> tuple[tuple, tuple]:
    """:func:`pod_order` on tuples, memoised (the band splits of both
    :data:`~rankmap.placement.nested_bands_layout.RAGGED` weights often give the same shares:
    1,319 distinct calls of 1,782 on the deep-pipeline benchmark at 100,000 hosts, 25% busy);
    its result as tuples."""
    n, m = len(shares), len(heights)
    sizes = np.array([[sum(k for _, k in shares[i][j]) for j in range(m)] for i in range(n)], dtype=float)
    bits, steps = _subsets(n)
    totals = (bits @ sizes).astype(np.int64)                               # (2**n, m) hosts left of the edge
    h = np.asarray(heights, dtype=np.int64)
    resid = totals % h                                                     # (2**n, m)
    edge = (w_tor + w_pod) * (resid != 0).sum(axis=1).astype(float)
    for j in range(m - 1):                                                 # pod edges that move between sub-bands
        below = -(-totals[:, j + 1] // h[j + 1])
        edge += w_pod * np.abs(totals[:, j] // h[j] - below)
    edge[-1] = 0.0
    inner, lays = _inner(shares, heights, w_tor)                           # (P, m, max h), orders
    # a pod's entry cost depends on the residues only: per residue code (mixed radix h) first
    mult = np.cumprod(np.concatenate([[1], h[:-1]]))                      # (m,)
    every = (np.arange(int(np.prod(h)))[:, None] // mult) % h              # (codes, m) residues of each code
    enter = np.stack(inner)[:, np.arange(m), every].sum(axis=2)           # (P, codes), summed over m as ever
    enter = enter[:, (resid * mult).sum(axis=1)].ravel()                   # (P * 2**n): pod i after set S
    best = np.zeros(1 << n)
    last = np.full(1 << n, -1, dtype=np.int64)
    for have, prev, pods, at, row in steps:                                # (S,), (S, k) x 3, (S,)
        cand = best[prev] + enter[at]
        k = cand.argmin(axis=1)                                            # first: the highest pod index
        best[have] = cand[row, k] + edge[have]
        last[have] = pods[row, k]
    order, s = [], (1 << n) - 1
    while s:
        order.append(int(last[s]))
        s ^= 1 << order[-1]
    order.reverse()
    pieces = [[tuple(shares[i][j]) for j in range(m)] for i in range(n)]
    s = 0
    for i in order:
        for j in range(m):
            pieces[i][j] = tuple(lays[i][j][int(resid[s, j])])
        s |= 1 << i
    return tuple(order), tuple(map(tuple, pieces))


@functools.lru_cache(maxsize=None)
def _subsets(n: int) -> tuple[np.ndarray, list]:
    """``bits[2**n, n]`` (1.0: pod i in subset S; floats, so that the subsets' totals are one
    BLAS product, exact for sums below 2**53) and the dynamic programme's steps in order of
    subset size: per size k the subsets ``S[s]``, and for each its ``k`` pods ``i`` (highest
    first, so that ties keep the given order) with ``S - i``, as ``(S[s], prev[s, k],
    pods[s, k], at[s, k], row[s])``, ``at = i * 2**n + (S - i)`` (an index into the flattened
    ``enter[P, 2**n]``) and ``row = 0 .. len(S) - 1``."""
    masks = np.arange(1 << n, dtype=np.int64)
    bits = (masks[:, None] >> np.arange(n)) & 1
    count = bits.sum(axis=1)
    steps = []
    for k in range(1, n + 1):
        have = masks[count == k]
        pods = np.stack([np.nonzero(bits[s])[0][::-1] for s in have])   # (S, k)
        prev = have[:, None] ^ (1 << pods)
        steps.append((have, prev, pods, (pods << n) | prev, np.arange(have.size)))
    return bits.astype(float), steps


def _inner(shares: list, heights: list[int], w_tor: float) -> tuple[list[np.ndarray], list]:
    """Per pod ``cost[m, max h]``, the steps at group edges inside its share of each sub-band
    when the share starts at running total ``r`` (mod the sub-band's height), and the piece
    order reaching it (``lays[P][m][r]``)."""
    hmax = max(heights)
    costs, lays = [], []
    for pod in shares:
        cost = np.zeros((len(heights), hmax))
        lay = []
        for j, (share, h) in enumerate(zip(pod, heights)):
            steps, orders = _share_lays(tuple(share), h, w_tor)
            cost[j, :h] = steps
            lay.append([list(o) for o in orders])
        costs.append(cost)
        lays.append(lay)
    return costs, lays


@functools.lru_cache(maxsize=4096)
def _share_lays(share: tuple, h: int, w_tor: float) -> tuple[np.ndarray, tuple]:
    """For one pod's ``share`` (``(group, hosts)`` pairs) in a sub-band of ``h`` rows, per
    running total ``r`` it starts from (mod ``h``): ``w_tor`` times the fewest steps at group
    edges inside it (``cost[h]``, read only) and the piece order reaching them (the first such
    order; all orders of at most :data:`MAX_ORDERED_GROUPS` pieces, else the given one).
    Memoised: the bands of the nested layouts share pods."""
    if len(share) < 2:
        cost, lay = np.zeros(h), (share,) * h
    else:
        orders = list(itertools.permutations(share)) if len(share) <= MAX_ORDERED_GROUPS else [share]
        inside = np.cumsum([[k for _, k in o] for o in orders], axis=1)[:, :-1]      # (orders, pieces - 1)
        steps = ((np.arange(h)[:, None, None] + inside[None]) % h != 0).sum(axis=2)  # (h, orders)
        b = steps.argmin(axis=1)                                     # first order with the fewest steps
        cost, lay = w_tor * steps[np.arange(h), b], tuple(orders[k] for k in b)
    cost.flags.writeable = False
    return cost, lay
