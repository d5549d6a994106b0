"""The least-cost split of a band's pods over one sub-band: a min-plus programme over running totals.

Pods ``0 .. P-1`` each give one sub-band one of their options (a subset of their ToR
groups, ``sizes[p][k]`` hosts); the shares must sum to ``target`` hosts (else the largest
total below it). Choosing option ``k`` of pod ``p`` costs

    miss[p][k] + ragged * steps[p][k],   miss = |sizes[p][k] - frac * total[p]| / rows[0],

the columns by which the pod's share misses its fraction ``frac`` of the pod's hosts, and
``ragged`` per share that fills no whole column (here, of ``rows[0]`` rows, and in what the
pod has left for the last sub-band, of ``rows[1]`` rows; ``rows[1] == 0``: no last one).
The programme runs pod by pod over the running total, ``best[t]`` the least cost of
reaching total ``t``; ties keep the option listed first.

The table is dense over the totals ``0 .. top`` that the pods so far can reach at most
(``top`` grows pod by pod up to ``target``: a few hundred to a few thousand totals at
100,000 hosts), and each pod is one step over all its options at once: ``cost[D, top + 1]``
read from a strided view of the table shifted by each option's size, its least entry per
total taken (:func:`numpy.argmin` keeps the first option listed on ties). Each pod's options
are reduced to their distinct sizes (options of one size cost the same, and the first is
kept on ties), for all pods at once (:func:`_option_costs`), and only the walk back from
the reached total is returned: the one option per pod that the caller reads. Calls repeat
with the same pods (the layout tries several row splits that share bands), so results are
memoised.

References
----------
Bellman, *Dynamic Programming* (1957): the min-plus recurrence over running totals;
Martello and Toth, *Knapsack Problems* (1990), ch. 4: subset sums over running totals.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

__all__ = ["share_walk"]


def _option_costs(flat: np.ndarray, counts: np.ndarray, totals: np.ndarray, target: int, frac: float,
                  rows: tuple[int, int], ragged: float) -> tuple[np.ndarray, ...]:
    """Every pod's distinct option sizes within ``target``, pod after pod, each pod's in listing
    order: ``(size[N], miss[N], ragged_cost[N], first[N], ends[P + 1])``, ``first`` the index
    of the first option of each size in its pod, pod ``p``'s entries ``ends[p]:ends[p + 1]``
    (``flat`` every option size, ``counts[P]`` options and ``totals[P]`` free hosts per pod)."""
    pod = np.repeat(np.arange(len(counts)), counts)                    # (K,) pod of each option
    idx = np.flatnonzero(flat <= target)
    _, at = np.unique((pod * (int(flat.max(initial=0)) + 1) + flat)[idx], return_index=True)  # first (pod, size)
    idx = np.sort(idx[at])                                             # pod after pod, listing order
    size, p = flat[idx], pod[idx]
    total = totals[p]
    steps = (size % rows[0] != 0).astype(np.int64)
    if rows[1] > 0:
        steps += (total - size) % rows[1] != 0
    start = np.concatenate([[0], np.cumsum(counts)])
    return (size, np.abs(size - frac * total) / rows[0], ragged * steps, idx - start[p],
            np.searchsorted(p, np.arange(len(counts) + 1)))


def share_walk(sizes: list, totals: list, target: int, frac: float, rows: tuple[int, int],
               ragged: float) -> tuple[int, tuple[int, ...]]:
    """The reached total and the option each pod gives (module docstring).

    Parameters
    ----------
    sizes : list of list of int
        ``sizes[P][K_p]``: hosts of each option of each pod, in listing order.
    totals : list of int
        ``totals[P]``: free hosts of each pod.
    target : int
        Hosts the sub-band holds.
    frac : float
        The fraction of each pod's hosts its share should be.
    rows : (int, int)
        Rows of this sub-band and of the last one (0: this is not the second last).
    ragged : float
        Cost of a share that fills no whole column.

    Returns
    -------
    (int, tuple of int)
        The total reached (``target``, else the largest reachable below it) and
        ``picks[P]``, the option index of each pod on the least-cost way to it (the first
        option listed on ties, as a pod-by-pod scan keeping only strict improvements).

    Examples
    --------
    Two pods of groups 4+4 and 4+2, half of each wanted in a sub-band of 6 hosts:

    >>> share_walk([[0, 4, 4, 8], [0, 4, 2, 6]], [8, 6], 6, 0.5, (1, 0), 0.0)
    (6, (1, 2))
    """
    # the memo's key in a few flat byte strings: no long-lived small objects left behind
    flat = np.fromiter(itertools.chain.from_iterable(sizes), dtype=np.int64)
    counts = np.fromiter(map(len, sizes), dtype=np.int64, count=len(sizes))
    return _walk(flat.tobytes(), counts.tobytes(), np.asarray(totals, dtype=np.int64).tobytes(), int(target),
                 float(frac), (int(rows[0]), int(rows[1])), float(ragged))


@functools.lru_cache(maxsize=1024)
def _walk(flat: bytes, counts: bytes, totals: bytes, target: int, frac: float, rows: tuple[int, int],
          ragged: float) -> tuple[int, tuple[int, ...]]:
    """:func:`share_walk` on its memo key: ``flat`` every option size (int64, pod after pod),
    ``counts[P]`` options per pod, ``totals[P]`` free hosts per pod."""
    counts, flat = np.frombuffer(counts, dtype=np.int64), np.frombuffer(flat, dtype=np.int64)
    size, miss, rag, first, ends = _option_costs(flat, counts, np.frombuffer(totals, dtype=np.int64), target,
                                                 frac, rows, ragged)
    n = target + 1
    tables = np.full((2, 3 * n), np.inf)      # pod p reads table p % 2, writes the other: best[t] at [n + t]
    shifted = [np.lib.stride_tricks.as_strided(b, (n + 1, n), b.strides * 2) for b in tables]  # [j, t]: b[j + t]
    tables[0, n], width, steps = 0.0, 1, []   # totals 0..width-1 written (inf beyond: widths only grow)
    for p, (a, b) in enumerate(itertools.pairwise(ends.tolist())):
        width = min(target, width - 1 + int(size[a:b].max())) + 1
        cost = shifted[p % 2][n - size[a:b], :width] + miss[a:b, None] + rag[a:b, None]   # (D, W): best[t - size]
        k = cost.argmin(axis=0)                                   # the first option listed on ties
        tables[1 - p % 2, n:n + width] = cost[k, np.arange(width)]
        steps.append(first[a:b][k])                               # option[W], read at reachable totals only
    reached = np.flatnonzero(np.isfinite(tables[len(steps) % 2, n:n + width]))
    t = int(reached[-1])
    picks = []
    for option, start in zip(reversed(steps), reversed((np.cumsum(counts) - counts).tolist())):
        k = int(option[t])                                        # pod's option on the way to t
        picks.append(k)
        t -= int(flat[start + k])
    return int(reached[-1]), tuple(reversed(picks))
