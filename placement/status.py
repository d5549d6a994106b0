"""How a plan's host order was reached: the solver statuses a plan reports.

The values are the strings written to ``summary.solver_status`` in ``rankmap.json``; the
enum is a ``str`` enum, so a status compares equal to (and formats as) its string.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SolverStatus", "GAP_TOLERANCE", "final_status", "status_meaning"]


class SolverStatus(StrEnum):
    """The status of a plan's placement.

    ``OPTIMAL`` and ``FEASIBLE`` are CP-SAT's own statuses (``CpSolver.StatusName``; OR-Tools
    CP-SAT docs, "Solving a CP-SAT model"); the others are the planner's.

    Examples
    --------
    >>> SolverStatus.HEURISTIC == "HEURISTIC", f"{SolverStatus.PACKED}"
    (True, 'PACKED')
    """

    OPTIMAL = "OPTIMAL"
    """Proven optimal: the plan's cost meets the lower bound (see :func:`final_status`)."""
    FEASIBLE = "FEASIBLE"
    """CP-SAT's placement (or one it tied), not proven optimal: the search stopped at its time
    limit, or it proved only the best placement of its own model, whose cost is above the bound."""
    HINT = "HINT"
    """CP-SAT found nothing better than the constructive layout it was given as a hint."""
    HEURISTIC = "HEURISTIC"
    """A constructive layout, kept without CP-SAT (model too large) or beating its result."""
    PACKED = "PACKED"
    """Hosts of different GPU counts, packed with whole TP groups; no search ran."""


# Bounds are computed in integer cost units whose weights are floored (about 1e6 units to
# the smaller weight, :func:`rankmap.placement.grid_problem.scaled_problem`), so a plan
# that meets the bound in units can sit up to ~1e-6 above it in bytes.
GAP_TOLERANCE = 1e-6


def final_status(status: str, gap: float) -> SolverStatus:
    """The status a plan reports: OPTIMAL only when its measured cost meets the lower bound.

    A search may call a placement OPTIMAL for a model narrower than the plan's cost (the
    grid's bytes without the traffic it leaves out, CP-SAT's interval placements, or a
    "spread" objective); unless the bound proves it, the plan says FEASIBLE.

    Parameters
    ----------
    status : str
        The search's status (:class:`SolverStatus` value).
    gap : float
        ``(cost - bound) / cost`` of the final plan (:attr:`PlanResult.gap`).

    Returns
    -------
    SolverStatus

    Examples
    --------
    >>> final_status("OPTIMAL", 0.0), final_status("OPTIMAL", 0.3), final_status("HEURISTIC", 0.0)
    (<SolverStatus.OPTIMAL: 'OPTIMAL'>, <SolverStatus.FEASIBLE: 'FEASIBLE'>, <SolverStatus.OPTIMAL: 'OPTIMAL'>)
    """
    status = SolverStatus(status)
    if status is SolverStatus.PACKED:
        return status
    if gap <= GAP_TOLERANCE:
        return SolverStatus.OPTIMAL
    return SolverStatus.FEASIBLE if status is SolverStatus.OPTIMAL else status


_MEANING = {
    SolverStatus.OPTIMAL: "proven: the plan meets the lower bound, no placement of this job on these hosts "
                          "costs less on the optimised objective",
    SolverStatus.FEASIBLE: "CP-SAT's best, not proven optimal",
    SolverStatus.HINT: "CP-SAT found nothing better than the constructive layout it started from",
    SolverStatus.HEURISTIC: "the best of the constructive layouts and local searches, not proven by an exact model "
                            "(too large, or not covering every tier or group kind)",
    SolverStatus.PACKED: "hosts of different GPU counts packed with whole TP groups; no search ran and no bound",
}


def status_meaning(status: str, gap: float) -> str:
    """One line saying what ``status`` means, and what a gap above 1% means.

    Examples
    --------
    >>> status_meaning("HEURISTIC", 0.5).split(";")[0]
    'the best of the constructive layouts and local searches, not proven by an exact model (too large, or not covering every tier or group kind)'
    """
    text = _MEANING[SolverStatus(status)]
    if gap > 0.01 and status != SolverStatus.PACKED:
        text += ("; the gap is an upper limit on how much a better plan could save: a large gap can mean a weak "
                 "bound as much as a poor plan")
    return text
