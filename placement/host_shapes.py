"""Which hosts a job runs on, and how many ranks each runs: chosen by what fits the job.

The host grid (:mod:`rankmap.placement.host_grid`) needs hosts of one shape (GPU and NIC
count), each running the same number of ranks, so that every rail-aligned group stays on
one rail. A cluster may mix shapes (two 8-GPU and three 4-GPU hosts), and a job may be
smaller than a host or not a multiple of it (tp=4 dp=1, tp=2 dp=3 on 8-GPU hosts). For
each shape of the free hosts, :func:`fit_hosts` works out the ranks per host ``n``
(:func:`ranks_per_host`) and whether the shape has room for ``W / n`` hosts, then keeps
the shape that fits best: rail-aligned first; with dp "auto" then the most ranks; then the
fewest idle GPUs on the hosts it takes, the most hosts of that shape, the larger GPU
count and the smaller NIC count. None fits: the planner packs whole TP groups on hosts of
several sizes (:mod:`rankmap.placement.mixed_gpu_counts`) or says why nothing fits.
"""

from __future__ import annotations

import dataclasses

from rankmap.errors import PlacementError, SpecError
from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import JobSpec
from rankmap.job.traffic import job_traffic
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.host_grid import check_alignment
from rankmap.topology.hostnames import natural_key
from rankmap.topology.model import Cluster

__all__ = ["ranks_per_host", "fit_hosts"]


def _aligned(job: JobSpec, n: int) -> bool:
    """Whether ``n`` ranks per host keep TP in hosts and inter-host groups rail-aligned."""
    def error(message, key):
        return PlacementError(message, source=job.source, key=key)
    try:
        check_alignment(job, ParallelLayout.of(job), job_traffic(job), n, error)
    except PlacementError:
        return False
    return True


def ranks_per_host(job: JobSpec, gpus: int) -> int | None:
    """Ranks each host of ``gpus`` GPUs runs for ``job`` (dp resolved), or None if none work.

    A job whose world size ``W`` is a multiple of ``gpus`` fills its hosts (alignment is
    checked, and explained, when the problem is built). Otherwise each host runs the
    largest ``n <= gpus`` that divides ``W``, holds whole TP groups and keeps every
    inter-host group rail-aligned: ``W`` itself when the job is smaller than a host.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> job = lambda tp, dp: JobSpec(tp=tp, dp=dp, num_micro_batches=2)
    >>> [ranks_per_host(job(tp, dp), 8) for tp, dp in ((4, 1), (2, 3), (4, 3), (8, 2))]
    [4, 6, 4, 8]
    """
    w = job.world_size
    if w % gpus == 0:
        return gpus
    for n in range(min(gpus, w), job.tp - 1, -1):
        if w % n == 0 and n % job.tp == 0 and _aligned(job, n):
            return n
    return None


def _fixed_fit(job: JobSpec, gpus: int, hosts: int) -> tuple[JobSpec, int] | None:
    n = ranks_per_host(job, gpus)
    return (job, n) if n is not None and job.world_size // n <= hosts else None


def _auto_fit(job: JobSpec, gpus: int, hosts: int) -> tuple[JobSpec, int] | None:
    """dp "auto": the largest dp whose ranks fit ``hosts`` hosts of ``gpus`` GPUs."""
    free_gpus = hosts * gpus
    while free_gpus > 0:
        try:
            resolved = job.resolved(free_gpus)
        except SpecError:
            return None
        fit = _fixed_fit(resolved, gpus, hosts)
        if fit is not None:
            return fit
        free_gpus = resolved.world_size - 1
    return None


def fit_hosts(cluster: Cluster, job: JobSpec, constraints: PlacementConstraints, pool):
    """The pool of one host shape that fits ``job`` best, with dp resolved; None if none fits.

    Parameters
    ----------
    cluster : Cluster
    job : JobSpec
        ``dp`` may be None ("auto").
    constraints : PlacementConstraints
        Quotas limit the hosts a shape offers.
    pool : HostPool
        The free hosts (:func:`rankmap.placement.problem.host_pool`).

    Returns
    -------
    (JobSpec, HostPool) or None
        The job with dp resolved, and the pool of the chosen shape with
        ``ranks_per_host`` set; None when no shape alone can hold the job.
    """
    best = None
    for gpus, nics in sorted({(h.gpus, h.nics) for h in pool.free}):
        if gpus < job.tp:
            continue
        usable = [h for h in pool.free if (h.gpus, h.nics) == (gpus, nics)]
        hosts = sum(constraints.caps(cluster, usable))
        fit = (_auto_fit if job.dp is None else _fixed_fit)(job, gpus, hosts)
        if fit is None:
            continue
        resolved, n = fit
        idle = resolved.world_size // n * (gpus - n)
        # A shape whose full hosts break rail alignment is kept last: building its problem
        # explains why (the only shape, or an order string that no shape aligns).
        aligned = n != gpus or _aligned(resolved, n)
        key = (not aligned, -resolved.world_size if job.dp is None else 0, idle, -len(usable), -gpus, nics)
        if best is None or key < best[0]:
            best = (key, resolved, gpus, nics, n, usable)
    if best is None:
        return None
    _, resolved, gpus, nics, n, usable = best
    odd = sorted((h for h in cluster.free_hosts() if (h.gpus, h.nics) != (gpus, nics)),
                 key=lambda h: natural_key(h.name))
    return resolved, dataclasses.replace(pool, usable=tuple(usable), gpus_per_host=gpus, nics=nics,
                                         odd=tuple(odd), ranks_per_host=n)
