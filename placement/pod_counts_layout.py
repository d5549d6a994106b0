"""Pod counts: each pod a band of consecutive stages, its ToR groups' hosts per stage by CP-SAT.

Deep pipelines on a fabric of several tiers (rows of C hosts that fit inside one ToR group)
keep each pod as one band of consecutive stages (:func:`rankmap.placement.pod_strips_layout.pod_bands`),
so the pod tier is crossed only at the bands' edges. Inside a band the cost is the ToR
tier's: ring crossings (a row over ``k >= 2`` groups crosses ``k`` times) and pipeline hops
between rows that leave a group. The strip layouts (:mod:`rankmap.placement.pod_strips_layout`)
keep each strip's edge in one column; the cheapest bands are often *staggered*: two groups per
row, the column where one group meets the other moving by a column or two from row to row, so
that each group ends at the end of a row and the two strips change groups at different rows
(a change costs only the changing group's width in pipeline hops, not the whole row's).

So each band is solved as a small count model (CP-SAT): ``x[i][g]`` hosts of the band's row
``i`` in group ``g`` (each row's cells in the band, each group within its free hosts), at most
2 or 3 groups per row (:data:`PIECES`: two for the staggered bands; three where a stage holds
strips of three groups, which pays where groups hold about one and a half stages), the rows
of each group consecutive, and the cost ``w_row * crossings + w_col *
(cells of consecutive rows - sum_g min(x[i][g], x[i+1][g]))`` (the pipeline hops two rows
keep inside a group are at most the smaller of the two counts, and exactly that when the
rows' pieces of the group start in the same column). The counts are laid row by row
(:func:`aligned_rows`), each row's groups in the order that keeps each pod's pieces together
and then the most columns of the row above in their group, which lays the staggered bands
exactly as counted.

On the 12,288-GPU three-tier deep-pipeline instances (pp 32, 50% busy, seeds 1-8) the bands
of two groups per stage cost 2-4% less than the strip and band layouts; at 25% busy those of
three per stage are the cheaper ones (seeds 12, 14: 952.4 -> 940.9 and 953.7 -> 947.3 10^6
units, where two per stage gave 952.4 and 957.4). Each band (5-7 rows of 4 groups) solves to
optimality in about 0.1-0.3 s.

References
----------
OR-Tools CP-SAT (``max_deterministic_time``, ``random_seed``: deterministic runs),
developers.google.com/optimization/cp/cp_solver; Arnold (arXiv 2509.15940): DP and PP groups
to pods first; MegaScale (NSDI 2024): data-intensive ranks under one ToR group.
"""

from __future__ import annotations

import itertools

import numpy as np
from ortools.sat.python import cp_model

from rankmap.placement.cpsat_model import solver_params
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.pod_strips_layout import MAX_POD_GROUPS, pod_bands
from rankmap.placement.tier_model import piece_crossings

__all__ = ["pod_counts_starts", "pod_counts_cells", "band_counts", "aligned_rows", "PIECES", "MAX_BAND_ROWS",
           "MAX_BANDS", "BAND_TIME_S"]

# Groups per row, at most, in a band's count model: one layout each.
PIECES = (2, 3)
# Bands of more rows than this, or layouts of more bands, are not solved (the model grows
# with rows x groups; bands here hold 4-8 rows).
MAX_BAND_ROWS = 16
MAX_BANDS = 48
# CP-SAT deterministic time per band (roughly seconds of one core); the 12,288-GPU bands
# reach their optimum within it.
BAND_TIME_S = 0.1
# Rows of at most this many groups try every order of them when laid (:func:`aligned_rows`).
MAX_ALIGNED = 5


