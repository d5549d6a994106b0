"""The start-up check a user's own training script makes: does this process sit where the rank
map says? The same check the bundled engine makes (:mod:`rankmap.launch.ranks`). No torch
is imported here; with torch.distributed already initialised, the claims of all processes are
exchanged over it.

::

    from rankmap.launch import check_placement
    where = check_placement()          # before init_process_group: this process alone
    dist.init_process_group("gloo")
    where = check_placement()          # after: every process's claim, checked by every process
    tp_ranks = where.groups["tp"]      # the map's TP group of this rank (Megatron-Core's too)

What is checked: the launcher's variables (torchrun's ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``,
or Open MPI's or srun's, see :class:`rankmap.launch.ranks.LaunchEnv`); this machine is the
map's host for that rank (``RANKMAP_HOST``, ``SLURMD_NODENAME`` or the machine's names, see
:func:`rankmap.launch.ranks.find_host`) at the map's local rank; the world size. After the
exchange also that no (host, local rank) is taken twice, so every TP/PP/DP/CP/EP group's
members run where the map puts them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from rankmap.errors import PlacementMismatch
from rankmap.job.layout import GROUP_KINDS
from rankmap.job.rank_map import RankMap, read_rankmap
from rankmap.launch.common import RANKMAP_FILE_VAR
from rankmap.launch.ranks import LaunchEnv, check_claims, launcher_message, make_claim

__all__ = ["Placement", "check_placement", "placement_of"]


@dataclass(frozen=True)
class Placement:
    """Where this process sits in the map: rank, host, local and node rank, coordinates, groups.

    ``groups[kind]`` lists the ranks of this rank's group of each kind (tp, cp, ep, dp, dp_ep,
    pp), ascending; ``exchanged`` says whether every process's claim was checked.
    """

    rank: int
    host: str
    local_rank: int
    node_rank: int
    coords: dict
    groups: dict
    exchanged: bool


def placement_of(rm: RankMap, rank: int, exchanged: bool = False) -> Placement:
    """The map's placement of ``rank`` (no check)."""
    entry = rm.entry(rank)
    node = int(rm.rank_node[rank])
    groups = {kind: [int(r) for r in rm.layout.group_of(kind, rank)] for kind in GROUP_KINDS}
    return Placement(rank=rank, host=entry["host"], local_rank=entry["local_rank"], node_rank=node,
                     coords=rm.layout.coords(rank), groups=groups, exchanged=exchanged)


def _torch_gather() -> Callable | None:
    """``all_gather_object`` over the default group, when torch.distributed is initialised."""
    if "torch.distributed" not in sys.modules:
        return None
    dist = sys.modules["torch.distributed"]
    if not (dist.is_available() and dist.is_initialized()):
        return None

    def gather(obj):
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, obj)
        return out
    return gather


def check_placement(rankmap_path: str | None = None, *, env: dict | None = None,
                    gather: Callable | None = None) -> Placement:
    """Check that this process runs where the rank map puts its launcher rank.

    Parameters
    ----------
    rankmap_path : str, optional
        rankmap.json; default: ``$RANKMAP_FILE`` (exported by the scripts of ``rankmap launch``).
    env : dict, optional
        Environment to read (default ``os.environ``).
    gather : callable, optional
        ``gather(obj) -> [obj of every rank]`` in launcher-rank order; default: torch.distributed's
        ``all_gather_object`` when it is initialised, else this process is checked alone.

    Returns
    -------
    Placement

    Raises
    ------
    PlacementMismatch
        No rank map, no launcher variables, a world size other than the map's, a host the map
        does not name, a local rank past the host's, or ranks numbered otherwise than the map
        (hosts swapped, c10d rendezvous), in words naming the rank, host and local rank.
    """
    env = os.environ if env is None else env
    path = rankmap_path or env.get(RANKMAP_FILE_VAR)
    if not path:
        raise PlacementMismatch(f"no rank map: pass its path or set {RANKMAP_FILE_VAR} (the scripts of "
                                f"`rankmap launch` export it)")
    rm = read_rankmap(path)
    launch = LaunchEnv.from_environ(env)
    if launch.world_size != rm.world_size:
        raise PlacementMismatch(f"the launcher started {launch.world_size} processes; the rank map has "
                                f"{rm.world_size} ranks")
    claim = make_claim(rm.hosts, launch, env)
    gather = gather or _torch_gather()
    claims = gather(claim) if gather else None
    if claims is None:  # alone: only this process's claim
        return placement_of(rm, _own_rank(rm, claim), exchanged=False)
    map_rank = check_claims(rm, claims)
    message = launcher_message(rm, claims, map_rank)
    if message:
        raise PlacementMismatch(message)
    return placement_of(rm, map_rank[launch.rank], exchanged=True)


def _own_rank(rm: RankMap, claim) -> int:
    """The map rank of this process alone; it must be the launcher's rank."""
    where = f"rank {claim.launcher_rank} (machine {claim.machine}, local rank {claim.local_rank})"
    if claim.host is None:
        raise PlacementMismatch(f"{where} runs on no host of the rank map ({', '.join(rm.hosts[:4])}"
                                f"{', ...' if len(rm.hosts) > 4 else ''}); set RANKMAP_HOST if its name differs")
    node = rm.hosts.index(claim.host)
    if claim.local_rank >= rm.nprocs[node]:
        raise PlacementMismatch(f"{where}: host {claim.host} runs {rm.nprocs[node]} ranks in the map, local ranks "
                                f"0..{rm.nprocs[node] - 1}")
    rank = int(rm.offsets[node]) + claim.local_rank
    if rank != claim.launcher_rank:
        want = rm.hosts[int(rm.rank_node[claim.launcher_rank])]
        raise PlacementMismatch(f"{where} sits where the map puts rank {rank}; the map puts rank "
                                f"{claim.launcher_rank} on host {want} local rank "
                                f"{rm.entry(claim.launcher_rank)['local_rank']} (hosts swapped, or a launcher that "
                                f"did not keep the plan's host order)")
    return rank
