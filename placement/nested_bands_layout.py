"""Nested bands: pods in bands of stages, each pod's ToR groups in sub-bands inside it.

On a fabric of several tiers the two tiers want blocks of different heights: a ToR group
of ``f`` hosts costs least as a block of about ``sqrt(f * w_col / w_row)`` stages, a pod of
four such groups as a block about twice as tall (a block of ``h`` rows and ``w`` columns
costs ``h * w_row`` ring crossings plus ``w * w_col`` pipeline hops on its boundary). A
band layout per tier (:mod:`rankmap.placement.band_layout`) meets one of the two heights;
this layout meets both at once: the grid is cut into *bands* of ``m * s`` rows, every band
holds whole pods (side by side, each in its own columns), and each pod's ToR groups are
shared out over its ``m`` *sub-bands* of ``s`` rows, each group a block of ``s`` rows inside
the pod's columns. Every row then crosses its ring once per group piece and once per pod
it passes, and the pipeline hops cross a pod only between bands.

Per band, the pods are the fewest whole pods whose free hosts fill the band exactly
(:mod:`rankmap.placement.subset_sum`; with no exact subset the last one is cut, its rest
kept for the next band); the groups of each pod go to the sub-bands by dynamic programming
over the sub-band's total (it must be exactly ``s * C`` hosts), keeping each pod's share of
every sub-band as near its share of the band as the group sizes allow, so that a pod's
columns in one sub-band line up with its columns in the next (a pod whose upper part is
wider than its lower part sends the difference of pipeline hops across the pod tier). Pods
are then ordered along the band so that these differences cancel as they accumulate.
Sub-bands are laid as in the band layout: group by group, each group's columns dealt round
robin over the sub-band's rows.

References
----------
Arnold (arXiv 2509.15940): DP and PP groups kept within the fewest minipods; MegaScale
(NSDI 2024): pods of ToR groups under a three-layer Clos.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.subset_sum import min_counts, pick_subset

__all__ = ["nested_band_cells", "nested_bands_starts", "trimmed", "without_smallest_pods"]

# Pods with more usable groups than this split their groups among sub-bands by prefixes
# of the group list (largest first) instead of every subset.
MAX_SUBSET_GROUPS = 8
# Columns of misalignment worth one pod share that does not fill whole columns of its
# sub-band (its edge steps by a column between rows: a pipeline hop across the pod on
# both tiers), tried in turn by :func:`nested_bands_starts`; 0 keeps the shares nearest
# the pod's fraction only.
RAGGED = (0.0, 2.0)
# Pods per band: the fewest that fill it (False), or each band its share of the pods left
# (True, :func:`_band_pods`); both are tried.
BALANCED = (False, True)
# Pods tried as the one a band takes only some whole groups of (:func:`_part_pod`).
PART_PODS = 8
PART_POD_ALL = False


def nested_bands_starts(problem: GridProblem) -> list[np.ndarray]:
    """Nested band layouts of ``problem`` for sub-bands of 1-4 rows and 2-4 sub-bands per
    band, the rows that do not fill a band laid three ways (:func:`_heights`,
    :func:`_even_heights`, :func:`_last_heights`), each with the pod shares of every
    :data:`RAGGED` weight, the pods per band of both :data:`BALANCED` ways, and with the
    groups as they are and :func:`trimmed` (those that fit the grid and succeed); empty on
    a one-tier fabric."""
    if not problem.domains or problem.rows < 2:
        return []
    out, seen = [], set()
    for s, m, split, ragged, trim, balanced in itertools.product(
            range(1, 5), range(2, 5), (_heights, _even_heights, _last_heights), RAGGED, (0, 1, 2), BALANCED):
        if s * m > problem.rows:
            continue
        heights = split(problem.rows, s, m)
        if (tuple(map(tuple, heights)), ragged, trim, balanced) in seen:
            continue
        seen.add((tuple(map(tuple, heights)), ragged, trim, balanced))
        sub = problem
        if trim == 2:
            sub = dataclasses.replace(sub, free=without_smallest_pods(sub))
        if trim:
            sub = dataclasses.replace(sub, free=trimmed(sub, s))
        cells = nested_band_cells(sub, s, m, heights, ragged, balanced, part=PART_POD_ALL or trim == 2)
        if cells is not None:
            out.append(cells)
    return out


def without_smallest_pods(problem: GridProblem) -> tuple[int, ...]:
    """``free[K]`` with the smallest pods (smallest first, then the pod index) left out as
    long as the spare hosts cover them: every band then fills with fewer, whole pods.

    Examples
    --------
    >>> without_smallest_pods(GridProblem(2, 5, (3, 3, 4, 4, 2), 10, 1, 0, ((0, 0, 1, 1, 2),), (1.0, 1.0)))
    (3, 3, 4, 4, 0)
    """
    free = np.asarray(problem.free).copy()
    dom = np.asarray(problem.domains[0])
    spare = int(free.sum()) - problem.rows * problem.cols
    room = np.bincount(dom, weights=free).astype(np.int64)
    for p in sorted(np.nonzero(room)[0].tolist(), key=lambda p: (room[p], p)):
        if room[p] > spare:
            break
        free[dom == p] = 0
        spare -= int(room[p])
    return tuple(int(f) for f in free)


def trimmed(problem: GridProblem, s: int) -> tuple[int, ...]:
    """``free[K]`` with as many groups as the spare hosts allow cut down to a multiple of
    ``s`` (fewest hosts dropped first, then the group index): a group that fills whole
    columns of its sub-band has straight edges, so no pipeline hop steps across them.

    Examples
    --------
    Two rows of 7 on groups of 4, 5 and 8 hosts (3 spare), sub-bands of 3 rows: the group of
    4 loses one host, the group of 5 two; the group of 8 would need two more.

    >>> trimmed(GridProblem(2, 7, (4, 5, 8), 10, 1), 3)
    (3, 3, 8)
    """
    free = list(problem.free)
    spare = sum(free) - problem.rows * problem.cols
    for g in sorted(range(len(free)), key=lambda g: (free[g] % s, g)):
        cut = free[g] % s
        if 0 < cut <= spare:
            free[g] -= cut
            spare -= cut
    return tuple(free)


def _heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: bands of ``m`` sub-bands of ``s`` rows, the last sub-band
    taking the rows left over."""
    subs = [min(s, rows - q) for q in range(0, rows, s)]
    return [subs[i:i + m] for i in range(0, len(subs), m)]


