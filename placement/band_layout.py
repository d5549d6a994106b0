"""Band layouts: consecutive stages share ToR groups so their pipeline hops stay inside.

A *band* is ``s`` consecutive pipeline stages (grid rows) laid in the same ToR groups.
When pipeline traffic is heavy against DP traffic (many micro-batches, large dp), it pays
to cut each group of a band into ``s`` near-equal column intervals, one per row, stacked
in the same columns, so the pipeline hops between those rows stay inside the group. Each
row then crosses its ring once per group in the band, so ``s`` trades ring crossings for
pipeline hops; the search tries several ``s`` and keeps the cheapest.

Per band of ``s`` rows (``s * C`` hosts) the fewest whole groups summing exactly to
``s * C`` are taken (:mod:`rankmap.placement.subset_sum`); group ``g`` with
``f = s*q + rem`` hosts gives ``q`` columns to every row and one more to ``rem`` rows,
the extra columns dealt round-robin so every row gets exactly ``C`` and the rows'
intervals stay within one column of each other. With no exact subset, the last group
is cut and its rest goes back to the pool.
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.subset_sum import distinct_sizes, min_counts, pick_subset

__all__ = ["band_cells"]


def band_cells(rows: int, cols: int, free: tuple, s: int, order: np.ndarray | None = None,
               waste: bool = False) -> np.ndarray | None:
    """Placement ``cells[rows, cols]`` built from bands of ``s`` rows, or None if it fails.

    Parameters
    ----------
    rows, cols : int
        Grid size (R stages x C hosts per stage).
    free : tuple of int
        ``free[K]``: usable hosts per ToR group.
    s : int
        Rows per band (the last band takes the rows left over).
    order : ndarray, optional
        Preference order of the groups (default: largest first).
    waste : bool
        Leave the rest of a cut group unused whenever the other free hosts still cover
        the rows to come (it would otherwise cost a piece of its own later).
    """
    if sum(free) < rows * cols:
        return None
    if order is None:
        order = np.argsort(-np.asarray(free), kind="stable")
    pool = {int(g): int(free[g]) for g in order if free[g] > 0}
    cells = np.empty((rows, cols), dtype=np.int64)
    r = 0
    while r < rows:
        height = min(s, rows - r)
        chosen = _pick(pool, height * cols)
        if chosen is None:
            return None
        cut, part = chosen[-1]
        rest = pool.get(cut, 0)
        if waste and rest and sum(pool.values()) - rest >= (rows - r - height) * cols:
            del pool[cut]
        _lay_band(cells, r, height, cols, chosen)
        r += height
    return cells


def _pick(pool: dict[int, int], need: int) -> list[tuple[int, int]] | None:
    """``[(group, hosts)]`` summing to ``need``: an exact whole-group subset if any, else
    whole groups plus part of one (its rest stays in the pool)."""
    items = list(pool.items())
    exact = pick_subset(items, need)
    if exact is not None:
        return [(g, pool.pop(g)) for g in exact]
    for cut_g, cut_f in distinct_sizes(items):  # largest first: the cut group gives the remainder
        others = [(g, f) for g, f in items if g != cut_g]
        best = min_counts(others, need)
        lo = max(1, need - sum(f for _, f in others))
        parts = np.arange(lo, min(cut_f, need) + 1)
        if parts.size == 0:
            continue
        part = int(parts[np.argmin(best[need - parts])])
        if best[need - part] > len(others):
            continue
        picked = [(g, pool.pop(g)) for g in pick_subset(others, need - part)]
        pool[cut_g] -= part
        if pool[cut_g] == 0:
            del pool[cut_g]
        return picked + [(cut_g, part)]
    return None


def _lay_band(cells: np.ndarray, r0: int, height: int, cols: int, chosen: list[tuple[int, int]]) -> None:
    widths = np.zeros((height, len(chosen)), dtype=np.int64)  # widths[row, piece]
    nxt = 0
    for i, (_, hosts) in enumerate(chosen):
        q, rem = divmod(hosts, height)
        widths[:, i] = q
        for k in range(rem):  # round-robin: every row ends up with the same total
            widths[(nxt + k) % height, i] += 1
        nxt = (nxt + rem) % height
    for h in range(height):
        row = np.repeat([g for g, _ in chosen], widths[h])
        assert row.size == cols, "band rows must sum to the row length"
        cells[r0 + h] = row if (r0 + h) % 2 == 0 or height > 1 else row[::-1]
