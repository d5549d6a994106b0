"""The process group and DeviceMesh of a run, built from the rank map and checked against it.

Start-up, on every process:

1. join the launcher's process group (``init_process_group`` with the launcher's rank); on the CPU
   every gloo group gets one worker thread (:mod:`rankmap.engine.gloo`: a torch 2.13 race);
2. exchange claims -- (host, local rank, launcher rank) -- and compute each process's map rank
   (:func:`rankmap.launch.ranks.check_claims`); every process sees the same list and so reaches the
   same verdict;
3. if the launcher numbered the processes unlike the map: stop (``launcher_order: error``), or
   re-join with the map's ranks (``rerank``) through a prefix of the same store;
4. build the mesh with ``init_device_mesh`` over the map's dimensions, slowest first, so mesh
   coordinates are the map's coordinates. A mesh over an explicitly permuted rank tensor is
   *not* used: ``new_group`` sorts the ranks it is given, so group ranks would follow global
   order while mesh coordinates follow the tensor (wrong TP gradients, pipeline deadlocks);
5. over each TP, PP and DP group, gather (rank, host, local rank) and compare with the map:
   members, their order (process-group rank = the map's coordinate), hosts and local ranks.

Sources: PyTorch docs, "Getting Started with DeviceMesh" and ``torch.distributed`` (``init_process_group``,
``PrefixStore``, ``all_gather_object``); torchtitan's ``ParallelDims`` (mesh from sizes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from rankmap.engine.gloo import use_one_worker_thread
from rankmap.errors import EngineError, PlacementMismatch
from rankmap.job.rank_map import RankMap
from rankmap.launch.ranks import Claim, LaunchEnv, check_claims, launcher_message, make_claim

__all__ = ["Startup", "pick_device", "join", "exchange_claims", "rerank", "build_mesh", "verify_peers",
           "mesh_dims"]


@dataclass(frozen=True, kw_only=True)
class Startup:
    """Outcome of the claim exchange, the same on every process.

    ``claims[launcher_rank]``, ``map_rank[launcher_rank]``; ``message`` says how the launcher's
    numbering differs from the map's (None: it does not).
    """

    claims: list
    map_rank: list
    message: str | None


def pick_device(local_rank: int) -> tuple[torch.device, str]:
    """GPU ``local_rank`` with NCCL when CUDA is available, else the CPU with gloo."""
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device()), "nccl"
    return torch.device("cpu"), "gloo"


def join(launch: LaunchEnv, rm: RankMap, backend: str, timeout_s: float) -> None:
    """Join the launcher's process group (its rank, its rendezvous variables)."""
    if launch.world_size != rm.world_size:
        raise PlacementMismatch(f"the launcher started {launch.world_size} processes (WORLD_SIZE); the rank map "
                                f"has {rm.world_size} ranks on {len(rm.hosts)} hosts")
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise PlacementMismatch("MASTER_ADDR and MASTER_PORT are not set: start the engine with the lines of "
                                "`rankmap launch`")
    if backend == "gloo":
        use_one_worker_thread()  # every gloo group from here on: torch 2.13's worker-thread race (engine.gloo)
    dist.init_process_group(backend, init_method="env://", rank=launch.rank, world_size=launch.world_size,
                            timeout=timedelta(seconds=timeout_s))


def exchange_claims(rm: RankMap, launch: LaunchEnv) -> Startup:
    """Gather every process's claim and resolve map ranks (collective over the default group)."""
    claims: list = [None] * dist.get_world_size()
    dist.all_gather_object(claims, make_claim(rm.hosts, launch))
    claims = [c if isinstance(c, Claim) else None for c in claims]
    map_rank = check_claims(rm, claims)
    return Startup(claims=claims, map_rank=map_rank, message=launcher_message(rm, claims, map_rank))


def rerank(new_rank: int, backend: str, timeout_s: float) -> None:
    """Leave the launcher's process group and re-join it as ``new_rank`` (the map's rank).

    The same rendezvous store is reused under a fresh prefix, so no new port is needed and the
    process that hosts the store keeps it alive.
    """
    store = dist.distributed_c10d._get_default_store()
    world = dist.get_world_size()
    dist.barrier()
    dist.destroy_process_group()
    dist.init_process_group(backend, store=dist.PrefixStore("rankmap-rerank/", store), rank=new_rank,
                            world_size=world, timeout=timedelta(seconds=timeout_s))
    os.environ["RANK"] = str(new_rank)


def mesh_dims(rm: RankMap) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Mesh dimension names and sizes, slowest-varying first (the map's order string reversed).

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> rm = RankMap(job=JobSpec(tp=2, pp=2, dp=2, num_micro_batches=2), cluster_name="c", cluster_hash="x",
    ...              hosts=("a", "b"), tor_groups=("t", "t"), rails=((0,) * 4, (0,) * 4), nproc_per_node=4)
    >>> mesh_dims(rm)
    (('pp', 'dp', 'ep', 'cp', 'tp'), (2, 2, 1, 1, 2))
    """
    digits = list(reversed(rm.layout.digits))
    return tuple(d for d, _ in digits), tuple(s for _, s in digits)


def build_mesh(rm: RankMap, device_type: str) -> DeviceMesh:
    """The DeviceMesh whose coordinates are the map's (natural order: ranks already follow the map)."""
    names, shape = mesh_dims(rm)
    if rm.job.cp > 1 or rm.job.ep > 1:
        raise EngineError(f"the engine's model has no context or expert parallelism (cp={rm.job.cp}, "
                          f"ep={rm.job.ep}); plan the job with cp=1 and ep=1 to train it here")
    return init_device_mesh(device_type, shape, mesh_dim_names=names)


def verify_peers(rm: RankMap, mesh: DeviceMesh, host: str, local_rank: int) -> None:
    """Check every TP, PP and DP group against the map; raise on every process if any differs.

    Raises
    ------
    PlacementMismatch
        With the first problem found on any process (members, order, host or local rank).
    """
    rank = dist.get_rank()
    coords = rm.layout.coords(rank)
    problems = []
    for kind in ("tp", "pp", "dp"):
        group = mesh[kind].get_group()
        recs: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(recs, (rank, host, local_rank), group=group)
        want = rm.layout.group_of(kind, rank).tolist()
        got = [r for r, _, _ in recs]
        if got != want:
            problems.append(f"rank {rank}: its {kind.upper()} group is {got} in group-rank order; the map says {want}")
        elif dist.get_rank(group) != coords[kind]:
            problems.append(f"rank {rank}: {kind.upper()} group rank {dist.get_rank(group)}, the map's {kind} "
                            f"coordinate is {coords[kind]}")
        for r, h, lr in recs:
            entry = rm.entry(r)
            if (h, lr) != (entry["host"], entry["local_rank"]):
                problems.append(f"rank {rank}: {kind.upper()} peer rank {r} runs on host {h} local rank {lr}; the "
                                f"map puts it on host {entry['host']} local rank {entry['local_rank']}")
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, problems)
    found = [p for ps in everyone for p in ps]
    if found:
        raise PlacementMismatch(f"{found[0]} ({len(found)} problems in all)")
