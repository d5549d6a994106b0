"""Stage runs: consecutive pipeline stages fill one ToR group after another.

Deep pipelines (many stages of few hosts each: ``--pp 96 --dp 8`` gives 96 grid rows of
8 hosts) fit several whole stages in one ToR group. Laying the stages in order, group
after group, keeps every DP ring inside one group (no ring crossing at all) and sends
only the pipeline hops at the boundary between two runs across the spine: with ``j``
groups in use, ``j - 1`` boundaries of ``C`` hops each (plus the interleaved wrap, if
any, from the last stage back to the first).

Two variants: *whole* stages only (group ``g`` holds ``floor(free[g] / C)`` stages, the
rest of it left unused), which needs enough whole-stage room; and *filled* groups (the
stages run on into the next group, so a stage cut at a boundary crosses its ring twice
and keeps its hops to the next stage inside the group where the columns line up).
Groups are taken by the whole stages they hold, most first, so the fewest groups (and
boundaries) are used.

Examples
--------
Four stages of two hosts on groups of 4 and 4 hosts: two stages per group, one boundary.

>>> stage_runs_cells(4, 2, (4, 4)).tolist()
[[0, 0], [0, 0], [1, 1], [1, 1]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["stage_runs_cells", "stage_runs_starts"]


def _group_order(free: tuple, cols: int) -> list[int]:
    """Groups by whole stages held (most first), then free hosts, then index (deterministic)."""
    return sorted((g for g, f in enumerate(free) if f > 0), key=lambda g: (-(free[g] // cols), -free[g], g))


def stage_runs_cells(rows: int, cols: int, free: tuple, whole: bool = True) -> np.ndarray | None:
    """Placement ``cells[rows, cols]`` of consecutive stages filling groups in turn.

    Parameters
    ----------
    rows, cols : int
        Grid size (R stages x C hosts per stage).
    free : tuple of int
        ``free[K]``: usable hosts per ToR group.
    whole : bool
        Only whole stages per group (None when the groups' whole-stage room is short of
        ``rows``); else fill each group completely and run the stage on into the next.

    Returns
    -------
    ndarray or None
        ``cells[R, C]``, or None when the hosts cannot hold the grid this way.
    """
    order = _group_order(free, cols)
    if whole:
        if sum(free[g] // cols for g in order) < rows:
            return None
        per_group = [np.full(free[g] // cols * cols, g, dtype=np.int64) for g in order]
    else:
        if sum(free) < rows * cols:
            return None
        per_group = [np.full(free[g], g, dtype=np.int64) for g in order]
    flat = np.concatenate(per_group)[:rows * cols]       # flat[R * C], stage after stage
    cells = flat.reshape(rows, cols)
    _line_up_cut_stages(cells)
    return cells


def _line_up_cut_stages(cells: np.ndarray) -> None:
    """Mirror a stage cut between two groups where that keeps more hops to its neighbours
    inside a group: after a cut row ``[a a b b]`` the next row is all ``b`` either way, but
    the row before (all ``a``) matches the ``a`` part in the same columns only."""
    for r in range(cells.shape[0]):
        row = cells[r]
        if (row == row[0]).all():
            continue
        flipped = row[::-1]
        if _matches(cells, r, flipped) > _matches(cells, r, row):
            cells[r] = flipped.copy()


def _matches(cells: np.ndarray, r: int, row: np.ndarray) -> int:
    """Columns where ``row`` (as row ``r``) shares the group of the rows above and below."""
    out = 0
    if r > 0:
        out += int((cells[r - 1] == row).sum())
    if r + 1 < cells.shape[0]:
        out += int((cells[r + 1] == row).sum())
    return out


def stage_runs_starts(rows: int, cols: int, free: tuple) -> list[np.ndarray]:
    """Both variants (whole stages, filled groups) that exist, as starting points for the search."""
    out = [stage_runs_cells(rows, cols, free, whole) for whole in (True, False)]
    return [c for c in out if c is not None]
