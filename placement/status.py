"""How a plan's host order was reached: the solver statuses a plan reports.

The values are the strings written to ``summary.solver_status`` in ``rankmap.json``; the
enum is a ``str`` enum, so a status compares equal to (and formats as) its string.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SolverStatus"]


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
    """Proven optimal: by CP-SAT, or a constructive layout that meets the lower bound."""
    FEASIBLE = "FEASIBLE"
    """CP-SAT found a placement within the time limit but did not prove it optimal."""
    HINT = "HINT"
    """CP-SAT found nothing better than the constructive layout it was given as a hint."""
    HEURISTIC = "HEURISTIC"
    """A constructive layout, kept without CP-SAT (model too large) or beating its result."""
    PACKED = "PACKED"
    """Hosts of different GPU counts, packed with whole TP groups; no search ran."""
