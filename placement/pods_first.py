"""Pods first: lay the job over pods, then the ToR groups inside each pod.

On a fabric of several tiers a byte crossing pods also crosses the spine, so the pod tier
is decided first: the constructive layouts (:mod:`rankmap.placement.stage_runs_layout`,
:mod:`rankmap.placement.snake_layout`, :mod:`rankmap.placement.band_layout`) run on the
problem whose groups are the pods (:func:`rankmap.placement.tier_search.level_problem`),
and the cheapest few pod placements (by the pod tier's cost) are kept. Inside each pod
the rows (DP rings) it holds whole form a smaller grid, laid on the pod's ToR groups by the
same layouts (by the ToR tier's cost); the pod's cells in rows it shares with another pod
take, cell by cell, the ToR group of the neighbouring stage in the same column where it
has room (so the pipeline hop stays inside it), else that of the cell before, else the
group with the most room. One more start, :func:`whole_rows_first`, works on both tiers
at once: whole rows in every pod, then the rows left over on the ToR groups' remainders.

This is the decomposition Arnold (arXiv 2509.15940) uses for its scheduling: whole DP and
PP groups to pods (minipods) first, then the hosts inside them.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from rankmap.placement.band_layout import band_cells
from rankmap.placement.grid_problem import GridProblem, grid_cost
from rankmap.placement.snake_layout import snake_cells
from rankmap.placement.stage_runs_layout import stage_runs_starts

__all__ = ["pods_first_starts", "whole_rows_first", "CLASSIC_FILLS", "BAND_FILLS", "PAIR_FILLS"]

# Pod placements kept (cheapest first) and refined into ToR-group placements.
POD_PLACEMENTS = 3
# Fills of the pods' ToR groups (:func:`_fill_pod`): cell by cell, and by sub-bands.
CLASSIC_FILLS = ("align", "pieces", "stack2", "stack")
BAND_FILLS = ("bands2", "bands2s", "halves")
# Fills by column strips of two stacked groups (:func:`_fill_pairs`).
PAIR_FILLS = ("pairs-ab", "pairs-ac", "pairs-ad")


def _layouts(problem: GridProblem) -> list[np.ndarray]:
    """The constructive layouts of a one-tier ``problem`` that fit its capacities."""
    R, C, free = problem.rows, problem.cols, problem.free
    out = stage_runs_starts(R, C, free)
    out += [snake_cells(R, C, free, lambda c: grid_cost(problem, c), tries=8, seed=0)]
    # bands of 2-8 stages, and one band of every stage (a group per column strip)
    heights = sorted(set(range(2, min(R, 8) + 1)) | ({R} if 1 < R <= 64 else set()))
    out += [band_cells(R, C, free, s, waste=w) for s in heights for w in (False, True)]
    cap = np.asarray(free)
    return [c for c in out if c is not None and (np.bincount(c.ravel(), minlength=cap.size) <= cap).all()]


def _fill_pod(problem: GridProblem, pods: np.ndarray, cells: np.ndarray, pod: int, groups: np.ndarray,
              fill: str) -> bool:
    """Lay the ToR groups ``groups`` of ``pod`` on its cells of ``pods[R, C]`` into ``cells``;
    False when they do not fit. The pod's cells in rows it shares are taken row by row
    (``fill`` "align": the group of the neighbouring stage's cell where it has room, so the
    pipeline hop stays inside, else as "pieces"; "pieces": the fewest groups, the smallest
    that holds the whole piece, else the largest first) or column by column ("stack": a
    group fills its columns in every shared row before the next group starts, so that a
    band of stages keeps its pipeline hops inside groups; "stack2": the same in sub-bands
    of two shared rows, half the ring pieces for half the hops kept; "bands2": sub-bands of
    two shared rows, each with its own groups, :func:`_fill_bands`; "halves": every cell
    of the pod cut by count into sub-bands of two groups side by side, :func:`_count_bands`;
    "pairs-ab"/"-ac"/"-ad": column strips of two stacked groups, :func:`_fill_pairs`)."""
    mask = pods == pod
    left = np.asarray(problem.free)[groups].astype(np.int64)       # left[G]
    if fill.startswith("pairs"):  # the whole pod: column strips of two stacked ToR groups
        return _fill_pairs(cells, mask, groups, left, fill[-2:])
    if fill == "halves":  # the whole pod, by count: two ToR groups side by side per sub-band
        need = int(np.searchsorted(np.cumsum(np.sort(left)[::-1]), mask.sum()) + 1)
        return _fill_bands(cells, groups, left, _count_bands(mask, max(1, -(-need // 2))))
    full = np.nonzero(mask.all(axis=1))[0]
    if full.size:
        sub = GridProblem(int(full.size), problem.cols, tuple(int(x) for x in left), problem.w_row, problem.w_col,
                          problem.w_wrap)
        options = _layouts(sub)
        if not options:
            return False
        best = min(options, key=lambda c: grid_cost(sub, c))
        cells[full] = groups[best]
        left -= np.bincount(best.ravel(), minlength=groups.size)
    where = {int(g): i for i, g in enumerate(groups)}
    shared = [r for r in range(problem.rows) if mask[r].any() and not mask[r].all()]
    if fill in ("bands2", "bands2s"):  # plain, or a snake that looks ahead
        snake = fill == "bands2s"
        return _fill_bands(cells, groups, left, _row_bands(mask, shared, 2, snake), ahead=snake)
    if fill.startswith("stack"):
        height = int(fill[5:] or len(shared) or 1)                 # "stack2": sub-bands of 2 shared rows
        chunks = [shared[i:i + height] for i in range(0, len(shared), height)]
        order = [rc for chunk in chunks for rc in _column_major(mask, chunk)]
    else:
        order = [(r, c) for r in shared for c in np.nonzero(mask[r])[0]]
    prev, rest = -1, len(order)
    for i, (r, c) in enumerate(order):
        choice = []
        if fill == "align":
            near = [cells[q, c] for q in (r - 1, r + 1) if 0 <= q < problem.rows and mask[q, c] and cells[q, c] >= 0]
            choice = [where[int(g)] for g in near if left[where[int(g)]] > 0]
        if not fill.startswith("stack") and i and order[i - 1][0] != r:
            prev = -1                                               # a new row: its piece starts afresh
        if not choice and prev >= 0 and left[prev] > 0:
            choice = [prev]
        if not choice:
            if left.max() <= 0:
                return False
            rest = len(order) - i if fill.startswith("stack") else sum(1 for q, _ in order[i:] if q == r)
            holds = np.nonzero(left >= rest)[0]
            choice = [int(holds[np.argmin(left[holds])]) if holds.size else int(np.argmax(left))]
        prev = choice[0]
        cells[r, c] = groups[prev]
        left[prev] -= 1
    return True


def _fill_pairs(cells: np.ndarray, mask: np.ndarray, groups: np.ndarray, left: np.ndarray, pairing: str) -> bool:
    """The "pairs" fills: the pod's groups (largest first: a, b, c, d, ...) paired (``pairing``
    "ab": a with b, c with d; "ac": a with c, b with d; "ad": a with d, b with c; further
    groups in twos), each pair a column strip of the pod's cells (column by column) as many
    cells as it holds, in which the first group takes the upper rows and the second the rest
    (row by row), so that each keeps its pipeline hops inside and cuts each of its rows once."""
    order = sorted(range(groups.size), key=lambda i: (-left[i], int(groups[i])))
    head = {"ab": [0, 1, 2, 3], "ac": [0, 2, 1, 3], "ad": [0, 3, 1, 2]}[pairing]
    if len(order) >= 4:
        order = [order[i] for i in head] + order[4:]
    rr, cc = np.nonzero(mask)
    walk = np.lexsort((rr, cc))                                     # column by column
    pos = 0
    for k in range(0, len(order), 2):
        pair = order[k:k + 2]
        strip = walk[pos:pos + int(left[pair].sum())]
        pos += strip.size
        if strip.size == 0:
            break
        strip = strip[np.lexsort((cc[strip], rr[strip]))]           # row by row inside the strip
        labels = np.repeat(np.asarray(pair), left[pair])[:strip.size]
        cells[rr[strip], cc[strip]] = groups[labels]
        np.subtract.at(left, labels, 1)
    return pos == rr.size


def _row_bands(mask: np.ndarray, shared: list, height: int, snake: bool = True) -> list:
    """Cell orders of the "bands2" fills: sub-bands of ``height`` shared rows, each column by
    column, every other one right to left (``snake``) or all left to right."""
    return [_column_major(mask, shared[start:start + height], reverse=snake and k % 2 == 1)
            for k, start in enumerate(range(0, len(shared), height))]


def _column_major(mask: np.ndarray, rows: list, reverse: bool = False) -> list[tuple[int, int]]:
    """The cells ``(r, c)`` of ``mask`` in ``rows``, column by column (right to left when
    ``reverse``), each column's in the order of ``rows``."""
    sub = mask[rows]                                     # (len(rows), C)
    if reverse:
        sub = sub[:, ::-1]
    c, i = np.nonzero(sub.T)                             # column-major: by column, then row
    if reverse:
        c = mask.shape[1] - 1 - c
    return list(zip(np.asarray(rows, dtype=np.int64)[i].tolist(), c.tolist()))