def _last_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: bands of ``m`` sub-bands of ``s`` rows, the rows left over
    shared out over the last band's sub-bands (e.g. 32 rows, s=3, m=2: four bands of 3 + 3
    rows and one of 4 + 4)."""
    bands = rows // (s * m)
    last = rows - (bands - 1) * s * m
    return [[s] * m] * (bands - 1) + [[last // m + (j >= m - last % m) for j in range(m)]]


def _even_heights(rows: int, s: int, m: int) -> list[list[int]]:
    """Sub-band heights per band: as many bands as ``rows / (s * m)`` rounds to, the rows
    shared out as evenly as possible over the bands and, in each, over its ``m`` sub-bands
    (e.g. 32 rows, s=3, m=2: five bands of 6, 6, 6, 7, 7 rows, sub-bands of 3 and 4)."""
    bands = max(1, round(rows / (s * m)))
    out = []
    for b in range(bands):
        height = rows // bands + (b >= bands - rows % bands)
        k = min(m, height)
        out.append([height // k + (j >= k - height % k) for j in range(k)])
    return out


def nested_band_cells(problem: GridProblem, s: int, m: int, heights: list | None = None,
                      ragged: float = 0.0, balanced: bool = False, part: bool = False) -> np.ndarray | None:
    """Placement ``cells[R, C]`` of bands of ``m`` sub-bands of ``s`` rows (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With ``domains[0][K]``, the pod of each ToR group.
    s : int
        Rows per sub-band (the last sub-band of the grid takes the rows left over).
    m : int
        Sub-bands per band.
    heights : list of list of int, optional
        ``heights[B][m]``: the rows of each sub-band of each band, summing to R (default:
        ``m`` sub-bands of ``s`` rows per band, the last sub-band taking the rows left over).
    ragged : float
        Columns of misalignment that a pod share not filling whole columns of its sub-band
        is worth (:data:`RAGGED`).
    balanced : bool
        Each band takes its share of the pods left rather than the fewest (:data:`BALANCED`).
    part : bool
        A band that whole pods cannot fill takes whole groups of one more pod where they fill
        it (:func:`_part_pod`) before cutting a group.

    Returns
    -------
    ndarray or None
        ``cells[R, C]`` within every group's free hosts, or None when the free hosts do not
        hold the grid or a band's sub-bands cannot be filled exactly.

    Examples
    --------
    Four rows of 4 hosts; two pods, each of two groups of 4 hosts: one band of two
    sub-bands of two rows, each pod two columns wide, its groups one above the other.

    >>> p = GridProblem(4, 4, (4, 4, 4, 4), 10, 1, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
    >>> nested_band_cells(p, 2, 2).tolist()
    [[0, 0, 2, 2], [0, 0, 2, 2], [1, 1, 3, 3], [1, 1, 3, 3]]
    """
    R, C = problem.rows, problem.cols
    free = np.asarray(problem.free, dtype=np.int64).copy()
    if free.sum() < R * C:
        return None
    dom = np.asarray(problem.domains[0])
    cells = np.empty((R, C), dtype=np.int64)
    r = 0
    for band in heights or _heights(R, s, m):
        pieces = _band_pods(dom, free, sum(band) * C, balanced, part)
        if pieces is None:
            return None
        split = _split_band(pieces, band, C, ragged)
        if split is None:
            return None
        for h, row in zip(band, split):
            _lay_sub_band(cells, r, h, row)
            r += h
    return cells


def _band_pods(dom: np.ndarray, free: np.ndarray, need: int, balanced: bool = False,
               part: bool = False) -> list | None:
    """The pods of one band, as ``[[(group, hosts), ...] per pod]`` summing to ``need``: the
    fewest whole pods that fill it exactly (``balanced``: as many whole pods as the band's
    share of the pods left, those nearest the mean size first, :func:`_exact_count`), else
    (``part``) whole pods and whole groups of one more (:func:`_part_pod`), else whole pods
    and part of one (its largest groups first, the last cut); taken hosts leave ``free``."""
    room = np.bincount(dom, weights=free, minlength=int(dom.max()) + 1).astype(np.int64)
    if room.sum() < need:
        return None
    items = [(int(p), int(room[p])) for p in np.argsort(-room, kind="stable") if room[p] > 0]
    exact = None
    if balanced:
        k = max(1, round(need / float(np.mean([f for _, f in items]))))
        exact = _exact_count(sorted(items, key=lambda pf: (abs(pf[1] - need / k), pf[0])), need, k)
    if exact is None:
        exact = pick_subset(items, need)
    if exact is None and part:
        pods = _part_pod(dom, free, items, need)
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


def _part_pod(dom: np.ndarray, free: np.ndarray, items: list[tuple[int, int]], need: int) -> list | None:
    """Whole pods and whole groups of one more pod (tried smallest first, at most
    :data:`PART_PODS` of them) whose hosts fill ``need`` exactly, the fewest pods in all
    (then the most hosts of the partial pod), as :func:`_band_pods` returns them (taken hosts
    leave ``free``); None when there are none."""
    best = None
    for part, _ in sorted(items, key=lambda pf: (pf[1], pf[0]))[:PART_PODS]:
        groups = [(int(g), int(free[g])) for g in np.nonzero((dom == part) & (free > 0))[0]]
        others = [(p, f) for p, f in items if p != part]
        counts = min_counts(others, need)
        for option in _options(groups)[1:]:                      # at least one group of the partial pod
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


def _exact_count(items: list[tuple[int, int]], need: int, k: int) -> list[int] | None:
    """``k`` of ``items`` (``[(pod, hosts)]``) whose hosts sum to ``need`` exactly, the earliest
    items preferred (the colexicographic least subset); None when there are none. Dynamic
    programming over (count, sum) (Cormen et al., *Introduction to Algorithms*, 3rd ed.,
    ch. 35.5, with the item count fixed)."""
    reach = np.zeros((k + 1, need + 1), dtype=bool)              # reach[count, sum]
    reach[0, 0] = True
    before = []                                                  # reach before each item
    for _, size in items:
        before.append(reach.copy())
        if size <= need:
            reach[1:, size:] |= before[-1][:-1, :need + 1 - size]
    if not reach[k, need]:
        return None
    picked, c, t = [], k, need
    for i in range(len(items) - 1, -1, -1):
        if c == 0:
            break
        if not before[i][c, t]:                                  # item i is needed
            picked.append(items[i][0])
            c, t = c - 1, t - items[i][1]
    return picked[::-1]


def _split_band(pods: list, heights: list[int], cols: int, ragged: float = 0.0) -> list[list[tuple[int, int]]] | None:
    """Each sub-band's ``[(group, hosts)]`` in lay order: the pods' groups shared out so that
    sub-band ``j`` holds exactly ``heights[j] * cols`` hosts, pods ordered to line up."""
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


def _options(groups: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    """Subsets (as index tuples) of a pod's groups that may go to one sub-band."""
    n = len(groups)
    if n <= MAX_SUBSET_GROUPS:
        return [c for k in range(n + 1) for c in itertools.combinations(range(n), k)]
    return [tuple(range(k)) for k in range(n + 1)]


def _pick_share(pods: list, target: int, frac: float, rows: tuple = (1, 0), ragged: float = 0.0) -> list | None:
    """Per pod the ``[(group, hosts)]`` it gives one sub-band, summing to ``target`` over the
    pods, each pod's share as near ``frac`` of its hosts as possible (dynamic programming
    over the running total, minimising the sum of ``|share - frac * hosts| / rows[0]``, the
    columns by which the pod's share misses its fraction, plus ``ragged`` per share, here and
    in the last sub-band of ``rows[1]`` rows, that fills no whole columns); with no exact
    whole-group split, one group of the last pod that can is cut to make up the rest."""
    inf = np.inf
    best = np.full(target + 1, inf)
    best[0] = 0.0
    choice = []                                          # choice[pod][total] = option index
    opts = [_options(p) for p in pods]
    for pod, options in zip(pods, opts):
        sizes = [sum(pod[i][1] for i in o) for o in options]
        total = sum(n for _, n in pod)
        want = frac * total
        new, arg = np.full(target + 1, inf), np.full(target + 1, -1, dtype=np.int64)
        for k, size in enumerate(sizes):
            if size > target:
                continue
            cand = np.full(target + 1, inf)
            steps = (size % rows[0] != 0) + (rows[1] > 0 and (total - size) % rows[1] != 0)
            cand[size:] = best[:target + 1 - size] + abs(size - want) / rows[0] + ragged * steps
            better = cand < new
            new[better], arg[better] = cand[better], k
        best = new
        choice.append(arg)
    total = target if np.isfinite(best[target]) else int(np.nonzero(np.isfinite(best))[0].max())
    picks, t = [], total
    for pod, options, arg in zip(reversed(pods), reversed(opts), reversed(choice)):
        o = options[int(arg[t])]
        picks.append([pod[i] for i in o])
        t -= sum(pod[i][1] for i in o)
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


def _lay_sub_band(cells: np.ndarray, r0: int, height: int, pieces: list[tuple[int, int]]) -> None:
    """Lay ``pieces`` (``[(group, hosts)]``, ``height * C`` hosts in all) on rows
    ``r0 .. r0 + height - 1`` left to right, each piece's columns dealt round robin over
    the rows (every row gets exactly C; a piece's rows differ by at most one column)."""
    widths = np.zeros((height, len(pieces)), dtype=np.int64)         # widths[row, piece]
    nxt = 0
    for i, (_, hosts) in enumerate(pieces):
        q, rem = divmod(hosts, height)
        widths[:, i] = q
        widths[(nxt + np.arange(rem)) % height, i] += 1
        nxt = (nxt + rem) % height
    groups = [g for g, _ in pieces]
    for h in range(height):
        cells[r0 + h] = np.repeat(groups, widths[h])
