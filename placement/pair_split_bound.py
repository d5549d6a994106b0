"""A lower bound on the whole optimised cost when CP x EP groups span hosts: grid plus split spans.

The grid problem (:mod:`rankmap.placement.grid_problem`) holds the DP ring and pipeline
traffic only. When one CP x EP group spans ``s >= 2`` hosts, the planner lays each group's
hosts as one span of ``s`` consecutive columns of a row (:func:`rankmap.placement.plan`'s span
search), and a span split between two ToR groups (or pods) sends its CP and EP traffic across
that tier: cost the grid bounds leave out, so the printed gap of a CP or EP job counts it
as the plan's fault.

Every split span has a ring edge inside it that crosses the tier (the row's hosts run in
column order), and every such edge costs at least ``p`` units (times the tier's weight) on top
of the grid cost: the fewest bytes of the CP and EP traffic crossing any cut of one span,
:func:`pair_split_units`. A domain (ToR group or pod) whose every row piece is whole spans
(starts at a multiple of ``s``, ends before one) holds a multiple of ``s`` hosts over a
multiple of ``s`` columns; so a domain with an odd number of hosts or of columns (``s = 2``)
has a row piece with an end inside a span, an edge there that crosses its tier. Such an edge
has one domain on each side, so every placement costs at least its grid cost plus ``p / 2``
per such domain (times its tier's weight). The pod boxes bound with that term
(:func:`rankmap.placement.pod_box_bound.pod_box_bound`, ``pair = p``) bounds the whole cost.

On the 100,000-GPU CP benchmark instance on 50% busy hosts (a CP x EP group over 2 hosts:
``p`` = 40.5 million units, above 17 million where the bound stops moving), the bound rises
from 20,007 million units (the grid's pod patterns bound) to 20,169 million, the pod boxes
bound of the problem in whole spans.

References
----------
Lagrangian relaxation of the pod boxes bound: :mod:`rankmap.placement.pod_box_bound`;
the edge-isoperimetric argument: Bollobas and Leader, "Edge-isoperimetric inequalities in the
grid", Combinatorica 11 (1991).
"""

from __future__ import annotations

import numpy as np

from rankmap.placement.metrics import evaluate
from rankmap.placement.pod_box_bound import pod_box_bound
from rankmap.placement.problem import PlacementProblem

__all__ = ["pair_split_bound", "pair_split_units"]

# The grid problem's own traffic (its bounds count these).
GRID_KINDS = ("dp", "pp")


def pair_split_units(problem: PlacementProblem) -> int:
    """``p``: the fewest bytes of traffic other than DP and PP crossing a cut of one CP x EP
    span of hosts, in the grid's units (floored); 0 when no group spans hosts.

    Every such group has the same rank structure, so the first span of row 0 and the last of
    the last row are measured (both, against a layout that is not regular), each cut between
    its hosts (hosts after the cut in another ToR group).
    """
    span, grid = problem.cp_ep_span, problem.grid
    if span <= 1 or problem.unit_bytes <= 0 or grid.cols % span:
        return 0
    traffic = {k: t for k, t in problem.traffic.items() if k not in GRID_KINDS}
    if not traffic:
        return 0
    node_at = {(int(r), int(c)): n for n, (r, c) in enumerate(zip(grid.row, grid.col))}
    world = len(grid.row) * problem.gpn
    least = np.inf
    for row, first in ((0, 0), (grid.rows - 1, grid.cols - span)):
        nodes = [node_at[(row, first + k)] for k in range(span)]
        for cut in range(1, span):
            rank_tor = np.zeros(world, dtype=np.int64)
            for n in nodes[cut:]:
                rank_tor[n * problem.gpn:(n + 1) * problem.gpn] = 1
            least = min(least, evaluate(problem.layout, traffic, rank_tor, 2).cross_tor_bytes)
    return int(least // problem.unit_bytes)


def pair_split_bound(problem: PlacementProblem) -> float:
    """Lower bound (units) on the optimised cost of every placement, CP and EP traffic between
    hosts included (module docstring); 0 when no group spans hosts or the pod boxes bound does
    not apply (see :func:`rankmap.placement.pod_box_bound.pod_box_bound`). Only spans of 2
    hosts are bounded this way (the parity argument)."""
    if problem.cp_ep_span != 2:
        return 0.0
    p = pair_split_units(problem)
    return pod_box_bound(problem.grid_problem, pair=float(p)) if p > 0 else 0.0
