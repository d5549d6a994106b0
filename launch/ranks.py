"""Which rank this process is: its host and local rank, checked against the rank map.

Launchers number ranks their own way: torchrun's c10d rendezvous ignores ``--node-rank`` and
orders agents by arrival; tools sort hostnames as strings. So every process states where it
runs -- its host (as the map names it) and its local rank -- and the launcher's rank, all
processes exchange these claims, and every process evaluates the same check on the same list:
either all go on, or all stop with the same message. No torch here.

Where a process runs:

- ``RANKMAP_HOST`` in the environment names the map's host (set by ``rankmap launch --local``,
  which emulates every host on 127.0.0.1, or by a user whose machine names differ from the map's);
- else ``SLURMD_NODENAME``, when it is a host of the map: the node name Slurm gave this task
  (srun sets it; torchrun's workers inherit it), which is the map's name for a plan made from
  ``SLURM_JOB_NODELIST``;
- otherwise the machine's own names (``socket.gethostname()`` and its FQDN) are matched against
  the map's hosts, and a map host given as an address matches if this machine can bind that
  (non-loopback) address. An exact match (names compare case-insensitively, RFC 4343) always
  wins; only when there is none does a short name (the first label) match. Container and task
  names such as ``mpi-worker.1.fabric.test`` and ``mpi-worker.2.fabric.test`` share their first
  label, so a short-name match alone would find both.

Launcher variables: torchrun's ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``GROUP_RANK``, Open MPI's
``OMPI_COMM_WORLD_RANK``/``..._LOCAL_RANK``/``..._SIZE``, Slurm's ``SLURM_PROCID``/``SLURM_LOCALID``/
``SLURM_NTASKS``, in that order of preference.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

from rankmap.errors import PlacementMismatch
from rankmap.job.rank_map import RankMap
from rankmap.names import is_ip_address

__all__ = ["LaunchEnv", "Claim", "find_host", "make_claim", "check_claims", "launcher_message"]

_VARS = (("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK"),
         ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_NODE_RANK"),
         ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NODEID"))


@dataclass(frozen=True, kw_only=True)
class LaunchEnv:
    """What the launcher told this process (ranks are the launcher's, not yet the map's)."""

    rank: int
    local_rank: int
    world_size: int
    node_rank: int | None
    launcher: str

    @classmethod
    def from_environ(cls, env: dict | None = None) -> "LaunchEnv":
        """Read the launcher's variables (see the module docstring).

        Raises
        ------
        PlacementMismatch
            No launcher variables, or ones that are not whole numbers.

        Examples
        --------
        >>> LaunchEnv.from_environ({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "GROUP_RANK": "1"})
        LaunchEnv(rank=5, local_rank=1, world_size=8, node_rank=1, launcher='torchrun')
        """
        env = os.environ if env is None else env
        for names, launcher in zip(_VARS, ("torchrun", "mpirun", "srun")):
            if all(n in env for n in names[:3]):
                try:
                    vals = [int(env[n]) if env.get(n, "") != "" else None for n in names]
                except ValueError:
                    raise PlacementMismatch(f"launcher variables {', '.join(names[:3])} must be whole numbers, got "
                                            f"{', '.join(repr(env.get(n)) for n in names[:3])}") from None
                return cls(rank=vals[0], local_rank=vals[1], world_size=vals[2], node_rank=vals[3], launcher=launcher)
        raise PlacementMismatch("no launcher variables (RANK/LOCAL_RANK/WORLD_SIZE): start the engine with the "
                                "lines of `rankmap launch` (torchrun, srun or mpirun)")


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One process's statement of where it runs, exchanged between all processes.

    ``host`` is the map's host this process found itself on (None: none matched; ``machine``
    says what it is called).
    """

    launcher_rank: int
    local_rank: int
    host: str | None
    machine: str
    pid: int


def _owns_address(addr: str) -> bool:
    """Whether this machine has ``addr`` on an interface (bind succeeds only for local addresses)."""
    ip = ipaddress.ip_address(addr)
    if ip.is_loopback:
        return False  # every Linux machine owns 127.0.0.0/8: it identifies none of them
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((addr, 0))
            return True
        except OSError:
            return False


def machine_names() -> set[str]:
    """This machine's own names: hostname and FQDN (short forms are matched by :func:`find_host`)."""
    return {socket.gethostname(), socket.getfqdn()}


def _short(name: str) -> str:
    return name if is_ip_address(name) else name.split(".")[0].lower()


