"""The host grid of a placed job: node ranks as (pipeline stage row, DP column) cells.

Ranks follow the launcher's rule (rank = node_rank * G + local_rank), so once the job's
order string keeps TP groups inside hosts and every inter-host group rail-aligned, a
placement is a host per node rank. Node ranks of one pipeline stage form a grid row whose
DP rings run along the row in column order (closing from the last column to the first);
a column holds one pipeline. A placement of the grid is a ToR group per cell
(:mod:`rankmap.placement.grid_problem`); :func:`hosts_of_cells` picks the hosts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import JobSpec
from rankmap.job.traffic import GroupTraffic, alignment_problems
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster, Host

__all__ = ["HostGrid", "build_grid", "check_alignment", "expert_span", "outer_digits", "cells_of_hosts", "hosts_of_cells"]


@dataclass(frozen=True)
class HostGrid:
    """``row[N]`` and ``col[N]``: the cell of each node rank in a rows x cols grid."""

    row: np.ndarray
    col: np.ndarray
    rows: int
    cols: int


def outer_digits(layout: ParallelLayout, gpn: int) -> list[tuple[str, int]]:
    """Rank digits (order-string dims of size > 1) that vary across hosts, fastest first."""
    out, stride = [], 1
    for dim, size in layout.digits:
        if size > 1 and stride * size > gpn:
            out.append((dim, size))
        stride *= size
    return out


def check_alignment(job: JobSpec, layout: ParallelLayout, traffic: dict[str, GroupTraffic], gpn: int,
                    error) -> int:
    """Raise ``error(message, key)`` unless TP stays in hosts and inter-host groups are
    rail-aligned; return the CP/EP span: hosts one CP x EP group spans (1 if none spans hosts).

    CP rings and EP all-to-alls that span hosts are kept inside ToR groups by placing
    their hosts as one span of consecutive columns, which needs cp and ep to come before
    dp in the order string.
    """
    ranks = np.arange(job.world_size)
    problems = alignment_problems(layout, traffic, ranks // gpn, ranks % gpn)
    if problems:
        raise error(f"order {job.order!r} with tp={job.tp} cp={job.cp} ep={job.ep} dp={job.dp} pp={job.pp} "
                    f"on {gpn}-GPU hosts: " + "; ".join(problems[:2])
                    + ". Use an order whose leading dims fill a host exactly (e.g. tp*cp = GPUs per host), "
                    "or --order auto.", "parallel.order")
    outer = [d for d, _ in outer_digits(layout, gpn) if d != "pp"]
    span = 1
    for dim, size in outer_digits(layout, gpn):
        if dim in ("cp", "ep"):
            if "dp" in outer and outer.index(dim) > outer.index("dp"):
                raise error(f"{dim.upper()} groups span hosts, and order {job.order!r} puts {dim} after dp, which "
                            f"scatters each {dim.upper()} group over the DP ring; put {dim} before dp "
                            f"(e.g. tp-cp-ep-dp-pp) or use --order auto", "parallel.order")
            span *= size
    return span


def expert_span(layout: ParallelLayout, grid: HostGrid, gpn: int) -> int:
    """Hosts one EP group of the expert generator spans when every group's hosts are one
    aligned span of consecutive columns of one row (``[k s, k s + s)``), else 1.

    With Megatron-Core's "parallel folding" (MoE, arXiv 2504.14960) the EP digit follows the
    expert TP digit, so with expert TP filling a host an EP group is ``ep`` consecutive hosts
    of one stage: DP replicas ``k ep .. k ep + ep - 1``, columns of the grid.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> job = JobSpec(tp=8, dp=4, ep=2, num_micro_batches=1).resolved(32)
    >>> layout = ParallelLayout.of(job)
    >>> expert_span(layout, build_grid(layout, 8, 4), 8)
    2
    """
    if layout.sizes.get("ep", 1) <= 1:
        return 1
    hosts = layout.groups("ep") // gpn                                   # hosts[G, ep]
    spans = {len(set(h.tolist())) for h in hosts}
    if len(spans) != 1 or (s := spans.pop()) == 1:
        return 1
    for h in hosts:
        cols = np.unique(grid.col[h])
        if len(set(grid.row[h].tolist())) != 1 or cols.size != s or cols[0] % s or cols[-1] != cols[0] + s - 1:
            return 1
    return s


def build_grid(layout: ParallelLayout, gpn: int, n_nodes: int) -> HostGrid:
    """Rows are the pipeline stages that span hosts (one row if PP stays in hosts)."""
    pp_of_node = layout.column("pp")[::gpn]
    varies = n_nodes > 1 and (pp_of_node != pp_of_node[0]).any()
    # Hosts holding several stages (pp inside hosts too) number their rows by the stages present.
    row = np.unique(pp_of_node, return_inverse=True)[1].astype(np.int64) if varies else np.zeros(n_nodes, dtype=np.int64)
    rows = int(row.max()) + 1
    col = np.empty(n_nodes, dtype=np.int64)
    for r in range(rows):
        members = np.nonzero(row == r)[0]
        col[members] = np.arange(members.size)
    return HostGrid(row, col, rows, n_nodes // rows)


def cells_of_hosts(grid: HostGrid, hosts: list[str], cluster: Cluster, tor_index: dict) -> np.ndarray:
    """``cells[R, C]``: ToR group index of the host at each cell of a host order."""
    lut = np.empty(len(cluster.tor_groups), dtype=np.int64)   # TorGroup.index -> tor_index's number
    for g in cluster.tor_groups:
        lut[g.index] = tor_index[g.name]
    cells = np.empty((grid.rows, grid.cols), dtype=np.int64)
    cells[grid.row, grid.col] = lut[np.array(cluster.group_indices(hosts), dtype=np.int64)]
    return cells


def hosts_of_cells(cells: np.ndarray, grid: HostGrid, usable: list[Host], tor_index: dict,
           fixed: dict | None = None, previous: list[str] | None = None) -> list[str]:
    """Hosts per node rank for a cell placement.

    ``fixed`` maps node ranks to hosts they must get (rank pins); ``previous`` is an
    earlier host order whose hosts are kept wherever the new cell's ToR group allows.
    Other cells get their group's hosts in name order, row by row.
    """
    fixed = dict(fixed or {})
    n = grid.row.size
    node_at = {(int(r), int(c)): i for i, (r, c) in enumerate(zip(grid.row, grid.col))}
    usable_names = {h.name: tor_index[h.tor_group] for h in usable}
    out: list = [None] * n
    taken: set = set()
    for node, host in fixed.items():
        out[node] = host
        taken.add(host)
    if previous:
        for node, host in enumerate(previous[:n]):
            g = usable_names.get(host)
            if out[node] is None and host not in taken and g == cells[grid.row[node], grid.col[node]]:
                out[node] = host
                taken.add(host)
    pools: dict[int, list[str]] = {}
    for h in sorted(usable, key=lambda h: natural_key(h.name)):
        if h.name not in taken:
            pools.setdefault(tor_index[h.tor_group], []).append(h.name)
    nxt = Counter()
    for r in range(grid.rows):
        for c in range(grid.cols):
            node = node_at[r, c]
            if out[node] is None:
                g = int(cells[r, c])
                out[node] = pools[g][nxt[g]]
                nxt[g] += 1
    return out
