"""A lower bound on the crossings of one tier from the rows and columns each domain touches.

Notation as in :mod:`rankmap.placement.grid_problem`: R rows (DP rings, one per pipeline
stage) of C hosts, ``free[K]`` hosts per domain of one tier level (ToR groups, or pods with
their free hosts summed), ``w_row`` per ring crossing and ``w_col`` per pipeline hop between
domains.

Take any placement; domain d holds ``a_d`` hosts spread over ``r_d`` rows and ``c_d``
columns, ``w_d`` of those rows whole (every host of the row in d). Then:

- ``r_d * c_d >= a_d`` (the hosts lie in the ``r_d x c_d`` rows-by-columns box), and
  ``w_d >= 1`` only when ``c_d = C``, with ``w_d <= floor(a_d / C)``;
- ring crossings: a row over k >= 2 domains crosses at least k times, and the rows over
  k >= 2 domains hold, summed, ``sum_d (r_d - w_d)`` pieces;
- pipeline hops: a column over k domains changes domain at least k - 1 times going down
  the stages, and the columns hold, summed, ``sum_d c_d`` (domain, column) pairs.

So every placement costs at least::

    sum_d g(a_d) - w_col * C,   g(a) = min_{c, r: r c >= a} w_col c + w_row (r - w(c))

(``w(c) = floor(a / C)`` when ``c = C``, else 0; ``g(0) = 0``), and the bound is the least
such sum over ``0 <= a_d <= free[d]`` with ``sum_d a_d = R C``, a min-plus knapsack solved
exactly by dynamic programming. The bound is strongest where the other bounds are weakest:
deep pipelines whose stages fit in a domain (a domain cut into blocks of c columns and
r stages, as in 2-D domain decomposition, where a block's cost is its half perimeter).

On a fabric of several tiers the same placement gives both levels' sums at once: the ToR
groups' hosts ``a_g`` add up, pod by pod, to the pods' hosts ``A_d``. So the ToR and pod
tiers together cost at least::

    min over a_g of  w0 (sum_g g0(a_g) - w_col C) + w1 (sum_d g1(sum_{g in d} a_g) - w_col C)

(:func:`nested_perimeter_bound`): each pod's cells are costed with its own groups' best
blocks, instead of the two levels choosing their cell counts apart (a pod of 5 whole stages
forces its groups to share those 5 stages' hosts). Solved pod by pod (min-plus over the
pod's groups), then over pods.

References
----------
The edge-isoperimetric (perimeter) argument for grid partitions: e.g. Bollobas and Leader,
"Edge-isoperimetric inequalities in the grid", Combinatorica 11 (1991).
"""

from __future__ import annotations

import numpy as np

__all__ = ["perimeter_lower_bound", "nested_perimeter_bound", "block_cost", "pod_free_hosts", "nested_blocks",
           "min_plus", "least_total", "windows", "PERIMETER_MAX_WORK"]

# Skip the bound (return 0) when the knapsack would take more than this many steps
# (domains x hosts x largest domain).
PERIMETER_MAX_WORK = 200_000_000