def find_host(hosts: tuple, env: dict | None = None, names: set[str] | None = None) -> str | None:
    """The map host this process runs on, or None if none matches (see the module docstring).

    ``names`` are this machine's names (default :func:`machine_names`). Exact matches win
    over short-name matches.

    Raises
    ------
    PlacementMismatch
        This machine matches more than one host of the map equally well.

    Examples
    --------
    >>> hosts = ("mpi-worker.1.fabric.test", "mpi-worker.2.fabric.test")
    >>> find_host(hosts, {}, {"mpi-worker.2.fabric.test"}), find_host(("gpu7.cluster",), {}, {"GPU7"})
    ('mpi-worker.2.fabric.test', 'gpu7.cluster')
    """
    env = os.environ if env is None else env
    named = env.get("RANKMAP_HOST")
    if named:
        return named if named in hosts else None
    if env.get("SLURMD_NODENAME") in hosts:
        return env["SLURMD_NODENAME"]
    names = machine_names() if names is None else set(names)
    exact = {n.lower() for n in names}
    found = [h for h in hosts if h.lower() in exact or (is_ip_address(h) and _owns_address(h))]
    if not found:  # no exact name: short names (first labels), both ways
        short = {_short(n) for n in names}
        found = [h for h in hosts if not is_ip_address(h) and _short(h) in short]
    if len(found) > 1:
        raise PlacementMismatch(f"this machine ({', '.join(sorted(names))}) matches hosts {', '.join(found)} of the "
                                f"rank map equally well (by short name); set RANKMAP_HOST to the one it is")
    return found[0] if found else None


def make_claim(hosts: tuple, launch: LaunchEnv, env: dict | None = None) -> Claim:
    """This process's claim (host found by :func:`find_host`)."""
    env = os.environ if env is None else env
    return Claim(launcher_rank=launch.rank, local_rank=launch.local_rank, host=find_host(hosts, env),
                 machine=env.get("RANKMAP_HOST") or env.get("SLURMD_NODENAME") or socket.gethostname(), pid=os.getpid())


def check_claims(rm: RankMap, claims: list) -> list[int]:
    """The map rank of every process, indexed by launcher rank; raise if they do not fit.

    Parameters
    ----------
    rm : RankMap
    claims : list of Claim
        ``claims[launcher_rank]``, as gathered from all processes.

    Returns
    -------
    list of int
        ``map_rank[launcher_rank]``: the rank the map gives each process's (host, local rank).

    Raises
    ------
    PlacementMismatch
        A process on a machine the map does not name, a local rank past the host's ranks, or
        a (host, local rank) claimed twice or by nobody -- the first such problem, in words.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> rm = RankMap(job=JobSpec(tp=2, dp=2, num_micro_batches=1), cluster_name="c", cluster_hash="x",
    ...              hosts=("b", "a"), tor_groups=("t", "t"), rails=((0, 1), (0, 1)), nproc_per_node=2)
    >>> c = lambda r, h, l: Claim(launcher_rank=r, local_rank=l, host=h, machine=h, pid=0)
    >>> check_claims(rm, [c(0, "a", 0), c(1, "a", 1), c(2, "b", 0), c(3, "b", 1)])
    [2, 3, 0, 1]
    """
    world = rm.world_size
    if len(claims) != world:
        raise PlacementMismatch(f"the launcher started {len(claims)} processes; the rank map has {world} ranks")
    node_of = {h: n for n, h in enumerate(rm.hosts)}
    owner: dict[int, Claim] = {}
    out = []
    for claim in claims:
        where = f"launcher rank {claim.launcher_rank} (machine {claim.machine}, local rank {claim.local_rank})"
        if claim.host is None:
            raise PlacementMismatch(f"{where} runs on no host of the rank map ({', '.join(rm.hosts[:4])}"
                                    f"{', ...' if len(rm.hosts) > 4 else ''}); set RANKMAP_HOST if its name differs")
        node = node_of[claim.host]
        if claim.local_rank >= rm.nprocs[node]:
            raise PlacementMismatch(f"{where}: host {claim.host} runs {rm.nprocs[node]} ranks in the map, "
                                    f"local ranks 0..{rm.nprocs[node] - 1}")
        rank = int(rm.offsets[node]) + claim.local_rank
        if rank in owner:
            raise PlacementMismatch(f"{where} and launcher rank {owner[rank].launcher_rank} both claim host "
                                    f"{claim.host} local rank {claim.local_rank} (map rank {rank}): two launcher "
                                    f"agents were started for one host")
        owner[rank] = claim
        out.append(rank)
    return out


def launcher_message(rm: RankMap, claims: list, map_rank: list[int]) -> str | None:
    """None when the launcher numbered every process as the map does; else one line saying how not."""
    moved = [(c, r) for c, r in zip(claims, map_rank) if c.launcher_rank != r]
    if not moved:
        return None
    c, r = moved[0]
    return (f"the launcher's ranks differ from the rank map for {len(moved)} of {len(claims)} processes: launcher "
            f"rank {c.launcher_rank} runs on host {c.host} local rank {c.local_rank}, which the map makes rank {r} "
            f"(the map puts rank {c.launcher_rank} on host {rm.hosts[int(rm.rank_node[c.launcher_rank])]}). The "
            f"launcher did not keep the "
            f"plan's host order (torchrun's c10d rendezvous ignores --node-rank): launch with the static-rendezvous "
            f"lines of `rankmap launch`, or set parallel.launcher_order: rerank to take ranks from the map")
