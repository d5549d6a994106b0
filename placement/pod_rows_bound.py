"""A joint lower bound on the ToR and pod tiers: a pod's row pieces against its groups' sizes.

Rings wider than any pod (``C`` above every pod's free hosts): every row is split at both
tiers, and the perimeter argument (:mod:`rankmap.placement.perimeter_bound`) gives, for any
placement, with pod d touching ``r_d`` rows and ``c_d`` columns and its ToR group g (``a_g``
hosts) ``r_g`` rows and ``c_g`` columns::

    w0 cost_0 + w1 cost_1 >= sum_d [w1 (w_row r_d + w_col c_d) + w0 sum_{g in d} (w_row r_g + w_col c_g)]
                             - (w0 + w1) w_col C

The nested blocks bound chooses the pod's and its groups' shapes apart. They are tied: join
a row's piece in pod d and a group of d by an edge when the group has hosts in that row.
A component of that graph holds ``n_j`` rows and a block ``B_j`` of groups whose hosts
``S_j`` fill exactly those rows' pieces, so

- ``sum_{g in B_j} r_g >= n_j + |B_j| - 1`` (edges of a connected graph), ``c_g >= ceil(a_g / r_g)``;
- ``c_d >= ceil(S_j / n_j)`` (the widest of the component's row pieces), ``r_d = sum_j n_j``.

So a pod whose groups' sizes do not split into near-equal row pieces pays either a group
straddling two rows (one more ToR ring crossing) or a wider row piece (more pod columns).
For each pod the least bracket is found over every partition of its groups into blocks and
every pod width ``c_d`` (each block taking the cheapest row count that fits the width,
:func:`pod_rows_cost`), exactly for the pod's hosts used down to :data:`MAX_DEFICIT` below
its free hosts (every split of the hosts left unused among its groups), and as the nested
blocks bound below that; a min-plus programme over pods then adds them up, as in
:func:`rankmap.placement.perimeter_bound.nested_perimeter_bound`.

References
----------
The edge-isoperimetric (perimeter) argument: Bollobas and Leader, "Edge-isoperimetric
inequalities in the grid", Combinatorica 11 (1991); the forest bound on a transportation
problem's support: Dantzig, "Linear Programming and Extensions" (1963), ch. 14.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from rankmap.placement.grid_problem import GridProblem
from rankmap.placement.perimeter_bound import (
    PERIMETER_MAX_WORK,
    block_cost,
    least_total,
    min_plus,
    nested_blocks,
    pod_free_hosts,
)

__all__ = ["pod_rows_bound", "pod_rows_cost", "MAX_DEFICIT", "MAX_GROUPS"]

# Hosts left unused in a pod tracked exactly up to this many (below: the nested blocks bound).
MAX_DEFICIT = 4
# Pods of more ToR groups than this are costed by the nested blocks bound only.
MAX_GROUPS = 4


def _set_partitions(items: tuple) -> list[list[tuple]]:
    """Every partition of ``items`` into non-empty blocks, in a fixed order."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for part in _set_partitions(rest):
        out.append([(first,)] + part)
        for i in range(len(part)):
            out.append(part[:i] + [(first,) + part[i]] + part[i + 1:])
    return out


