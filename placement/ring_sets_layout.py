"""Ring sets: each DP ring a set of whole ToR groups, chosen by CP-SAT (bin covering).

Where a DP ring (a row of C hosts) needs several ToR groups and a ring crossing weighs many
pipeline hops (``w_row >> w_col``: rings of 86-92 hosts on the 12,288-GPU CP, EP and mixed
instances, a crossing worth 80-160 hops), the cost is nearly all ring crossings: a ring over
``k >= 2`` groups crosses the ToR tier ``k`` times, and the pod tier once per pod it passes
(when more than one). The band and pods-first layouts fill rows group after group, so a
group's rest starts the next row and many rings take a piece of one group more than they
need. Here each ToR group goes whole to at most one ring, each ring's groups holding at least
its C hosts (a bin-covering problem), and CP-SAT chooses the sets that cross the fewest
groups and pods, tier-weighted::

    min  sum_l floor(1000 w_l) * sum_r crossings_l(r)
    s.t. sum_r z[g][r] <= 1,   sum_g free[g] z[g][r] >= C,
         crossings_l(r) = (domains of level l ring r uses) if >= 2 else 0

Rings are interchangeable, so group ``g`` may only join rings ``0..g`` (every solution has a
relabelling where each ring's lowest group is at least its index: rings sorted by their
lowest group). Each ring then takes its C hosts from its groups (the largest piece cut first),
and the rings become stages in order of the domains holding most of their hosts (top level
first), so that consecutive stages share pods where they can; the count search
(:mod:`rankmap.placement.count_search`) runs from the result. Pipeline hops are left out of
the model: the layout is one more start, measured by the exact cost like the others.

On the 12,288-GPU three-tier instances, 50% busy, seed 3: the CP job's grid cost 6,281 ->
6,005 (10^6 units; bound 5,929), mixed host sizes 3,696 -> 3,623 (bound 3,492), each model
within 0.3 s of CPU.

References
----------
Bin covering: Assmann, Johnson, Kleitman and Leung, "On a dual version of the one-dimensional
bin packing problem", J. Algorithms 5 (1984); the OR-Tools bin packing example
(developers.google.com/optimization/pack/bin_packing); Arnold (arXiv 2509.15940): minimise
the pods a DP group spans.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from ortools.sat.python import cp_model

from rankmap.placement.cpsat_model import solver_params, wall_clock_capped
from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.tier_model import decode_counts, group_order, piece_crossings

__all__ = ["ring_sets", "ring_sets_counts", "ring_sets_starts", "span_ring_cells", "MAX_PAIRS", "RING_SETS_TIME_S"]

# Above this many (ring, ToR group) pairs the model is not built (the 12,288-GPU instances
# have 192-384; it grows slow past a few thousand).
MAX_PAIRS = 1000
# CP-SAT deterministic time (roughly seconds of one core); the 12,288-GPU instances reach
# their best sets within 0.3.
RING_SETS_TIME_S = 0.3
# Rings of at most this many groups try every order of their pieces (:func:`span_ring_cells`).
MAX_ORDERED = 6
# Ring sets remembered (the last problems solved, first in first out).
REMEMBERED = 4
_remembered: dict = {}


def ring_sets(problem: GridProblem, time_limit_s: float = RING_SETS_TIME_S, seed: int = 0) -> tuple | None:
    """The ToR groups of each ring (module docstring), or None when no sets of whole groups
    cover every ring or CP-SAT finds none within ``time_limit_s``. Remembered for the last
    :data:`REMEMBERED` problems (the grid search and the CP/EP span layout ask for the same
    one), except when solved under a wall-clock cap
    (:func:`~rankmap.placement.cpsat_model.wall_clock_capped`: a cut-short result is not
    the deterministic one).

    Returns
    -------
    tuple of tuple of int or None
        ``sets[R]``: the groups of ring r, ascending.
    """
    key = (problem, time_limit_s, seed)
    if key not in _remembered:
        sets = _solve(problem, time_limit_s, seed)
        if wall_clock_capped():
            return sets
        if len(_remembered) >= REMEMBERED:
            del _remembered[next(iter(_remembered))]
        _remembered[key] = sets
    return _remembered[key]


def _solve(problem: GridProblem, time_limit_s: float, seed: int) -> tuple | None:
    """The bin-covering model of :func:`ring_sets`, built and solved."""
    R, C, free = problem.rows, problem.cols, problem.free
    K = len(free)
    if sum(free) < R * C:
        return None
    m = cp_model.CpModel()
    # Symmetry: group g joins only rings 0..g (rings sorted by their lowest group).
    z = [[m.NewBoolVar(f"z{g}_{r}") for r in range(min(g + 1, R))] for g in range(K)]
    for g in range(K):
        m.AddAtMostOne(z[g])
    levels = [np.arange(K)] + [np.asarray(d) for d in problem.domains]
    cost = 0
    for r in range(R):
        inside = [(g, z[g][r]) for g in range(r, K)]
        m.Add(sum(free[g] * v for g, v in inside) >= C)
        for level, dom in enumerate(levels[:len(problem.weights)]):
            domains = sorted(set(dom.tolist()))
            used = {d: m.NewBoolVar(f"p{level}_{d}_{r}") for d in domains}
            for g, v in inside:
                m.AddImplication(v, used[int(dom[g])])
            for d in domains:
                m.Add(sum(v for g, v in inside if dom[g] == d) >= used[d])
            split = m.NewBoolVar(f"s{level}_{r}")
            m.Add(sum(used.values()) <= 1 + len(domains) * split)
            m.Add(sum(used.values()) >= 2).OnlyEnforceIf(split)
            cost += math.floor(1000 * problem.weights[level]) * (sum(used.values()) - 1 + split)
    m.Minimize(cost)
    solver = solver_params(time_limit_s, seed, 1)
    if solver.Solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return tuple(tuple(g for g in range(r, K) if solver.Value(z[g][r])) for r in range(R))


def ring_sets_counts(problem: GridProblem, sets, span: int = 1) -> np.ndarray:
    """``counts[R, K]``: each ring's C hosts from its groups (the largest piece cut by one
    host at a time while the ring has more than C; with ``span > 1``, pieces that are not a
    whole number of spans first), rings ordered by the domain holding most of their hosts, top
    level first (then by their groups).

    Parameters
    ----------
    problem : GridProblem
    sets : sequence of sequence of int
        ``sets[R]``: each ring's groups (:func:`ring_sets`).
    span : int
        Hosts per CP x EP group (1: none across hosts).

    Examples
    --------
    >>> p = GridProblem(2, 4, (3, 2, 2, 3), 10, 1, 0, ((0, 1, 0, 1),), (1.0, 1.0))
    >>> ring_sets_counts(p, [[1, 3], [0, 2]]).tolist()
    [[2, 0, 2, 0], [0, 2, 0, 2]]
    """
    free, C = problem.free, problem.cols
    counts = np.zeros((problem.rows, len(free)), dtype=np.int64)
    for r, groups in enumerate(sets):
        take = {g: free[g] for g in groups}
        for _ in range(sum(take.values()) - C):
            take[max(groups, key=lambda g: (take[g] % span > 0, take[g], -g))] -= 1
        for g, n in take.items():
            counts[r, g] = n
    keys = []
    for r, groups in enumerate(map(list, sets)):
        key = []
        for dom in reversed(problem.domains):
            held = np.bincount(np.asarray(dom)[groups], weights=counts[r, groups], minlength=max(dom) + 1)
            key.append(int(held.argmax()))
        keys.append((tuple(key), tuple(groups)))
    return counts[sorted(range(problem.rows), key=lambda r: keys[r])]


def _applies(problem: GridProblem) -> bool:
    """Whether rings need several ToR groups (``C > max free``), there are at least two, a
    fabric has tiers above them and the model is small (:data:`MAX_PAIRS`)."""
    return (bool(problem.domains) and problem.rows >= 2 and problem.cols > max(problem.free)
            and problem.rows * len(problem.free) <= MAX_PAIRS)


def ring_sets_starts(problem: GridProblem, seed: int = 0) -> list[np.ndarray]:
    """The ring sets laid as placements ``cells[R, C]`` (:func:`~rankmap.placement.tier_model.decode_counts`:
    each ring's hosts in one order of the groups, plain and snaked); only where rings need
    several ToR groups (``C > max free``), there are at least two rings, a fabric has tiers
    above them and the model is small (:data:`MAX_PAIRS`)."""
    if not _applies(problem):
        return []
    sets = ring_sets(problem, seed=seed)
    return [] if sets is None else decode_counts(problem, ring_sets_counts(problem, sets))


def span_ring_cells(problem: GridProblem, span: int, seed: int = 0) -> np.ndarray | None:
    """The ring sets laid for CP x EP groups of ``span`` consecutive hosts: pieces cut to whole
    spans where the rings' spare hosts allow (:func:`ring_sets_counts`), and each ring's pieces
    in the order (of every order of up to :data:`MAX_ORDERED` groups; else the groups' domain
    order) that crosses the fewest domains, top level
    first, then leaves the fewest piece ends inside a span (a span split between two groups
    sends its CP and EP traffic across the tier). None where :func:`ring_sets_starts` would
    lay nothing, the columns are not whole spans, or no sets exist.

    The grid search measures plans by DP and pipeline traffic only, and its count search moves
    hosts without regard to spans; this layout is measured by the planner's full cost instead.

    Returns
    -------
    ndarray or None
        ``cells[R, C]``.
    """
    if span <= 1 or problem.cols % span or not _applies(problem):
        return None
    sets = ring_sets(problem, seed=seed)
    if sets is None:
        return None
    levels = [np.asarray(d) for d in reversed(problem.domains)] + [np.arange(len(problem.free))]

    def misfit(order: tuple, row: np.ndarray) -> tuple:
        ends = np.cumsum(row[list(order)])[:-1]
        return piece_crossings(order, levels) + (int((ends % span != 0).sum()),)

    cells = []
    for row in ring_sets_counts(problem, sets, span):
        groups = [int(g) for g in group_order(problem) if row[g]]       # domains top level first
        orders = itertools.permutations(groups) if len(groups) <= MAX_ORDERED else [tuple(groups)]
        best = min(orders, key=lambda order: misfit(order, row))
        cells.append(np.repeat(best, row[list(best)]))
    return np.array(cells, dtype=np.int64)