def band_counts(problem: GridProblem, groups: list, start: int, size: int, time_limit_s: float = BAND_TIME_S,
                seed: int = 0, pieces: int = 2) -> tuple[list, np.ndarray] | None:
    """The count model of one pod's band (module docstring).

    Parameters
    ----------
    problem : GridProblem
    groups : list of int
        The pod's ToR groups.
    start, size : int
        The band: grid cells ``start .. start + size - 1`` in row-major order.
    time_limit_s : float
        CP-SAT deterministic time budget.
    seed : int
        CP-SAT's random seed.
    pieces : int
        Groups per row, at most.

    Returns
    -------
    (list of int, ndarray) or None
        The band's rows and ``counts[len(rows), len(groups)]``; None when CP-SAT finds no
        solution within the budget (or none exists).
    """
    C, free = problem.cols, problem.free
    rows = list(range(start // C, (start + size - 1) // C + 1))
    cap = [min((r + 1) * C, start + size) - max(r * C, start) for r in rows]        # the band's cells per row
    H, n = len(rows), len(groups)
    m = cp_model.CpModel()
    x = [[m.NewIntVar(0, min(free[g], cap[i]), f"x{i}_{j}") for j, g in enumerate(groups)] for i in range(H)]
    used = [[m.NewBoolVar(f"u{i}_{j}") for j in range(n)] for i in range(H)]
    crossings = []
    for i in range(H):
        m.Add(sum(x[i]) == cap[i])
        m.Add(sum(used[i]) <= pieces)
        for j in range(n):
            m.Add(x[i][j] <= cap[i] * used[i][j])
            m.Add(x[i][j] >= used[i][j])
        if cap[i] == C:                               # a whole ring: k >= 2 pieces cross k times, one piece 0
            split = m.NewBoolVar(f"s{i}")
            m.Add(sum(used[i]) <= 1 + n * split)
            m.Add(sum(used[i]) >= 2).OnlyEnforceIf(split)
            crossings.append(sum(used[i]) - 1 + split)
        else:                                         # a ring shared with the next pod: every piece ends in a crossing
            crossings.append(sum(used[i]))
    kept = []
    for i in range(H - 1):
        for j in range(n):
            k = m.NewIntVar(0, min(cap[i], cap[i + 1]), f"k{i}_{j}")
            m.Add(k <= x[i][j])
            m.Add(k <= x[i + 1][j])
            kept.append(k)
    for j, g in enumerate(groups):
        m.Add(sum(x[i][j] for i in range(H)) <= free[g])
        # A group's rows are consecutive (a gap costs a group edge twice over); this also
        # cuts the search to a third of its time.
        for i in range(1, H - 1):
            for k in range(i + 1, H):
                m.Add(used[i][j] >= used[i - 1][j] + used[k][j] - 1)
    m.Minimize(problem.w_row * sum(crossings) - problem.w_col * sum(kept))
    solver = solver_params(time_limit_s, seed, 1)
    if solver.Solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return rows, np.array([[solver.Value(v) for v in row] for row in x], dtype=np.int64)


def aligned_rows(counts: np.ndarray, domains: tuple = ()) -> np.ndarray:
    """``cells[R, C]`` from ``counts[R, K]``: row by row, each row's groups as pieces in the
    order (every order of up to :data:`MAX_ALIGNED` groups, first best kept) that crosses the
    fewest ``domains`` (per level, top level first: a row shared by two pods keeps each pod's
    pieces together), then puts the most of its hosts under the same group in the row above.

    Examples
    --------
    Group 1 keeps its columns in the second row; the new group 2 takes what group 0 left:

    >>> aligned_rows(np.array([[2, 2, 0], [0, 3, 1]])).tolist()
    [[0, 0, 1, 1], [2, 1, 1, 1]]

    Groups 0 and 2 share a pod, as do 1 and 3: each pod's pieces side by side on the ring
    (group 2 meets group 0 across the wrap; the ring crosses the pod tier twice, not four times):

    >>> aligned_rows(np.array([[1, 1, 1, 1]]), ((0, 1, 0, 1),)).tolist()
    [[0, 1, 3, 2]]
    """
    levels = [np.asarray(d) for d in reversed(domains)]
    out = []
    for row in np.asarray(counts):
        groups = [int(g) for g in np.flatnonzero(row)]
        orders = itertools.permutations(groups) if len(groups) <= MAX_ALIGNED else [groups]
        best, best_key = None, None
        for order in orders:
            cells = np.repeat(order, row[list(order)])
            key = piece_crossings(order, levels) + (-int((cells == out[-1]).sum()) if out else 0,)
            if best_key is None or key < best_key:
                best, best_key = cells, key
        out.append(best)
    return np.array(out, dtype=np.int64)


def pod_counts_cells(problem: GridProblem, aligned: bool = True, seed: int = 0, pieces: int = 2) -> np.ndarray | None:
    """Placement ``cells[R, C]``: pods as bands of consecutive stages
    (:func:`~rankmap.placement.pod_strips_layout.pod_bands`), each band's counts by
    :func:`band_counts`, laid by :func:`aligned_rows`; None when a band is too large
    (:data:`MAX_BAND_ROWS`, :data:`MAX_BANDS`, :data:`~rankmap.placement.pod_strips_layout.MAX_POD_GROUPS`)
    or has no solution.

    Parameters
    ----------
    problem, aligned
        As :func:`~rankmap.placement.pod_strips_layout.pod_strips_cells` (``aligned``: pod
        boundaries on whole stages where the pods allow).
    seed : int
        CP-SAT's random seed.
    pieces : int
        Groups per stage, at most (:func:`band_counts`).
    """
    bands = pod_bands(problem, aligned)
    C = problem.cols
    if (not bands or len(bands) > MAX_BANDS or max(len(g) for _, g, _, _ in bands) > MAX_POD_GROUPS
            or max((start + size - 1) // C - start // C + 1 for _, _, start, size in bands) > MAX_BAND_ROWS):
        return None
    counts = np.zeros((problem.rows, len(problem.free)), dtype=np.int64)       # counts[R, K]
    solved = {}                                  # bands of the same shape and free hosts solve alike
    for _, groups, start, size in bands:
        key = (start % C, size, tuple(problem.free[g] for g in groups))
        if key not in solved:
            solved[key] = band_counts(problem, groups, start, size, seed=seed, pieces=pieces)
        if solved[key] is None:
            return None
        rows, band = solved[key]
        shift = start // C - rows[0]
        for i, r in enumerate(rows):
            counts[r + shift, groups] += band[i]
    return aligned_rows(counts, problem.domains)


def pod_counts_starts(problem: GridProblem, seed: int = 0) -> list[np.ndarray]:
    """:func:`pod_counts_cells` with pod boundaries on whole stages where the pods allow, with
    at most two and at most three groups per stage (:data:`PIECES`);
    only where every stage fits in one ToR group (``C <= max free``) and pods lie above them."""
    if not problem.domains or problem.cols > max(problem.free) or problem.rows < 2:
        return []
    made = [pod_counts_cells(problem, True, seed, pieces) for pieces in PIECES]
    return [cells for cells in made if cells is not None]
