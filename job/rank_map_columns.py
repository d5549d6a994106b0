"""Reading the ``ranks`` of a large rankmap.json as columns: every rule checked on arrays at once.

:func:`rankmap.job.rank_map.parse_rankmap` checks the entries one at a time, which names
the first faulty one but takes seconds per 10^6 ranks. :func:`columns_of_entries` checks
the same rules on columns (numpy arrays of rank, node rank, local rank, rail and the
parallel coordinates; host and ToR group names once per node) and returns the map's
hosts, ToR groups and rails when all hold, or None when any fails -- then the entry by
entry check runs and says which entry breaks which rule.
"""

from __future__ import annotations

import numpy as np

from rankmap.job.layout import COORD, ParallelLayout
from rankmap.job.spec import DIMS
from rankmap.names import host_identity, name_problem
from rankmap.topology.hostnames import check_hostname

__all__ = ["columns_of_entries", "checked_columns", "name_codes"]


def columns_of_entries(ranks: list, nprocs: list[int], layout: ParallelLayout,
                       keys: tuple[str, ...]) -> tuple[tuple, tuple, tuple] | None:
    """``(hosts[N], tor_groups[N], rails[N][nprocs[n]])`` of valid rank entries, or None.

    Valid: each entry a dict of exactly ``keys``; integers (not bools, not floats) >= 0;
    ranks 0..W-1 each once; ``rank = offsets[node_rank] + local_rank`` with ``local_rank <
    nprocs[node_rank]``; every entry of a node naming one host and one ToR group; hosts
    valid and distinct in any letter case; ToR group names valid; coordinates those of
    ``layout``. ``W = len(ranks) = sum(nprocs)``.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> lay = ParallelLayout.of(JobSpec(tp=2, dp=2, num_micro_batches=1))
    >>> keys = ("rank", "host", "node_rank", "local_rank", "tor_group", "rail") + DIMS
    >>> entry = lambda r: {"rank": r, "host": f"h{r // 2}", "node_rank": r // 2, "local_rank": r % 2,
    ...                    "tor_group": "t", "rail": r % 2, "tp": r % 2, "cp": 0, "ep": 0, "dp": r // 2, "pp": 0}
    >>> columns_of_entries([entry(r) for r in (3, 0, 2, 1)], [2, 2], lay, keys)
    (('h0', 'h1'), ('t', 't'), ((0, 1), (0, 1)))
    >>> columns_of_entries([entry(r) for r in (3, 0, 2, 2)], [2, 2], lay, keys) is None    # rank 2 twice
    True
    """
    wanted = set(keys)
    if not all(type(rec) is dict and rec.keys() == wanted for rec in ranks):
        return None
    cols = {}
    for key in keys:
        if key in ("host", "tor_group"):
            continue
        col = [rec[key] for rec in ranks]
        if set(map(type, col)) != {int}:
            return None
        try:
            cols[key] = np.array(col, dtype=np.int64)                 # [W]
        except OverflowError:
            return None
    for key in ("host", "tor_group"):
        names = [rec[key] for rec in ranks]
        if set(map(type, names)) != {str}:
            return None
        cols[key] = name_codes(names)
    return checked_columns(cols, nprocs, layout)


def name_codes(names, known: dict | None = None) -> tuple[list[str], np.ndarray]:
    """``(distinct[K], code[len(names)])``: each name's place in ``distinct`` (first seen first).

    ``known``: a ``{name: code}`` to extend (for names met piece by piece); ``distinct`` then
    lists all of its names.

    >>> name_codes(["b", "a", "b"])
    (['b', 'a'], array([0, 1, 0]))
    """
    code = {} if known is None else known
    got = np.fromiter((code.setdefault(name, len(code)) for name in names), dtype=np.int64, count=len(names))
    return list(code), got


def checked_columns(cols: dict, nprocs: list[int], layout: ParallelLayout) -> tuple[tuple, tuple, tuple] | None:
    """:func:`columns_of_entries` on columns already made: ``cols[key]`` an int64 array ``[W]`` of
    that key of every entry (list order) for the integer keys, and ``(distinct, code[W])`` of
    :func:`name_codes` for ``host`` and ``tor_group``. Same result, or None when a rule fails."""
    world, n_nodes = len(cols["rank"]), len(nprocs)
    if any(col.size and col.min() < 0 for key, col in cols.items() if key not in ("host", "tor_group")):
        return None
    rank, node, local = cols["rank"], cols["node_rank"], cols["local_rank"]
    counts = np.asarray(nprocs, dtype=np.int64)                       # [N]
    offsets = np.concatenate([[0], np.cumsum(counts)])                # [N+1]
    if rank.max() >= world or np.bincount(rank, minlength=world).max() > 1 or node.max() >= n_nodes:
        return None
    if (local >= counts[node]).any() or (offsets[node] + local != rank).any():
        return None
    entry_of = np.empty(world, dtype=np.int64)
    entry_of[rank] = np.arange(world)                                 # entry_of[rank]: its place in the list
    first = entry_of[offsets[:-1]]                                    # [N]: each node's first rank's entry
    per_node = {}
    for key in ("host", "tor_group"):
        distinct, code = cols[key]
        if (code != code[first][node]).any():                         # a node's entries name two hosts/groups
            return None
        per_node[key] = [distinct[c] for c in code[first].tolist()]
    hosts, tors = per_node["host"], per_node["tor_group"]
    if any(check_hostname(h) for h in hosts) or len({host_identity(h) for h in hosts}) != n_nodes:
        return None
    if any(name_problem(t, "ToR group name") for t in set(tors)):
        return None
    coords = layout.coord_table[rank]                                 # [W, 5]: the job's coordinates
    if any((cols[d] != coords[:, COORD[d]]).any() for d in DIMS):
        return None
    rail = np.empty(world, dtype=np.int64)
    rail[rank] = cols["rail"]                                         # rail[rank]
    by_rank, bounds = rail.tolist(), offsets.tolist()
    shared: dict = {}                                                 # one tuple per distinct rails row
    rails = tuple(shared.setdefault(row, row) for row in (tuple(by_rank[a:b]) for a, b in zip(bounds, bounds[1:])))
    return tuple(hosts), tuple(tors), rails