def pod_rows_cost(sizes: tuple, rows: int, w_row: float, w_col: float, w0: float, w1: float) -> float:
    """Least ``w1 (w_row r_d + w_col c_d) + w0 sum_g (w_row r_g + w_col c_g)`` of one pod whose
    groups hold ``sizes`` hosts (module docstring), on a grid of ``rows`` rows.

    Examples
    --------
    Groups of 3 and 1 on 2 rows (w_row 11, w_col 7). Apart, the pod's best block is 2 x 2
    (36) and its groups' 1 x 3 and 1 x 1 (32 + 18), 86; but 2 rows of 2 make the group of 3
    straddle them (90), and one row of 4 makes the pod 4 wide: 39 + 32 + 18 = 89.

    >>> pod_rows_cost((3, 1), 2, 11, 7, 1.0, 1.0)
    89.0
    """
    sizes = tuple(int(a) for a in sizes if a > 0)
    if not sizes:
        return 0.0
    total = sum(sizes)
    widths = np.arange(1, total + 1)                                           # c_d candidates
    blocks, parts = _layout(len(sizes))
    table = np.stack([_block_rows(tuple(sizes[g] for g in block), rows + len(sizes) - 1, rows, w_row, w_col, w0, w1)
                      for block in blocks])                                    # (B, rows)
    lo = -(-np.array([sum(sizes[g] for g in block) for block in blocks])[:, None] // widths)   # (B, W) rows needed
    term = np.where(lo <= rows, np.take_along_axis(table, np.minimum(lo, rows) - 1, axis=1), np.inf)
    base = w1 * w_col * widths
    best = np.inf
    for idx in parts:                                                          # partitions of j blocks: idx[P, j]
        cost = base + term[idx[:, 0]]
        for j in range(1, idx.shape[1]):
            cost = cost + term[idx[:, j]]                                      # blocks added in partition order
        best = min(best, float(cost.min()))
    return best


@functools.lru_cache(maxsize=None)
def _layout(k: int) -> tuple[list[tuple], list[np.ndarray]]:
    """``(blocks, parts)`` for ``k`` groups: every block (non-empty subset, as a sorted tuple)
    and, per number of blocks j, ``idx[P, j]``: each partition (:func:`_set_partitions`) as
    indices into ``blocks``, in its order."""
    blocks = [b for j in range(1, k + 1) for b in itertools.combinations(range(k), j)]
    pos = {b: i for i, b in enumerate(blocks)}
    by_len: dict = {}
    for part in _set_partitions(tuple(range(k))):
        by_len.setdefault(len(part), []).append([pos[tuple(sorted(b))] for b in part])
    return blocks, [np.array(v) for _, v in sorted(by_len.items())]


@functools.lru_cache(maxsize=4096)
def _block_rows(sizes: tuple, r_max: int, rows: int, w_row: float, w_col: float, w0: float, w1: float) -> np.ndarray:
    """``best[rows]`` (units): ``best[n - 1]``, the least ``w1 w_row n' + w0 sum_g (w_row r_g +
    w_col ceil(a_g / r_g))`` over ``n' >= n`` rows and ``r_g <= r_max`` with ``sum_g r_g >= n' +
    k - 1`` for a block of ``k`` groups of ``sizes`` hosts (:func:`pod_rows_cost`); remembered
    (blocks recur across pods and hosts left unused), read-only."""
    r = np.arange(1, r_max + 1)                                               # r_g = 1 .. rows + K - 1
    conv = w_row * r + w_col * np.ceil(sizes[0] / r)                           # conv[t]: least over sum r_g = t + k
    for a in sizes[1:]:
        conv = _min_conv(conv, w_row * r + w_col * np.ceil(a / r))
    n = np.arange(1, rows + 1)                                                 # rows of the component
    suffix = np.minimum.accumulate(conv[::-1])[::-1]                           # least over sum r_g >= t + k
    tor = suffix[n - 1]                                                        # sum r_g >= n + k - 1
    f = w1 * w_row * n + w0 * tor                                             # f[n - 1]
    best = np.minimum.accumulate(f[::-1])[::-1]                                # least over n' >= n
    best.flags.writeable = False
    return best


def _min_conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Min-plus convolution: ``out[i + j] = min a[i] + b[j]``, ``out[a.size + b.size - 1]``."""
    return min_plus(a, b, b.size - 1, a.size + b.size - 2)


def _joint_table(groups: list, cap: int, rows: int, w_row: float, w_col: float, w0: float, w1: float,
                 memo: dict) -> np.ndarray:
    """``table[cap + 1]``: :func:`pod_rows_cost` of the pod holding ``A`` hosts, the least over
    every way of leaving ``cap - A <= MAX_DEFICIT`` of its groups' hosts unused; 0 (no
    information) further down."""
    table = np.zeros(cap + 1)
    joint = np.full(MAX_DEFICIT + 1, np.inf)
    for deficit in itertools.product(*(range(min(f, MAX_DEFICIT) + 1) for f in groups)):
        left = sum(deficit)
        if left > MAX_DEFICIT or left > cap:
            continue
        sizes = tuple(sorted((f - x for f, x in zip(groups, deficit)), reverse=True))
        if sizes not in memo:
            memo[sizes] = pod_rows_cost(sizes, rows, w_row, w_col, w0, w1)
        joint[left] = min(joint[left], memo[sizes])
    for left in range(min(MAX_DEFICIT, cap) + 1):
        table[cap - left] = joint[left]
    return table


def pod_rows_bound(problem: GridProblem) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs of
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.

    Returns
    -------
    float
        The bound; 0 without pods, when a pod can hold a whole row (``C`` at most its free
        hosts), when the hosts cannot hold the grid, or when the programme would exceed
        :data:`rankmap.placement.perimeter_bound.PERIMETER_MAX_WORK` steps.

    Examples
    --------
    Two stages of 5 hosts; pods of groups (4), (1, 3) and (2) (w_row 11, w_col 7): the pod
    of groups 1 and 3 costs 89, not 86 (:func:`pod_rows_cost`), so 141 where the nested
    blocks see 138 (the optimum, every label sequence, is 145).

    >>> pod_rows_bound(GridProblem(2, 5, (4, 1, 3, 2), 11, 7, domains=((0, 1, 1, 2),), weights=(1.0, 1.0)))
    141.0
    """
    R, C = problem.rows, problem.cols
    if not problem.domains or R * C == 0:
        return 0.0
    free = np.asarray(problem.free)
    n = R * C
    pods = [sorted(p, reverse=True) for p in pod_free_hosts(problem)]
    caps = [sum(p) for p in pods]
    if sum(caps) < n or max(caps) >= C or len(pods) * n * max(caps) > PERIMETER_MAX_WORK:
        return 0.0
    w0, w1 = problem.weights[0], problem.weights[1]
    w_col = problem.w_col if R > 1 else 0
    g0 = block_cost(R, C, int(free.max()), problem.w_row, w_col).astype(float)
    g1 = block_cost(R, C, max(caps), problem.w_row, w_col).astype(float)
    items = []
    memo: dict = {}
    for groups, cap in sorted(zip(pods, caps), key=lambda x: (x[1], x[0])):
        pod = w0 * nested_blocks(groups, cap, g0) + w1 * g1[:cap + 1]          # nested blocks, as there
        if len(groups) <= MAX_GROUPS:
            pod = np.maximum(pod, _joint_table(groups, cap, R, problem.w_row, w_col, w0, w1, memo))
        pod[0] = 0.0
        items.append((pod, cap))
    best = least_total(items, n)
    if not np.isfinite(best):
        return 0.0
    return max(0.0, float(best) - (w0 + w1) * w_col * C)
