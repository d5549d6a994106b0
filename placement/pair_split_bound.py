"""A lower bound on the whole optimised cost when CP x EP groups span hosts: grid plus split spans.

The grid problem (:mod:`rankmap.placement.grid_problem`) holds the DP ring and pipeline
traffic only. When one CP x EP group spans 2 hosts, the planner lays each group's hosts as
one span of 2 consecutive columns ``(2j, 2j + 1)`` of a row (the span search of
:mod:`rankmap.placement.plan`), and a span split between two ToR groups (or pods) sends its CP
and EP traffic across that tier: cost the grid bounds leave out, so the printed gap of a CP
or EP job counted it as the plan's own.

A split span is a ring edge inside the span that crosses the tier (the row's hosts run in
column order); each costs at least ``p`` units times the tier's weight on top of the grid
cost, ``p`` the fewest bytes of CP and EP traffic crossing the cut of one span
(:func:`pair_split_units`). Such an edge has a domain on each side whose row piece ends
inside the span; charge ``p / 2`` to each. Now take a pod (notation of
:mod:`rankmap.placement.pod_box_bound`, ``Phi_d`` its rows and columns and its groups'):

- either every row piece of the pod's groups starts and ends on span boundaries: then so do
  the pod's pieces, and the pod with its groups is a pod of the problem in whole spans
  (:func:`rankmap.placement.grid_problem.span_problem`: each group ``floor(free / 2)`` spans,
  a span column two hosts wide, so ``Phi_d`` is the same in both), bounded by its pod
  patterns there (:mod:`rankmap.placement.pod_pattern_bound`) at half its hosts;
- or some group's piece ends inside a span: ``Phi_d`` (its own pod patterns) plus ``w0 p / 2``,
  and ``w1 p / 2`` more when the pod's hosts are odd in number (a pod piece of odd length ends
  inside a span too).

The least of the two, per pod and host count, added over pods by a min-plus programme (as
:func:`rankmap.placement.pod_box_bound.pods_bound`), less the columns' first domains, bounds
the grid cost plus the split spans' traffic (:func:`whole_spans_bound`).

On the 100,000-GPU three-tier benchmark instances (a CP x EP group over 2 hosts, ``p`` 24
million units, one unit 1.6-3.2 kB), the printed gap on fresh, 25% and 50% busy hosts: CP
0.18/0.80/1.12% -> 0.02/0.20/0.14%, EP 0.80/2.07/0.91% -> 0.16/1.20/0.16% (CP on 50% busy hosts:
the bound 20,007 -> 20,205 million units); the pods' pattern costs are those the plan's span
search computed already (remembered), so the bound adds about 0.2 s of CPU.

References
----------
The edge-isoperimetric argument: Bollobas and Leader, "Edge-isoperimetric inequalities in the
grid", Combinatorica 11 (1991); a disjunction of two cases bounded apart (the least of the
two bounds): Balas, "Disjunctive programming", Annals of Discrete Mathematics 5 (1979).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.metrics import evaluate
from rankmap.placement.pod_box_bound import pod_box_costs, pods_bound
from rankmap.placement.pod_pattern_bound import MAX_PODS, pod_pattern_costs
from rankmap.placement.pod_profile_bound import pod_profile_bound
from rankmap.placement.problem import PlacementProblem

__all__ = ["pair_split_bound", "pair_split_units", "whole_spans_bound"]

# The traffic of one CP x EP group: within its span of hosts (the grid's bounds leave it out).
SPAN_KINDS = ("cp", "ep")


def pair_split_units(problem: PlacementProblem) -> int:
    """``p``: the fewest bytes of CP and EP traffic crossing a cut of one CP x EP span of hosts,
    in the grid's units (floored); 0 when no group spans hosts. (Only these kinds: their groups
    lie inside a span, so every byte counted runs between the span's own hosts.)

    Ranks are numbered digit by digit (:class:`rankmap.job.layout.ParallelLayout`), so every
    CP x EP group has the same edges and bytes; the first span of row 0 and the last span of
    the last row are measured (the least kept), each cut between its hosts (the hosts after the
    cut in another ToR group, CP and EP traffic only).
    """
    span, grid = problem.cp_ep_span, problem.grid
    if span <= 1 or problem.unit_bytes <= 0 or grid.cols % span:
        return 0
    traffic = {k: t for k, t in problem.traffic.items() if k in SPAN_KINDS}
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


def whole_spans_bound(problem: GridProblem, pair: float) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` plus ``pair`` (times each tier's
    weight) per span of columns ``(2j, 2j + 1)`` split at that tier, from the pod patterns
    (module docstring): each pod either has every row piece of its own and of its groups in
    whole spans (then it is a pod of the span problem of half its hosts) or has a group with a
    piece ending inside a span (``pair / 2`` at the ToR tier, and at the pod tier too when its
    hosts are odd); a min-plus programme over pods adds them up. 0 where
    :func:`rankmap.placement.pod_box_bound.pods_bound` gives 0, or when the columns are odd.

    Examples
    --------
    Two stages of 8 hosts, three pods of two groups of 3 (w_row 10, w_col 1): a full pod at its
    best is a row of 6 (16) with its groups 1 x 3 (13 each), 42; in whole spans a pod holds 4
    hosts (2 + 2: 14 + 12 + 12, 38), and 6 hosts split a span (42 + 20). The 16 hosts: 6, 6 and
    4 hosts, 42 + 42 + 38 less 16 (the columns' first domains at both tiers): 106 for the grid
    alone (``pair`` 0); with ``pair`` 40 the full pods pay 20 each, 146.

    >>> p = GridProblem(2, 8, (3,) * 6, 10, 1, 0, ((0, 0, 1, 1, 2, 2),), (1.0, 1.0))
    >>> whole_spans_bound(p, 0.0), whole_spans_bound(p, 40.0)
    (106.0, 146.0)
    """
    R, C = problem.rows, problem.cols
    if not problem.domains or C % 2 or R * C == 0:
        return 0.0
    # the problem in whole spans (as span_problem, also when its groups cannot hold the grid)
    spans = dataclasses.replace(problem, cols=C // 2, free=tuple(f // 2 for f in problem.free),
                                w_col=2 * problem.w_col, w_wrap=2 * problem.w_wrap)
    w0, w1 = problem.weights[0], problem.weights[1]

    def table(i: int, pod: tuple) -> np.ndarray:
        cost = pod_pattern_costs if i < MAX_PODS else pod_box_costs
        host = cost(list(pod), problem) + w0 * pair / 2                      # a group's piece ends inside a span
        host[1::2] += w1 * pair / 2                                          # and, hosts odd, the pod's
        halves = [f // 2 for f in pod if f // 2 > 0]
        whole = cost(halves, spans) if halves else np.zeros(1)               # [cap // 2 + 1] in spans
        out = host.copy()
        out[0:2 * whole.size:2] = np.minimum(out[0:2 * whole.size:2], whole)
        out[0] = 0.0
        return out

    # both problems' pod costs; on one stage (no pipeline hops) the pod costs count no column
    # part, so pods_bound takes nothing off for the columns' first domains there
    return pods_bound(problem, table, work_factor=2)


def pair_split_bound(problem: PlacementProblem) -> float:
    """Lower bound (units) on the optimised cost of every placement, CP and EP traffic between
    hosts included: the larger of :func:`whole_spans_bound` (rings wider than pods) and the
    pod profiles with the same split spans charged
    (:func:`rankmap.placement.pod_profile_bound.pod_profile_bound` with ``pair``: rings
    narrower than pods); 0 when no CP x EP group spans 2 hosts or neither applies."""
    if problem.cp_ep_span != 2:
        return 0.0
    p = float(pair_split_units(problem))
    if p <= 0:
        return 0.0
    return max(whole_spans_bound(problem.grid_problem, p), pod_profile_bound(problem.grid_problem, p))
