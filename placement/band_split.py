"""One band of the nested band layout split over its sub-bands: which of each pod's ToR groups
go to which sub-band, and the order of pods and groups along it.

A band of the nested band layout (:mod:`rankmap.placement.nested_bands_layout`) holds whole
pods side by side; sub-band ``j`` of ``heights[j]`` rows must get exactly ``heights[j] * C``
hosts. Sub-band by sub-band, every pod gives one subset of the groups it has left, the
subsets chosen together by a min-plus programme over the running total
(:mod:`rankmap.placement.share_walk`) so that each pod's share stays near the sub-band's
fraction of the band; where no whole-group split fills a sub-band exactly, one group is cut.
The pods are then ordered along the band (:mod:`rankmap.placement.pod_order`, or greedily
when the band has too many pods), and each pod's groups inside its shares.

The layouts try many row splits whose bands hold the same pods (deep pipeline, 100,000
hosts: 1,716 distinct splits of 3,456), so :func:`split_band` is memoised on its inputs,
at most :data:`MEMO_SIZE` bands.
"""

from __future__ import annotations

import functools

import numpy as np

from rankmap.placement.aligned_shares import aligned_shares
from rankmap.placement.band_pods import group_subsets
from rankmap.placement.pod_order import pod_order
from rankmap.placement.share_walk import share_walk

__all__ = ["MEMO_SIZE", "split_band"]

# Bands kept by :func:`split_band`'s memo (each a few hundred (group, hosts) pairs).
MEMO_SIZE = 2048


def split_band(pods: list, heights: list[int], cols: int, ragged: float = 0.0, weights: tuple = (1.0, 1.0),
               aligned: bool = False) -> tuple | None:
    """:func:`_split_band` memoised on its inputs (as tuples); its result as tuples,
    ``split[m][pieces]`` of ``(group, hosts)``, or None.

    Examples
    --------
    Two pods of groups 4 + 4 hosts, two sub-bands of one row of 8: each pod gives one group
    to each sub-band.

    >>> split_band([[(0, 4), (1, 4)], [(2, 4), (3, 4)]], [1, 1], 8)
    (((0, 4), (2, 4)), ((1, 4), (3, 4)))
    """
    key = tuple(tuple((int(g), int(n)) for g, n in pod) for pod in pods)
    return _split_memo(key, tuple(int(h) for h in heights), int(cols), float(ragged),
                       tuple(float(w) for w in weights), bool(aligned))


@functools.lru_cache(maxsize=MEMO_SIZE)
def _split_memo(pods: tuple, heights: tuple, cols: int, ragged: float, weights: tuple,
                aligned: bool) -> tuple | None:
    """:func:`split_band`'s memo: :func:`_split_band` with its result as tuples."""
    split = _split_band([list(pod) for pod in pods], list(heights), cols, ragged, weights, aligned)
    return None if split is None else tuple(tuple(row) for row in split)


def _split_band(pods: list, heights: list[int], cols: int, ragged: float = 0.0, weights: tuple = (1.0, 1.0),
                aligned: bool = False) -> list[list[tuple[int, int]]] | None:
    """Each sub-band's ``[(group, hosts)]`` in lay order: the pods' groups shared out so that
    sub-band ``j`` holds exactly ``heights[j] * cols`` hosts, pods ordered to line up
    (:func:`~rankmap.placement.pod_order.pod_order` with ``weights``, the ToR and pod tiers'
    weights; greedily when the band has too many pods); ``aligned``: two sub-bands' shares
    chosen again along that order (:func:`~rankmap.placement.aligned_shares.aligned_shares`)
    and the pods ordered again."""
    shares = [[] for _ in pods]                          # shares[pod][sub-band] = [(group, hosts)]
    rest = [list(p) for p in pods]
    for j, h in enumerate(heights[:-1]):
        frac = h / sum(heights[j:])
        rows = (h, heights[j + 1]) if j + 2 == len(heights) else (h, 0)
        picked = _pick_share(rest, h * cols, frac, rows, ragged)
        if picked is None:
            return None
        for i, share in enumerate(picked):
            shares[i].append(share)
            taken = dict(share)
            rest[i] = [(g, n - taken.get(g, 0)) for g, n in rest[i] if n - taken.get(g, 0) > 0]
    for i in range(len(pods)):
        shares[i].append(rest[i])
    found = pod_order(shares, heights, *weights)
    if found is not None and aligned:
        again = aligned_shares(pods, heights, cols, found[0], *weights)
        found = pod_order(again, heights, *weights) if again is not None else found
    if found is not None:
        order, pieces = found
        return [[piece for i in order for piece in pieces[i][j]] for j in range(len(heights))]
    order = _line_up([[sum(n for _, n in part) / h for part, h in zip(sh, heights)] for sh in shares])
    return [_straight([shares[i][j] for i in order], h) for j, h in enumerate(heights)]


