"""Pins as typed grid constraints: rank pins to node ranks, stage pins to grid rows.

A rank pin (global rank -> host) fixes the host of the rank's node rank
(``rank // gpus_per_host``) and so the ToR group of that node's grid cell; a stage pin
(pipeline stage -> ToR group) fixes the group of a whole grid row. Both are checked
against the job and the usable hosts here, with errors that name the pin.
"""

from __future__ import annotations

from collections import Counter

from rankmap.errors import InfeasibleError, SpecError
from rankmap.job.spec import JobSpec
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.grid_problem import GridPins
from rankmap.placement.host_grid import HostGrid
from rankmap.topology.model import Cluster, Host

__all__ = ["node_pins", "grid_pins", "describe_pins"]


def node_pins(cluster: Cluster, job: JobSpec, gpn: int, usable: tuple[Host, ...],
              c: PlacementConstraints) -> dict[int, str]:
    """``{node rank: host}`` from rank pins, checked against the job and the usable hosts.

    Raises
    ------
    SpecError
        A pinned rank beyond the job: bad input (exit 3), named with its line.
    InfeasibleError
        A pinned host not usable, or two pins that conflict (names the pin).
    """
    fixed: dict[int, str] = {}
    names = {h.name for h in usable}
    for rank, host in sorted(c.rank_pins.items()):
        if rank >= job.world_size:  # no such rank: a wrong input, not a request the cluster cannot meet
            raise SpecError(f"rank {rank} is pinned, but the job has {job.world_size} ranks (0..{job.world_size - 1})",
                                  source=c.source, line=c.lines.get(f"pins.ranks.{rank}"),
                                  key=f"pins.ranks.{rank}")
        if host not in names:
            why = cluster.host(host).state if cluster.host(host).state != "free" else "excluded or reserved"
            raise InfeasibleError(f"rank {rank} is pinned to host {host!r}, which is {why}",
                                  source=c.source, line=c.lines.get(f"pins.ranks.{rank}"),
                                  key=f"pins.ranks.{rank}")
        node = rank // gpn
        if fixed.get(node, host) != host or host in [h for n, h in fixed.items() if n != node]:
            raise InfeasibleError(f"rank {rank} is pinned to host {host!r}, which conflicts with another pin "
                                  f"(node rank {node} holds ranks {node * gpn}..{node * gpn + gpn - 1})",
                                  source=c.source, line=c.lines.get(f"pins.ranks.{rank}"),
                                  key=f"pins.ranks.{rank}")
        fixed[node] = host
    return fixed


def grid_pins(cluster: Cluster, job: JobSpec, grid: HostGrid, caps: tuple, tor_index: dict[str, int],
              c: PlacementConstraints, fixed: dict[int, str]) -> GridPins:
    """Stage pins as row pins and ``fixed`` node pins as cell pins.

    Raises
    ------
    SpecError
        A pinned stage beyond the job: bad input (exit 3), named with its line.
    InfeasibleError
        A ToR group too small for its pinned stages (names the shortfall), or a pinned host
        outside its stage's pinned group.
    """
    rows: dict[int, int] = {}
    need: Counter = Counter()
    for stage, group in sorted(c.stage_pins.items()):
        row = _row_of_stage(job, grid, stage, c)
        g = tor_index[group]
        rows[row] = g
        need[g] += grid.cols
    for g, hosts in need.items():
        if hosts > caps[g]:
            stages = sorted(s for s, name in c.stage_pins.items() if tor_index[name] == g)
            raise InfeasibleError(f"stage(s) {stages} pinned to ToR group {cluster.tor_groups[g].name!r} need "
                                  f"{hosts} hosts; it has {caps[g]} usable: {hosts - caps[g]} short",
                                  source=c.source, key="pins.stages")
    cells: dict[tuple[int, int], int] = {}
    for node, host in fixed.items():
        g = tor_index[cluster.host(host).tor_group]
        row = int(grid.row[node])
        if rows.get(row, g) != g:
            raise InfeasibleError(f"host {host!r} (ToR group {cluster.host(host).tor_group!r}) is pinned for node "
                                  f"rank {node}, but its stage is pinned to {cluster.tor_groups[rows[row]].name!r}",
                                  source=c.source, key="pins")
        cells[(row, int(grid.col[node]))] = g
    return GridPins(rows, cells)


def _row_of_stage(job: JobSpec, grid: HostGrid, stage: int, c: PlacementConstraints) -> int:
    if stage >= job.pp:  # no such stage: a wrong input, not a request the cluster cannot meet
        raise SpecError(f"stage {stage} is pinned, but the job has pp={job.pp} (stages 0..{job.pp - 1})", source=c.source,
                              line=c.lines.get(f"pins.stages.{stage}"), key=f"pins.stages.{stage}")
    if grid.rows == 1:
        return 0
    return stage


def describe_pins(c: PlacementConstraints) -> str:
    """The pins, for error messages.

    Examples
    --------
    >>> describe_pins(PlacementConstraints(stage_pins={1: "tg2"}, rank_pins={0: "n1"}))
    'stage 1 -> tg2, rank 0 -> n1'
    """
    parts = [f"stage {s} -> {g}" for s, g in sorted(c.stage_pins.items())]
    parts += [f"rank {r} -> {h}" for r, h in sorted(c.rank_pins.items())]
    return ", ".join(parts)