def block_cost(rows: int, cols: int, a_max: int, w_row: int, w_col: int) -> np.ndarray:
    """``g[a_max + 1]``: the least ``w_col c + w_row (r - w)`` of a domain holding ``a`` hosts
    (module docstring), ``g[0] = 0``.

    Examples
    --------
    A domain of 64 hosts in rows of 46 (w_row 5, w_col 1): blocks of 16 columns by 4 rows.

    >>> int(block_cost(32, 46, 64, 5, 1)[64])
    36
    """
    a = np.arange(a_max + 1)[:, None]                          # a[A, 1]
    c = np.arange(1, cols + 1)[None, :]                        # c[1, C]
    r = -(-a // c)                                              # r[A, C] = ceil(a / c)
    whole = np.where(c == cols, a // cols, 0)
    cost = w_col * c + w_row * (r - whole)
    cost = np.where((r <= rows) & (c <= np.maximum(a, 1)), cost, np.iinfo(np.int64).max // 4)
    g = cost.min(axis=1)
    g[0] = 0
    return g


def perimeter_lower_bound(rows: int, cols: int, free: tuple, w_row: int, w_col: int) -> int:
    """Lower bound (integer cost units) on ``w_row * ring crossings + w_col * hops crossing``
    of every placement of ``rows x cols`` hosts on domains of ``free`` hosts (module docstring).

    Parameters
    ----------
    rows, cols : int
        R rows (pipeline stages) of C hosts (one DP ring each).
    free : tuple of int
        ``free[K]``: usable hosts per domain.
    w_row, w_col : int
        Cost of one ring crossing and of one pipeline hop between domains.

    Returns
    -------
    int
        The bound; 0 when the hosts cannot hold the grid, or the knapsack would exceed
        :data:`PERIMETER_MAX_WORK` steps.

    Examples
    --------
    32 stages of 46 hosts on 24 ToR groups of 64 (w_row 5, w_col 1): blocks of about 16
    columns by 4 stages, 1472 hosts at 36 per 64, less the 46 columns' first domains.

    >>> perimeter_lower_bound(32, 46, (64,) * 24, 5, 1)
    782
    """
    f = [int(x) for x in free if x > 0]
    n = rows * cols
    if not f or sum(f) < n or len(f) * n * max(f) > PERIMETER_MAX_WORK:
        return 0
    big = np.iinfo(np.int64).max // 4
    w_col = w_col if rows > 1 else 0                           # one stage: no pipeline hops
    g = block_cost(rows, cols, max(f), w_row, w_col)
    best = least_total([(g, cap) for cap in sorted(f)], n, big)  # least sum of g over domains holding n
    return max(0, int(best) - w_col * cols)


def min_plus(best: np.ndarray, g: np.ndarray, cap: int, limit: int) -> np.ndarray:
    """Min-plus convolution: ``out[n] = min_{0 <= a <= cap} best[n - a] + g[a]`` for ``n <= limit``.

    ``best[N]`` and ``g[>= cap + 1]`` in units; returns ``out[limit + 1]``, inf where no ``a``
    is in range. One knapsack step: the least cost of ``n`` cells over the items so far
    (``best``) and one more item holding ``a`` of them at cost ``g[a]``.

    >>> min_plus(np.array([0.0, 1.0]), np.array([0.0, 5.0, 6.0]), 2, 3).tolist()
    [0.0, 1.0, 6.0, 7.0]
    """
    big = np.inf
    padded = np.concatenate([np.full(cap, big), best, np.full(max(0, limit + 1 - best.size), big)])
    take = windows(padded[:limit + 1 + cap], cap + 1)                                       # (limit+1, cap+1)
    return (take[:, ::-1] + g[None, :cap + 1]).min(axis=1)


def windows(x: np.ndarray, width: int) -> np.ndarray:
    """``out[i, k] = x[i + k]``, ``out[x.size - width + 1, width]``: a read-only view, as
    ``numpy.lib.stride_tricks.sliding_window_view`` (without its checks: called in loops)."""
    x = np.ascontiguousarray(x)
    step = x.strides[0]
    return np.lib.stride_tricks.as_strided(x, shape=(x.size - width + 1, width), strides=(step, step), writeable=False)


def least_total(items, n: int, big=np.inf):
    """``best[n]`` of the knapsack over ``items``, ``(g[>= cap + 1], cap)`` in the order given:
    :func:`min_plus` from ``best = [0, big, big, ...]`` item by item, the least sum of one
    ``g[a]`` per item over ``a <= cap`` adding up to ``n`` (``big`` or more where none).

    Each step keeps only the counts ``j`` from which the items left can still reach ``n``
    (``j >= n - their caps``; at most ``n``): ``best[n]`` only reads those, and each is the
    least of the same sums as in the full table, so the value is the same. The tables shrink
    from ``n + 1`` counts to about the hosts left unused plus one.

    >>> least_total([(np.array([0.0, 1.0]), 1), (np.array([0.0, 5.0, 6.0]), 2)], 3)
    7.0
    """
    rest = sum(cap for _, cap in items)
    best, lo = np.zeros(1, dtype=items[0][0].dtype if items else float), 0      # best[j - lo]: j = lo .. lo + size - 1
    for g, cap in items:
        rest -= cap
        new_lo, new_hi = max(0, n - rest), min(n, lo + best.size - 1 + cap)
        if new_hi < new_lo:
            return big
        start = new_lo - cap                                           # padded[k]: best at j = start + k
        padded = np.full(new_hi - start + 1, big, dtype=best.dtype)
        s0, s1 = max(lo, start), min(lo + best.size - 1, new_hi)
        if s0 <= s1:
            padded[s0 - start:s1 - start + 1] = best[s0 - lo:s1 - lo + 1]
        take = windows(padded, cap + 1)                                # (new_hi - new_lo + 1, cap + 1)
        best, lo = (take[:, ::-1] + g[None, :cap + 1]).min(axis=1), new_lo
    return best[n - lo].item() if lo <= n < lo + best.size else big


def pod_free_hosts(problem) -> list[list[int]]:
    """Free hosts of each pod's ToR groups (groups with none left out), pods in domain order;
    pods without a free host are left out. ``problem.domains[0]`` names each group's pod."""
    free = np.asarray(problem.free)
    dom = np.asarray(problem.domains[0])
    pods = [[int(f) for f in free[dom == d] if f > 0] for d in range(int(dom.max()) + 1)]
    return [p for p in pods if p]


def nested_blocks(groups, cap: int, g0: np.ndarray) -> np.ndarray:
    """``inner[A]`` for ``A <= cap``: the least sum of the groups' block costs ``g0`` over every
    way of splitting ``A`` cells between groups of these sizes (inf where they cannot hold it)."""
    inner = np.full(cap + 1, np.inf)
    inner[0] = 0.0
    for f in sorted(groups):
        inner = min_plus(inner, g0, f, cap)
    return inner


def nested_perimeter_bound(problem) -> float:
    """Lower bound (units) on ``w0 cost_0 + w1 cost_1`` (the ToR and pod levels' costs of
    :func:`rankmap.placement.tier_search.tier_costs`) of every placement: the perimeter
    bound with the ToR groups' cells adding up to their pods' cells (module docstring).

    Parameters
    ----------
    problem : GridProblem
        With at least one level of domains (pods) above the ToR groups.

    Returns
    -------
    float
        The bound; 0 without pods, when the hosts cannot hold the grid, or when the
        programme would exceed :data:`PERIMETER_MAX_WORK` steps.

    Examples
    --------
    Four stages of 2 hosts; pod 0 is one group of 2, pod 1 groups of 3 and 5 (a ring
    crossing weighs 11, a hop 3). Apart, the levels see 12. Nested: pod 1's hosts are 3
    stages split between its groups, so one more boundary of 2 hops: stage 0 in the group
    of 2, stages 1-2 in the group of 5, stage 3 in the group of 3 cost 2 hops across both
    tiers and 2 across the ToR tier, 18, the optimum.

    >>> from rankmap.placement.grid_problem import GridProblem
    >>> nested_perimeter_bound(GridProblem(4, 2, (2, 3, 5), 11, 3, domains=((0, 1, 1),), weights=(1.0, 1.0)))
    18.0
    """
    R, C = problem.rows, problem.cols
    if not problem.domains or R * C == 0:
        return 0.0
    free = np.asarray(problem.free)
    n = R * C
    pods = pod_free_hosts(problem)
    caps = [sum(p) for p in pods]
    if sum(caps) < n or len(pods) * n * max(caps) + sum(len(p) * max(p) * c for p, c in zip(pods, caps)) > PERIMETER_MAX_WORK:
        return 0.0
    w0, w1 = problem.weights[0], problem.weights[1]
    w_col = problem.w_col if R > 1 else 0
    g0 = block_cost(R, C, int(free.max()), problem.w_row, w_col).astype(float)
    g1 = block_cost(R, C, max(caps), problem.w_row, w_col).astype(float)
    items = []
    for groups, cap in sorted(zip(pods, caps), key=lambda x: (x[1], x[0])):
        pod = w0 * nested_blocks(groups, cap, g0) + w1 * g1[:cap + 1]                # H_d[A]
        pod[0] = 0.0
        items.append((pod, cap))
    best = least_total(items, n)
    if not np.isfinite(best):
        return 0.0
    return max(0.0, float(best) - (w0 + w1) * w_col * C)