def _count_bands(mask: np.ndarray, parts: int) -> list:
    """Cell orders of the "halves" fill: the pod's cells in stage order cut into ``parts``
    runs of (nearly) equal size (a run may end inside a stage), each column by column, every
    other one right to left."""
    cells = [(int(r), int(c)) for r, c in zip(*np.nonzero(mask))]          # row-major
    bounds = [round(i * len(cells) / parts) for i in range(parts + 1)]
    orders = []
    for k in range(parts):
        run = cells[bounds[k]:bounds[k + 1]]
        orders.append(sorted(run, key=lambda rc: (rc[1] if k % 2 == 0 else -rc[1], rc[0])))
    return orders


def _fill_bands(cells: np.ndarray, groups: np.ndarray, left: np.ndarray, orders: list, ahead: bool = True) -> bool:
    """Fill each cell order (a sub-band, :func:`_row_bands` or :func:`_count_bands`) by its
    own set of ToR groups: the fewest whose remainders cover it with the least overshoot
    (``ahead``: among those that leave enough whole groups for the later sub-bands when some
    do, and after the group the previous sub-band left partly used, which the snake puts in
    the same columns). False when the groups cannot hold the cells."""
    carry = -1
    for k, order in enumerate(orders):
        later = sum(len(o) for o in orders[k + 1:]) if ahead else 0
        first = [carry] if ahead and carry >= 0 and left[carry] > 0 else []
        need = len(order) - sum(int(left[i]) for i in first)
        have = [i for i in range(left.size) if left[i] > 0 and i not in first]
        avail = sum(int(left[i]) for i in have)
        if need > avail:
            return False
        best = None
        if 0 < need and len(have) <= 8:
            for n in range(1, len(have) + 1):
                for sub in itertools.combinations(have, n):
                    total = int(sum(left[i] for i in sub))
                    if total >= need:
                        score = (avail - total < later, n, total, sub)
                        best = score if best is None or score < best else best
                if best is not None and not ahead:
                    break
        picked = first + sorted(best[3] if best else have, key=lambda i: (-left[i], i))
        for r, c in order:
            carry = next(i for i in picked if left[i] > 0)
            cells[r, c] = groups[carry]
            left[carry] -= 1
    return True