def _straight(pods: list, height: int) -> list[tuple[int, int]]:
    """One sub-band's pieces in lay order: pod by pod, inside each pod the piece that ends on a
    whole column first (the running total of hosts a multiple of ``height``), so that as few
    group edges as possible step by a column between rows (each step is a pipeline hop
    across the edge); ties keep the pod's order."""
    out, carry = [], 0
    for pod in pods:
        left = list(pod)
        while left:
            i = min(range(len(left)), key=lambda i: ((carry + left[i][1]) % height != 0, i))
            carry = (carry + left[i][1]) % height
            out.append(left.pop(i))
    return out


def _pick_share(pods: list, target: int, frac: float, rows: tuple = (1, 0), ragged: float = 0.0) -> list | None:
    """Per pod the ``[(group, hosts)]`` it gives one sub-band, summing to ``target`` over the
    pods, each pod's share as near ``frac`` of its hosts as possible (dynamic programming
    over the running total, minimising the sum of ``|share - frac * hosts| / rows[0]``, the
    columns by which the pod's share misses its fraction, plus ``ragged`` per share, here and
    in the last sub-band of ``rows[1]`` rows, that fills no whole columns); with no exact
    whole-group split, one group of the last pod that can is cut to make up the rest."""
    opts, sizes = zip(*(_options(tuple(n for _, n in pod)) for pod in pods)) if pods else ((), ())
    return _shares_from(pods, opts, sizes, _share_table(pods, sizes, target, frac, rows, ragged), target)


@functools.lru_cache(maxsize=MEMO_SIZE)
def _options(hosts: tuple[int, ...]) -> tuple[tuple, tuple[int, ...]]:
    """A pod's options by its groups' ``hosts[k]``: the index subsets of its groups that may go
    to one sub-band (:func:`~rankmap.placement.band_pods.group_subsets`) and their hosts."""
    opts = tuple(group_subsets(list(hosts)))
    return opts, tuple(sum(hosts[i] for i in o) for o in opts)


def _share_table(pods, sizes, target, frac, rows, ragged) -> list:
    """The dynamic programme of :func:`_pick_share`
    (:func:`~rankmap.placement.share_walk.share_walk`): per pod ``{running total: option
    index}`` at the totals the walk back from the reached total passes (all that
    :func:`_shares_from` reads), then the total reached (``target``, else the largest below
    it: most bands have no exact whole-group split)."""
    reached, picks = share_walk(sizes, [sum(n for _, n in pod) for pod in pods], target, frac, rows, ragged)
    choice, t = [], reached
    for pod_sizes, k in zip(reversed(sizes), reversed(picks)):
        choice.append({t: k})
        t -= pod_sizes[k]
    return choice[::-1] + [reached]


def _shares_from(pods, opts, sizes, choice, target) -> list | None:
    """Walks :func:`_share_table`'s choices back from its reached total (its last entry); one
    group of the last pod that can is cut to make up what the total misses of ``target``."""
    *choice, total = choice
    picks, t = [], total
    for pod, options, pod_sizes, arg in zip(reversed(pods), reversed(opts), reversed(sizes), reversed(choice)):
        k = int(arg[t])
        picks.append([pod[i] for i in options[k]])
        t -= pod_sizes[k]
    picks.reverse()
    short = target - total
    for i in range(len(pods) - 1, -1, -1):              # cut one group not yet in the share
        if short == 0:
            break
        inside = {g for g, _ in picks[i]}
        spare = [(g, n) for g, n in pods[i] if g not in inside and n > short]
        if spare:
            g, _ = max(spare, key=lambda gn: (gn[1], -gn[0]))
            picks[i] = picks[i] + [(g, short)]
            short = 0
    return picks if short == 0 else None


def _line_up(widths: list[list[float]]) -> list[int]:
    """An order of the pods whose column offsets between sub-bands stay small: ``widths[P][m]``
    the columns each pod takes per sub-band; greedily the pod that brings the running offset
    of every sub-band against the first nearest zero (ties by index)."""
    w = np.asarray(widths)                               # (P, m)
    diff = w - w[:, :1]                                  # offsets against the first sub-band
    offset = np.zeros(w.shape[1])
    left, order = list(range(len(widths))), []
    while left:
        i = min(left, key=lambda i: (float(np.abs(offset + diff[i]).sum()), i))
        offset += diff[i]
        order.append(i)
        left.remove(i)
    return order
