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

The total reached is found first (the reachable sums as the bits of a Python integer,
one shift per option), and each pod's table is then dense over the window of totals that
can lie on a way to it (:func:`_windows`: reachable so far, and the pods after it can still
add the rest; one total for the last pod, 500 on average on the deep-pipeline benchmark at
100,000 hosts, 25% busy, against 716 reachable so far at most). Each pod is one
step over all its options at once: ``cost[D, W]`` read from a strided view of the table
before shifted by each option's size, its least entry per total taken (:func:`numpy.argmin`
keeps the first option listed on ties); only that choice per total is kept for the walk
back, not the table. Each pod's options are reduced to their distinct
sizes (options of one size cost the same, and the first is kept on ties), for all pods at
once (:func:`_option_costs`), and only the walk back from the reached total is returned:
the one option per pod that the caller reads. Calls repeat with the same pods (the layout
tries several row splits that share bands), so results are memoised.

References
----------
Bellman, *Dynamic Programming* (1957): the min-plus recurrence over running totals;
Martello and Toth, *Knapsack Problems* (1990), ch. 4: subset sums over running totals.
"""

from __future__ import annotations

import functools
import itertools
import operator

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
    pods = list(itertools.pairwise(ends.tolist()))
    lows, highs = _windows(size, ends, target) if pods else ([], [])
    n = target + 1
    tables = np.full((2, 3 * n), np.inf)      # pod p reads table p % 2, writes the other: best[t] at [n + t]
    shifted = [np.lib.stride_tricks.as_strided(b, (n + 1, n), b.strides * 2) for b in tables]  # [j, t]: b[j + t]
    # a table holds stale totals below its window (windows only move up), never read: a read
    # outside the window before falls below total 0 or above every total written (inf)
    tables[0, n], choices = 0.0, []
    for p, ((a, b), lo, hi) in enumerate(zip(pods, lows, highs)):
        cost = shifted[p % 2][n - size[a:b], lo:hi + 1]          # (D, W): best[t - size], a copy
        cost += miss[a:b, None]
        if ragged:                                                # + 0.0 changes no cost (none is -0.0)
            cost += rag[a:b, None]
        # per total the first least option (argmin keeps the first on ties): (W,), not the
        # (D, W) table itself, which at 100,000 hosts held ~200 MB until the walk back
        arg = cost.argmin(axis=0)
        tables[1 - p % 2, n + lo:n + hi + 1] = cost[arg, np.arange(arg.size)]
        choices.append(arg.astype(np.int32))
    t = reached = highs[-1] if pods else 0
    picks = []
    for arg, (a, _), lo, start in zip(reversed(choices), reversed(pods), reversed(lows),
                                      reversed((np.cumsum(counts) - counts).tolist())):
        k = int(first[a + int(arg[t - lo])])                      # the first option listed on ties
        picks.append(k)
        t -= int(flat[start + k])
    return reached, tuple(reversed(picks))


def _windows(size: np.ndarray, ends: np.ndarray, target: int) -> tuple[list[int], list[int]]:
    """Per pod the totals ``lo[P] .. hi[P]`` its table needs (pod ``p``'s option sizes
    ``size[ends[p]:ends[p + 1]]``): those reachable so far (at most the pods' largest options
    summed) from which the pods after it can still reach the total reached (``hi[-1]``, the
    largest reachable within ``target``; reachable sums as bits of a Python integer). Every
    total on the walk back lies inside, and every total a table in its window reads from lies
    in the window before (or is unreachable)."""
    reach, mask, sizes = 1, (1 << (target + 1)) - 1, size.tolist()
    for a, b in itertools.pairwise(ends.tolist()):
        reach = functools.reduce(operator.or_, map(reach.__lshift__, sizes[a:b])) & mask
    top = reach.bit_length() - 1
    most, least = np.maximum.reduceat(size, ends[:-1]), np.minimum.reduceat(size, ends[:-1])   # (P,) each
    after_max = np.cumsum(np.concatenate([[0], most[:0:-1]]))[::-1]      # the pods after each, at most
    after_min = np.cumsum(np.concatenate([[0], least[:0:-1]]))[::-1]
    lo = np.maximum(0, top - after_max)
    hi = np.minimum(np.minimum(np.cumsum(most), target), top - after_min)
    return lo.tolist(), hi.tolist()

