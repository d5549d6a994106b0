"""The layout of a previous plan on a new host grid: its hosts kept, the lost ones refilled.

``plan --previous`` keeps an earlier plan's hosts where it can. The grid search scores
placements ``cells[R, C]`` (a ToR group per node rank, :mod:`rankmap.placement.host_grid`), and a
previous host stays at its node rank only when the new cell lies in that host's ToR group
(:func:`rankmap.placement.host_grid.hosts_of_cells`). None of the constructive layouts needs to
be the previous plan's, so without this start a plan asked to move few hosts could move many
(an excluded host in one rack made the search lay 14 + 2 hosts where the old plan had 8 + 8).
:func:`previous_cells` is that start, built as ``rankmap replan`` replaces failed hosts
(:mod:`rankmap.placement.replan`): each kept host's group as before; each lost node rank
(host excluded, failed, busy or gone) in its old group while that group has usable hosts left,
else in the group that adds least to the tier-weighted cost.
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.host_grid import HostGrid
from rankmap.placement.tier_search import tier_cost

__all__ = ["previous_cells"]

# Lost node ranks refilled by pricing every group (a full cost per group each); past this many
# (a previous plan of another job shape), each goes to the group with most usable hosts left.
PRICED_REFILLS = 64


def previous_cells(problem: GridProblem, grid: HostGrid, usable: list, tor_index: dict, group_of: dict,
                   previous: list[str]) -> np.ndarray | None:
    """``cells[R, C]``: the previous host order's layout, lost node ranks refilled; None when
    the usable hosts cannot hold the kept ones (quotas lowered below them).

    Parameters
    ----------
    problem : GridProblem
        ``problem.free[K]``: usable hosts per ToR group (quotas applied).
    grid : HostGrid
        The node ranks' cells.
    usable : list of Host
        The hosts the plan may use.
    tor_index : dict of str to int
        ToR group name -> group number of the grid.
    group_of : dict of str to str
        Host name -> its ToR group name, for every host of the cluster (lost hosts included).
    previous : list of str
        ``previous[N']``: the earlier plan's host per node rank (``N'`` may differ from the grid's).

    Returns
    -------
    ndarray or None

    Examples
    --------
    >>> from rankmap.topology.model import Host
    >>> hosts = [Host(name=f"{g.lower()}{i}", gpus=8, nics=8, tor_group=g) for g in "AB" for i in range(3)]
    >>> grid = HostGrid(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), 2, 2)
    >>> usable = [h for h in hosts if h.name != "a1"]          # a1 excluded: a2 is A's spare
    >>> previous_cells(GridProblem(2, 2, (2, 3), 1, 1), grid, usable, {"A": 0, "B": 1},
    ...                {h.name: h.tor_group for h in hosts}, ["a0", "a1", "b0", "b1"])
    array([[0, 0],
           [1, 1]])
    """
    n, K = grid.row.size, len(problem.free)
    kept = {h.name for h in usable}
    left = np.asarray(problem.free, dtype=np.int64).copy()
    cells = np.full((grid.rows, grid.cols), -1, dtype=np.int64)
    lost = []
    for node in range(n):
        host = previous[node] if node < len(previous) else None
        g = tor_index.get(group_of.get(host)) if host in kept else None
        if g is None or left[g] == 0:
            lost.append(node)
            continue
        cells[grid.row[node], grid.col[node]] = g
        left[g] -= 1
    priced = 0
    for node in lost:
        host = previous[node] if node < len(previous) else None
        old = tor_index.get(group_of.get(host), -1)
        if 0 <= old < K and left[old] > 0:
            g = old
        elif priced < PRICED_REFILLS:
            g, priced = _cheapest_group(problem, cells, grid, node, left), priced + 1
        else:  # a previous plan of another shape: the rest go to the groups with most room
            g = int(np.argmax(left)) if left.max() > 0 else None
        if g is None:
            return None
        cells[grid.row[node], grid.col[node]] = g
        left[g] -= 1
    return cells


def _cheapest_group(problem: GridProblem, cells: np.ndarray, grid: HostGrid, node: int, left: np.ndarray) -> int | None:
    """The group with usable hosts left whose placing at ``node`` costs least (the node ranks
    still unplaced counted in the same group; ties to the lower group number)."""
    best, best_cost = None, None
    for g in np.nonzero(left > 0)[0]:
        trial = cells.copy()
        trial[grid.row[node], grid.col[node]] = g
        trial[trial < 0] = g
        cost = tier_cost(problem, trial)
        if best_cost is None or cost < best_cost:
            best, best_cost = int(g), cost
    return best
