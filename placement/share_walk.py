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

Only the *reachable* totals are kept (sums of group sizes: a few thousand of the up to
50,000 totals of a sub-band at 100,000 hosts, most groups being of 64 hosts), each pod's
options are reduced to their distinct sizes (options of one size cost the same, and the
first is kept on ties), and only the walk back from the reached total is returned: the one
option per pod that the caller reads. Calls repeat with the same pods (the layout tries
several row splits that share bands), so results are memoised.

References
----------
Bellman, *Dynamic Programming* (1957): the min-plus recurrence over running totals;
Martello and Toth, *Knapsack Problems* (1990), ch. 4: subset sums over reachable states only.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

__all__ = ["share_walk"]


def _option_costs(sizes: np.ndarray, total: int, frac: float, rows: tuple[int, int],
                  ragged: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(size[D], miss[D], ragged_cost[D], first[D])`` of a pod's distinct option sizes
    (``first`` the index of the first option of each size)."""
    size, first = np.unique(sizes, return_index=True)
    steps = (size % rows[0] != 0).astype(np.int64)
    if rows[1] > 0:
        steps += (total - size) % rows[1] != 0
    return size, np.abs(size - frac * total) / rows[0], ragged * steps, first


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


@functools.lru_cache(maxsize=64)
def _walk(flat: bytes, counts: bytes, totals: bytes, target: int, frac: float, rows: tuple[int, int],
          ragged: float) -> tuple[int, tuple[int, ...]]:
    """:func:`share_walk` on its memo key: ``flat`` every option size (int64, pod after pod),
    ``counts[P]`` options per pod, ``totals[P]`` free hosts per pod."""
    ends = np.cumsum(np.frombuffer(counts, dtype=np.int64))
    sizes = np.split(np.frombuffer(flat, dtype=np.int64), ends[:-1])
    totals = np.frombuffer(totals, dtype=np.int64).tolist()
    reached, best = np.zeros(1, dtype=np.int64), np.zeros(1)    # reachable totals (ascending), least cost
    low = np.full(target + 1, np.inf)                             # scratch, indexed by total
    pick = np.full(target + 1, -1)
    steps = []                                                    # per pod (totals[T], option[T])
    for pod_sizes, total in zip(sizes, totals):
        size, miss, rag, first = _option_costs(pod_sizes, total, frac, rows, ragged)
        for k in np.argsort(first):                               # listing order: the first kept on ties
            n = np.searchsorted(reached, target - size[k], side="right")   # the totals it still fits
            at = reached[:n] + size[k]                            # (T,) small arrays only: a few KB
            cost = best[:n] + miss[k] + rag[k]
            better = cost < low[at]
            low[at[better]] = cost[better]
            pick[at[better]] = first[k]
        top = min(target, int(reached[-1] + size.max()))
        reached = np.flatnonzero(pick[:top + 1] >= 0)
        best = low[reached]
        steps.append((reached, pick[reached]))
        low[reached] = np.inf
        pick[reached] = -1
    t = int(reached[-1])
    picks = []
    for (done, option), pod_sizes in zip(reversed(steps), reversed(sizes)):
        k = int(option[np.searchsorted(done, t)])
        picks.append(k)
        t -= int(pod_sizes[k])
    return int(reached[-1]), tuple(reversed(picks))
