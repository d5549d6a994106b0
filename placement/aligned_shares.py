"""Which of a pod's ToR groups go to the upper sub-band of a band of two, chosen along the
band so that the pod edges line up between the sub-bands.

In the nested band layout (:mod:`rankmap.placement.nested_bands_layout`) each pod of a band
gives whole groups to each of the band's two sub-bands (``h0`` and ``h1`` rows), and the
upper sub-band must get exactly ``h0 * C`` hosts. Each pod's own split is chosen near its
share of the band; but four groups rarely split in the band's ratio, so a pod's edge below
sits a few columns off its edge above, and every column between sends a pipeline hop across
the pod tier. What counts is the offset at each pod edge, the running sum of those
differences: a pod whose upper part is too wide followed by one whose upper part is too
narrow cancel. With the pods in a given order, the offset after pod ``k`` depends only on
the upper sub-band's running total ``T``, so the splits that minimise the offsets over all
pod edges (priced as :func:`~rankmap.placement.pod_order.pod_order` prices an edge: a step of
the edge inside a sub-band crosses both tiers, every column the edge moves between the
sub-bands the pod tier) are found by dynamic programming over ``T`` (a knapsack, Cormen et
al., *Introduction to Algorithms*, 3rd ed., ch. 16.2 / 35.5).

Deep pipeline, 100,000 hosts: at 25% busy the best nested start goes from 8,526.7 to 8,523.7
units and the plan from 54.907 to 54.888 TB (gap 1.38 -> 1.35%); at 50% busy the best start's
pod edges still move by 30 columns in all between sub-bands (its pod tier carries 49 hops
inside bands): the group sizes allow no better split there.
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.band_pods import group_subsets

__all__ = ["aligned_shares"]


def aligned_shares(pods: list, heights: list[int], cols: int, order: list[int], w_tor: float = 1.0,
                   w_pod: float = 1.0) -> list | None:
    """``shares[P][2]``: per pod the ``[(group, hosts)]`` of its upper and of its lower
    sub-band part, the upper parts summing to ``heights[0] * cols``, chosen to minimise the
    edge costs along ``order``.

    Parameters
    ----------
    pods : list
        ``pods[P]``: the ``[(group, hosts)]`` of each pod of the band.
    heights : list of int
        The rows of the band's two sub-bands.
    cols : int
        Hosts per row (C).
    order : list of int
        The pods' order along the band.
    w_tor, w_pod : float
        Weights of a pipeline hop crossing the ToR and the pod tier.

    Returns
    -------
    list or None
        ``shares[P][2]`` indexed as ``pods``; None when no split by whole groups fills the upper
        sub-band exactly, or the band has more than two sub-bands.

    Examples
    --------
    Sub-bands of 2 + 2 rows of 10 hosts; two pods of groups (6, 4, 5, 5) and (4, 6, 5, 5) hosts.
    Each pod alone splits 10 : 10, but {6, 4} over {5, 5} and {5, 5} over {4, 6} are
    equally near; what matters is that both edges line up.

    >>> s = aligned_shares([[(0, 6), (1, 4), (2, 5), (3, 5)], [(4, 4), (5, 6), (6, 5), (7, 5)]], [2, 2], 10, [0, 1])
    >>> [sum(n for _, n in part) for pod in s for part in pod]
    [10, 10, 10, 10]
    """
    if len(heights) != 2:
        return None
    h0, h1 = heights
    target = h0 * cols
    inf = np.inf
    best = np.full(target + 1, inf)
    best[0] = 0.0
    picks = []
    total = np.arange(target + 1)
    hosts = 0
    for k, i in enumerate(order):
        options = group_subsets(pods[i])
        sizes = [sum(pods[i][g][1] for g in o) for o in options]
        new = np.full(target + 1, inf)
        pick = np.full(target + 1, -1, dtype=np.int64)
        for o, t in enumerate(sizes):
            if t > target:
                continue
            cand = np.full(target + 1, inf)
            cand[t:] = best[:target + 1 - t]
            better = cand < new
            new[better] = cand[better]
            pick[better] = o
        hosts += sum(n for _, n in pods[i])
        if k < len(order) - 1:
            new += _edge_cost(total, hosts, h0, h1, w_tor, w_pod)
        best = new
        picks.append((options, pick))
    if not np.isfinite(best[target]):
        return None
    shares = [None] * len(pods)
    t = target
    for i, (options, pick) in zip(reversed(order), reversed(picks)):
        chosen = set(options[int(pick[t])])
        upper = [pods[i][g] for g in range(len(pods[i])) if g in chosen]
        shares[i] = [upper, [pods[i][g] for g in range(len(pods[i])) if g not in chosen]]
        t -= sum(n for _, n in upper)
    return shares


def _edge_cost(upper: np.ndarray, hosts: int, h0: int, h1: int, w_tor: float, w_pod: float) -> np.ndarray:
    """Cost of a pod edge after ``hosts`` hosts of the band, ``upper[T]`` of them in the upper
    sub-band: a step inside each sub-band whose running total is no whole column (both
    tiers), and the columns between the edge's place above and below (pod tier)."""
    lower = hosts - upper
    steps = (upper % h0 != 0).astype(float) + (lower % h1 != 0)
    return (w_tor + w_pod) * steps + w_pod * np.abs(upper // h0 - (-(-lower // h1)))
