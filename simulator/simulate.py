"""One call from placed jobs to a simulation result: the library form of ``rankmap simulate``.

:func:`simulate_placements` replays one iteration of each named rank map over the same
network, traffic and routing, for every ECMP seed, and returns the JSON document and the
PNG figure that ``rankmap simulate`` writes. It reads and writes no files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rankmap.job.spec import JobSpec
from rankmap.simulator.collectives import CollectiveConfig
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import job_comm_ops
from rankmap.simulator.network import Network
from rankmap.simulator.plot import render_png
from rankmap.simulator.report import document_json, placement_summary, round_floats, simulation_document
from rankmap.simulator.staging import staged_comm_times
from rankmap.simulator.stats import IterationSweep, sweep_iteration
from rankmap.simulator.timing import comm_times, configs_of, iteration_timing, timing_summary
from rankmap.topology.model import Cluster

__all__ = ["Simulation", "simulate_placements"]


@dataclass(frozen=True)
class Simulation:
    """What :func:`simulate_placements` returns.

    Attributes
    ----------
    document : dict
        The ``simulation.json`` document (see :func:`rankmap.simulator.report.simulation_document`).
    png : bytes
        The ``simulation.png`` figure (:func:`rankmap.simulator.plot.render_png`): time per
        seed, group times over the seeds, and per placement an uplink heat map, a histogram
        of flows per cable against balls into bins, and an iteration timeline per stage.
    sweeps : tuple of (str, IterationSweep)
        Every placement's runs over the seeds, by name.
    seeds : tuple of int
        The ECMP hash seeds simulated (one when routing sprays packets).
    timelines : tuple of tuple of StageTimeline
        Per placement, its iteration's schedule under each seed (what the figure draws).
    """

    document: dict
    png: bytes
    sweeps: tuple
    seeds: tuple
    timelines: tuple = ()

    def json(self) -> str:
        """The document as ``simulation.json`` holds it (sorted keys, rounded floats)."""
        return document_json(self.document)


def simulate_placements(cluster: Cluster, job: JobSpec, placements: list, *, ops: tuple | None = None,
                        traffic_source: str = "job spec", seeds: range = range(0, 4),
                        config: CollectiveConfig | None = None, routing: EcmpConfig | None = None,
                        stages=None) -> Simulation:
    """Simulate one training iteration of each placement of ``job`` on ``cluster``.

    Parameters
    ----------
    cluster : Cluster
    job : JobSpec
        Resolved (``dp`` set); every rank map must be of this job's layout.
    placements : list of (str, RankMap)
        Named rank maps, the reference first (ratios in the report are against it).
    ops : tuple of CommOp, optional
        The iteration's communication (default :func:`~rankmap.simulator.iteration.job_comm_ops`
        of ``job``; a SimAI/AICB workload's ``ops`` otherwise).
    traffic_source : str
        Where the traffic came from, for the report.
    seeds : range
        ECMP hash seeds; with ``routing.mode == "spray"`` only the first is run (no hashing).
    config : CollectiveConfig, optional
        Latency per step, efficiency and all-reduce algorithm (default: 5 us, 1.0, ring).
    routing : EcmpConfig, optional
        ECMP per flow, salted per switch, one queue pair (default), or packet spraying.
    stages : StageTimes, optional
        Measured compute per stage (a workload's); default: from FLOPs and ``job.hardware``.

    Each placement's entry gets ``"iteration"``: predicted iteration time, MFU, tokens/s,
    bubble and exposed communication (:func:`rankmap.simulator.timing.timing_summary`), each
    stage's gradient reduction simulated from when its backward ends
    (:func:`rankmap.simulator.staging.staged_comm_times`), and the document a ``"compute"``
    entry with the settings used.

    Returns
    -------
    Simulation

    Raises
    ------
    RankmapError
        A rank map does not fit the cluster's network.
    """
    config = config or CollectiveConfig()
    routing = routing or EcmpConfig()
    ops = ops if ops is not None else job_comm_ops(job)
    if routing.mode == "spray":
        seeds = range(seeds.start, seeds.start + 1)   # no hashing: every seed gives the same run
    network = Network(cluster)
    summaries, sweeps, timelines = [], [], []
    compute, overlap = configs_of(job)
    for name, rm in placements:
        placement = RankPlacement.from_rankmap(rm, network)
        sweep: IterationSweep = sweep_iteration(network, placement, rm.layout, ops, seeds, config, routing)
        sweeps.append((name, sweep))
        comms = [staged_comm_times(network, placement, rm.layout, ops, job, comm_times(run, job), config,
                                   dataclasses.replace(routing, seed=seed), stages)
                 for seed, run in zip(sweep.seeds, sweep.runs)]
        summary = placement_summary(network, name, placement, sweep,
                                    staged_reduce_s=[c.dp_reduce_stage_s for c in comms])
        summary["iteration"] = timing_summary(job, sweep.runs, stages, comms)
        summaries.append(summary)
        timelines.append(tuple(iteration_timing(job, c, compute, overlap, stages).schedule.timeline for c in comms))
    doc = simulation_document(network, job, traffic_source, ops, config, routing, summaries)
    doc["compute"] = round_floats(_compute_entry(job))
    spray = routing.mode == "spray"
    routed = "packet spraying" if spray else f"ECMP, {len(seeds)} seed{'s' if len(seeds) > 1 else ''}"
    title = f"{job.name} on {cluster.name}: {job.world_size} ranks, {routed}"
    png = render_png(network, list(sweeps), title, timelines, spray=spray,
                     iterations=[p["iteration"] for p in doc["placements"]])
    return Simulation(doc, png, tuple(sweeps), tuple(seeds), tuple(timelines))



def _compute_entry(job: JobSpec) -> dict:
    """The document's ``"compute"``: GPU, peak, efficiencies, recomputation and overlaps used."""
    compute, overlap = configs_of(job)
    return {"gpu": compute.spec.name, "peak_tflops": compute.spec.peak_tflops, "hbm_tbps": compute.spec.hbm_tbps,
            "efficiency_gemm": compute.efficiency_gemm, "efficiency_elementwise": compute.efficiency_elementwise,
            "recompute": compute.recompute,
            "optimizer_step_s": "auto" if compute.optimizer_step_s is None else compute.optimizer_step_s,
            "data_loading_s": compute.data_loading_s,
            "overlap": {"tp": overlap.tp, "cp": overlap.cp, "ep": overlap.ep, "dp_gather": overlap.dp_gather,
                        "dp_reduce": overlap.dp_reduce},
            "schedule": ("interleaved 1F1B" if job.virtual_stages > 1 else "1F1B")
            + (", Megatron-Core bucketing and dispatch" if overlap.megatron_core else "")}
