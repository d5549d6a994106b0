"""Small helpers shared by the bounds that build linear programmes row by row.

The stacking and pod-pattern bounds (:mod:`rankmap.placement.stacking_bound`,
:mod:`rankmap.placement.stacking_groups`, :mod:`rankmap.placement.pod_pattern_bound`) state
their programmes as sparse rows ``(row, variable, coefficient)`` and read lower convex hulls
of cost tables; both are kept here once.

References
----------
A. M. Andrew, "Another efficient algorithm for convex hulls in two dimensions", Information
Processing Letters 9 (1979): the monotone chain.
"""

from __future__ import annotations

__all__ = ["LpRows", "lower_hull"]


class LpRows:
    """A linear programme's variables and sparse rows, built one at a time.

    ``cost[V]`` per variable; ``ub``/``eq``: ``(row, variable, coefficient)`` triples of the
    inequality (``<=``) and equality rows, ``b_ub``/``b_eq`` their right-hand sides.

    Examples
    --------
    >>> lp = LpRows()
    >>> x, y = lp.var(1.0), lp.var(2.0)
    >>> lp.add(lp.ub, lp.b_ub, {x: 1.0, y: -1.0}, 0.0)
    >>> lp.cost, lp.ub, lp.b_ub
    ([1.0, 2.0], [(0, 0, 1.0), (0, 1, -1.0)], [0.0])
    """

    def __init__(self) -> None:
        self.cost: list = []
        self.ub: list = []
        self.eq: list = []
        self.b_ub: list = []
        self.b_eq: list = []

    def var(self, c: float) -> int:
        """A new variable of cost ``c``; its index."""
        self.cost.append(c)
        return len(self.cost) - 1

    @staticmethod
    def add(rows: list, rhs: list, coefs: dict, b: float) -> None:
        """One row ``sum coefs[j] x_j (<= or =) b`` appended to ``rows`` and ``rhs``."""
        r = len(rhs)
        rows.extend((r, j, v) for j, v in coefs.items())
        rhs.append(b)


def lower_hull(pts: list) -> list:
    """The lower convex hull of ``pts`` (``(x, y)`` pairs in increasing ``x``), left to right.

    >>> lower_hull([(0, 0.0), (1, 2.0), (2, 1.0), (3, 3.0)])
    [(0, 0.0), (2, 1.0), (3, 3.0)]
    """
    hull: list = []
    for p in pts:
        while len(hull) >= 2 and (hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1]) \
                - (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0]) <= 0:
            hull.pop()
        hull.append(p)
    return hull
