"""What the search minimises: the objectives and the key that ranks placements by them.

Objectives, compared lexicographically in the order the user gives them, or summed with
weights (``("bytes", 1.0), ("uplink", 0.5)``):

- ``tiers`` (the default): bytes crossing each tier, times the tier's weight, summed
  (:func:`rankmap.placement.tier_search.tier_cost`; weights from
  :mod:`rankmap.placement.tier_weights`); on a flat fabric the same as ``bytes``;
- ``top-first``: bytes crossing each tier compared top tier first (lexicographic: the
  core, then the spine); ``--objective top-first,uplink``;
- ``bytes``: bytes crossing ToR groups per iteration (:func:`rankmap.placement.grid_problem.grid_cost`);
- ``spread``: the most ToR groups any DP ring spans (Arnold, arXiv 2509.15940, minimises
  the spread of communication groups);
- ``uplink``: the heaviest ToR group's uplink load (ECMP pressure);
- ``fragmentation``: ToR groups left partly used, i.e. neither untouched nor emptied (a
  job of 20 hosts on groups with 19, 10 and 10 free takes 10 + 10 and leaves 19 whole);
- ``moved``: node ranks whose host differs from a previous plan.

Weighted sums add terms of one unit only (:func:`weighting_problem`): ``tiers``, ``bytes`` and
``uplink`` are bytes per iteration (so ``tiers=1,uplink=4`` prices a byte through the busiest
ToR's uplinks at 4 tier-weighted bytes); ``spread``, ``fragmentation`` and ``moved`` are counts
(ToR groups, ToR groups, hosts). A sum of bytes and counts would let the ~1e11 bytes of a plan
swamp any count, so that ``moved=10,tiers=1`` ranked as ``tiers`` alone; the lexicographic order
(``moved,tiers`` or ``tiers,moved``) says which comes first. ``top-first`` is a vector (bytes per
tier, top first) and takes no weight: ``tiers=W`` with tier weights prices the tiers. A weight
is at most :data:`MAX_WEIGHT`, so that no weighted sum overflows a float.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from rankmap.placement.grid_problem import GridProblem, grid_cost, grid_uplinks
from rankmap.placement.tier_search import tier_cost, tier_costs

__all__ = ["OBJECTIVES", "BYTE_TERMS", "COUNT_TERMS", "MAX_WEIGHT", "ranking", "weighting_problem"]

OBJECTIVES = ("tiers", "top-first", "bytes", "spread", "uplink", "fragmentation", "moved")
#: Objectives in bytes per iteration and those that count (ToR groups, hosts): a weighted sum
#: adds terms of one kind only. ``top-first`` (a vector per tier) is in neither.
BYTE_TERMS = ("tiers", "bytes", "uplink")
COUNT_TERMS = ("spread", "fragmentation", "moved")
#: The largest weight of a weighted term. Weights are relative, and a byte term is below
#: 1e30 bytes per iteration: a sum of seven terms stays below 1e43, far from a float's 1.8e308.
MAX_WEIGHT = 1e12


def weighting_problem(objectives: tuple) -> str | None:
    """Why the weighted terms of ``objectives`` cannot be summed, or None when they can.

    A weight on ``top-first`` (lexicographic per tier), weighted terms of different units
    (bytes and counts, :data:`BYTE_TERMS`, :data:`COUNT_TERMS`) and a weight above
    :data:`MAX_WEIGHT` are refused.

    Examples
    --------
    >>> weighting_problem((("tiers", 1.0), ("uplink", 4.0))) is None
    True
    >>> weighting_problem((("moved", 10.0), ("tiers", 1.0)))[:45]
    'moved=10 (a count of hosts) and tiers=1 (byte'
    """
    weighted = [o for o in objectives if isinstance(o, tuple)]
    for name, weight in weighted:
        if name == "top-first":
            return (f"top-first={weight:g}: top-first is lexicographic (bytes per tier, top tier first) and takes "
                    f"no weight; give it as a plain term (top-first,uplink) or weigh the tiers with tiers=W and "
                    f"--tier-weights")
        if weight > MAX_WEIGHT:
            return (f"{name}={weight:g}: a weight is at most {MAX_WEIGHT:g} (weights are relative; larger ones "
                    f"can overflow the weighted sum); to put {name} first, order the terms instead")
    units = {"tiers": "bytes per iteration", "bytes": "bytes per iteration", "uplink": "bytes per iteration",
             "spread": "a count of ToR groups", "fragmentation": "a count of ToR groups", "moved": "a count of hosts"}
    kinds = [(n, w) for n, w in weighted if n in BYTE_TERMS], [(n, w) for n, w in weighted if n in COUNT_TERMS]
    if kinds[0] and kinds[1]:
        (c, cw), (b, bw) = kinds[1][0], kinds[0][0]
        return (f"{c}={cw:g} ({units[c]}) and {b}={bw:g} ({units[b]}) do not add up: a weighted sum adds terms of "
                f"one unit only (bytes: {', '.join(BYTE_TERMS)}; counts: {', '.join(COUNT_TERMS)}); order them "
                f"instead, most important first (e.g. {c},{b} or {b},{c})")
    return None


def ranking(problem: GridProblem, objectives: tuple, moved: Callable | None = None) -> Callable:
    """``key(cells) -> tuple`` ordering placements ``cells[R, C]`` by ``objectives`` (smaller
    is better).

    Parameters
    ----------
    problem : GridProblem
    objectives : tuple
        Names from :data:`OBJECTIVES` (lexicographic) or ``(name, weight)`` pairs, which
        are summed into one weighted value (bytes and uplink in the grid's cost units, the
        others as counts; :func:`weighting_problem` must accept them) before any plain
        names that follow.
    moved : callable, optional
        ``moved(cells) -> int`` for the "moved" objective (0 without).

    Returns
    -------
    callable

    Raises
    ------
    ValueError
        Weighted terms that :func:`weighting_problem` refuses (``top-first=1``, ``moved=1,tiers=1``).

    Examples
    --------
    >>> key = ranking(GridProblem(1, 4, (4, 4), 10, 0), ("bytes", "fragmentation"))
    >>> key(np.array([[0, 0, 0, 0]])), key(np.array([[0, 0, 1, 1]]))
    ((0, 0), (20, 2))
    """
    problem_text = weighting_problem(objectives)
    if problem_text is not None:
        raise ValueError(problem_text)
    K = len(problem.free)
    caps = np.asarray(problem.free)

    def value(name: str, cells: np.ndarray) -> float:
        if name == "tiers":
            return tier_cost(problem, cells)
        if name == "top-first":
            return tier_costs(problem, cells)[::-1]
        if name == "bytes":
            return grid_cost(problem, cells)
        if name == "spread":
            return max(len(np.unique(row)) for row in cells)
        if name == "uplink":
            return int(grid_uplinks(problem, cells).max())
        if name == "fragmentation":
            used = np.bincount(cells.ravel(), minlength=K)
            return int(((used > 0) & (used < caps)).sum())
        return moved(cells) if moved is not None else 0

    weighted = [o for o in objectives if isinstance(o, tuple)]
    plain = [o for o in objectives if not isinstance(o, tuple)]

    def key(cells: np.ndarray) -> tuple:
        head = (sum(w * value(n, cells) for n, w in weighted),) if weighted else ()
        return head + tuple(value(n, cells) for n in plain)

    if not weighted and plain:
        key.first = lambda cells: value(plain[0], cells)  # the leading value alone (a cheap pre-check)
        key.first_name = plain[0]  # lets the count search screen moves on the tier cost in bulk
    return key
