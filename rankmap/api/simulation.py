"""The ``simulate`` command: one iteration of a placed job (and its baselines) over the fabric."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rankmap.errors import RankmapError, SpecError
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec
from rankmap.topology.model import Cluster

__all__ = ["SimulationRun", "simulate"]


@dataclass(frozen=True)
class SimulationRun:
    """What :func:`simulate` returns: the resolved job and the simulation (document and PNG)."""

    job: JobSpec
    simulation: object   # rankmap.simulator.simulate.Simulation

    @property
    def document(self) -> dict:
        return self.simulation.document


def simulate(cluster: Cluster, job: JobSpec | None = None, *, rankmap: RankMap | None = None,
             rankmap_name: str = "given rank map", workload=None, traffic_source: str = "job spec",
             compare: bool = False, seeds: int = 4, seed: int = 0, routing: str = "ecmp", qps: int = 1,
             same_hash: bool = False, alpha_us: float = 5.0, alpha_nvlink_us: float | None = None,
             efficiency: float = 1.0, algorithm: str = "ring", time_limit_s: float = 20.0,
             hardware: dict | None = None, channels_per_nic: int = 2,
             connection_rate_fraction: float | None = 0.8) -> SimulationRun:
    """Simulate one iteration of a placed job (planning it first when no rank map is given).

    Parameters
    ----------
    cluster : Cluster
    job : JobSpec, optional
        The job; with ``rankmap`` it must have the map's layout (``dp`` and an ``auto`` order are
        taken from the map). Needed when ``rankmap`` is None.
    rankmap : RankMap, optional
        The placement to simulate (must belong to ``cluster``).
    rankmap_name : str
        Its name in the report.
    workload : Workload, optional
        A SimAI/AICB workload whose operations replace the job's traffic (needs ``rankmap``).
    traffic_source : str
        Name of the traffic's origin, for the report.
    compare : bool
        Also plan the job and simulate the plan and the three baselines.
    seeds, seed : int
        Number of ECMP seeds and the first; ``seed`` also seeds planning.
    routing : {"ecmp", "spray"}
    qps : int
        Queue pairs per connection.
    same_hash : bool
        One hash salt on every switch (polarization).
    alpha_us, alpha_nvlink_us, efficiency, algorithm :
        Latency per algorithm step that crosses the network and per step that stays on
        NVLink (us; None: ``alpha_us``), fraction of line rate, ``"ring"`` or ``"tree"``.
    time_limit_s : float
        Planner budget (deterministic seconds).
    channels_per_nic, connection_rate_fraction :
        NCCL channels per NIC and the most one connection moves (all its channels and queue
        pairs), as a fraction of its NIC's line rate; None: no cap
        (:class:`rankmap.simulator.collectives.CollectiveConfig`).
    hardware : dict, optional
        Fields of :class:`rankmap.job.spec.Hardware` (``gpu``, ``efficiency_gemm``, ``recompute``,
        ``overlap_tp`` ...) that replace the job's for the iteration-time model.

    Returns
    -------
    SimulationRun

    Raises
    ------
    SpecError
        A workload without a rank map, a job that does not match the map, a map of another cluster.
    """
    from rankmap.simulator.collectives import CollectiveConfig
    from rankmap.simulator.ecmp import EcmpConfig
    from rankmap.simulator.simulate import simulate_placements

    ops = None
    rows = []
    if rankmap is not None:
        rankmap.verify_cluster(cluster)
        if workload is not None:
            workload.check_job(rankmap.job)
            ops = workload.ops
            job = rankmap.job
        else:
            job = rankmap.job if job is None else _matching_job(job, rankmap.job)
        rows.append((rankmap_name, rankmap))
    elif workload is not None:
        raise SpecError("a SimAI/AICB workload describes traffic, not a layout: give a rank map too "
                        "(plan the job from a job YAML first)", source=traffic_source)
    elif job is None:
        raise RankmapError("simulate needs a job or a rank map")
    if rankmap is None or compare:
        from rankmap.placement.plan import plan as _plan
        result = _plan(cluster, job, time_limit_s=time_limit_s, seed=seed)
        rows.append(("rankmap plan", result.rankmap))
        if compare:
            rows += [(c.name, result.candidate_rankmap(cluster, c)) for c in result.baselines]
        job = result.job if rankmap is None else job
    config = CollectiveConfig(alpha_s=alpha_us * 1e-6, efficiency=efficiency, algorithm=algorithm,
                              alpha_nvlink_s=None if alpha_nvlink_us is None else alpha_nvlink_us * 1e-6,
                              channels_per_nic=channels_per_nic, connection_rate_fraction=connection_rate_fraction)
    ecmp = EcmpConfig(mode=routing, per_switch_salt=not same_hash, qps_per_connection=qps)
    if hardware:
        job = dataclasses.replace(job, hardware=dataclasses.replace(job.hardware, **hardware))
    stages = None
    if workload is not None and workload.has_compute_times:
        from rankmap.simulator.timing import workload_stage_times
        stages = workload_stage_times(workload, job)
    sim = simulate_placements(cluster, job, rows, ops=ops, traffic_source=traffic_source,
                              seeds=range(seed, seed + seeds), config=config, routing=ecmp, stages=stages)
    return SimulationRun(job, sim)


def _matching_job(job: JobSpec, planned: JobSpec) -> JobSpec:
    """``job`` with dp (and an ``auto`` order) from the rank map, after checking it has the map's layout."""
    job = dataclasses.replace(job, dp=job.dp or planned.dp, order=planned.order if job.order == "auto" else job.order)
    for key in ("tp", "pp", "dp", "cp", "ep", "order"):
        if getattr(job, key) != getattr(planned, key):
            raise SpecError(f"{key} is {getattr(job, key)!r} but the rank map's job has {getattr(planned, key)!r}",
                            source=job.source, key=f"parallel.{key}")
    return job.resolved(planned.world_size)