def whole_rows_first(problem: GridProblem) -> np.ndarray | None:
    """Placement ``cells[R, C]``: every pod holds as many whole rows (DP rings) as it can,
    laid on its ToR groups by the constructive layouts; the rows left over take the ToR
    groups' remainders, largest first (fewest pieces, so fewest ring crossings on both
    tiers; the pods first: the fewest whose remainders cover the row), and each sits
    between the whole rows of the first and the last pod it uses
    (their pipeline hops stay inside those pods). None when the pods' whole rows already
    hold the job (stage runs cover that) or on a one-tier fabric.

    Examples
    --------
    Three rows of 4; pod 0 has groups of 3 and 3 hosts, pod 1 groups of 4 and 1, pod 2 one
    of 2: a whole row in each of pods 0 and 1, the third row over the remainders.

    >>> p = GridProblem(3, 4, (3, 3, 4, 1, 2), 10, 1, domains=((0, 0, 1, 1, 2),), weights=(1.0, 1.0))
    >>> whole_rows_first(p).tolist()
    [[2, 2, 2, 2], [0, 0, 0, 1], [1, 1, 4, 4]]
    """
    if not problem.domains:
        return None
    R, C = problem.rows, problem.cols
    dom, left = np.asarray(problem.domains[0]), np.asarray(problem.free, dtype=np.int64).copy()
    whole: dict[int, np.ndarray] = {}
    for pod in np.unique(dom):
        groups = np.nonzero(dom == pod)[0]
        m = int(left[groups].sum() // C)
        if m == 0:
            continue
        sub = GridProblem(m, C, tuple(int(x) for x in left[groups]), problem.w_row, problem.w_col, problem.w_wrap)
        options = _layouts(sub)
        if not options:
            return None
        # ties: the fewest groups cut, so that the remainders stay whole groups (fewer pieces)
        best = groups[min(options, key=lambda c: (grid_cost(sub, c), _cut_groups(sub, c)))]
        whole[int(pod)] = best
        left -= np.bincount(best.ravel(), minlength=left.size)
    n_whole = sum(len(rows) for rows in whole.values())
    if n_whole >= R or left.sum() < (R - n_whole) * C:
        return None
    spans = []
    for _ in range(R - n_whole):
        pods = _span_pods(dom, left, C)
        row, need = [], C
        while need:
            room = np.where(np.isin(dom, pods) & (left > 0), left, 0) if pods is not None else left
            g = int(np.lexsort((np.arange(left.size), -room))[0])   # the largest remainder, lowest index on ties
            take = int(min(need, left[g]))
            row.append((int(dom[g]), g, take))
            left[g] -= take
            need -= take
        first = {q: i for i, (q, _, _) in reversed(list(enumerate(row)))}
        row.sort(key=lambda piece: first[piece[0]])                 # pieces of one pod together
        spans.append(np.concatenate([np.full(n, g) for _, g, n in row]))
    order, placed = [], set()

    def whole_rows(pod: int) -> None:
        if pod not in placed and pod in whole:
            placed.add(pod)
            order.extend(whole[pod])

    for span in spans:
        whole_rows(int(dom[span[0]]))
        order.append(span)
        whole_rows(int(dom[span[-1]]))
    head = [row for pod in sorted(whole) if pod not in placed for row in whole[pod]]
    return np.stack(head + order).astype(np.int64)


def _cut_groups(problem: GridProblem, cells: np.ndarray) -> int:
    """Groups partly used by ``cells`` (their rest split off from them)."""
    used = np.bincount(cells.ravel(), minlength=len(problem.free))
    return int(((used > 0) & (used < np.asarray(problem.free))).sum())


def _span_pods(dom: np.ndarray, left: np.ndarray, cols: int, widest: int = 4, considered: int = 12):
    """The pods a row over remainders should take: the fewest (at most ``widest``, among the
    ``considered`` pods with the largest remainders) whose remainders cover ``cols``, then
    the fewest ToR groups, then the least spare; None when no such set exists."""
    rem = np.bincount(dom, weights=left, minlength=int(dom.max()) + 1)
    pods = sorted(np.nonzero(rem > 0)[0].tolist(), key=lambda q: (-rem[q], q))[:considered]
    for k in range(1, widest + 1):
        best = None
        for subset in itertools.combinations(pods, k):
            total = sum(rem[q] for q in subset)
            if total < cols:
                continue
            sizes = np.sort(left[np.isin(dom, subset)])[::-1]
            groups = int(np.searchsorted(np.cumsum(sizes), cols) + 1)
            score = (groups, total, subset)
            best = score if best is None or score < best else best
        if best is not None:
            return list(best[2])
    return None


def pods_first_starts(problem: GridProblem, pod_problem: GridProblem, key: Callable,
                      fills: tuple = CLASSIC_FILLS + BAND_FILLS) -> list[np.ndarray]:
    """Placements ``cells[R, C]`` laid pods first (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With ``domains`` (``domains[0][K]``: the pod of each ToR group).
    pod_problem : GridProblem
        The same grid whose groups are the pods (free hosts summed per pod).
    key : callable
        ``key(cells) -> comparable``: the planner's ranking (lower is better).
    fills : tuple of str
        The fills of :func:`_fill_pod` to use (:data:`CLASSIC_FILLS`, :data:`BAND_FILLS`);
        :func:`whole_rows_first` comes with the classic ones.

    Returns
    -------
    list of ndarray
        Placements within every ToR group's free hosts; empty on a one-tier fabric.

    Examples
    --------
    Two pods of two groups of 2 hosts; two rings of 2 hosts: both in the first pod, one
    ring per ToR group (the pipeline hops cross the spine, not the core).

    >>> import dataclasses
    >>> p = GridProblem(2, 2, (2, 2, 2, 2), 10, 1, domains=((0, 0, 1, 1),), weights=(1.0, 1.0))
    >>> q = dataclasses.replace(p, free=(4, 4), domains=(), weights=(1.0,))
    >>> pods_first_starts(p, q, lambda c: 0)[0].tolist()
    [[0, 0], [1, 1]]
    """
    if not problem.domains:
        return []
    dom = np.asarray(problem.domains[0])
    by_pod, seen = [], set()
    for layout in sorted(_layouts(pod_problem), key=lambda c: grid_cost(pod_problem, c)):
        if layout.tobytes() not in seen:                            # distinct pod placements only
            seen.add(layout.tobytes())
            by_pod.append(layout)
    first = whole_rows_first(problem) if set(CLASSIC_FILLS) & set(fills) else None
    out = [first] if first is not None else []
    for pods, fill in itertools.product(by_pod[:POD_PLACEMENTS], fills):
        cells = np.full(pods.shape, -1, dtype=np.int64)
        if all(_fill_pod(problem, pods, cells, int(p), np.nonzero(dom == p)[0], fill) for p in np.unique(pods)):
            out.append(cells)
    return out
