"""``rankmap simulate``: what a placement costs on the network, before GPU hours are spent.

    rankmap simulate                                   # plan the embedded default, simulate the plan
    rankmap simulate --compare                         # the plan against the three baselines
    rankmap simulate --cluster C --job J --rankmap DIR/rankmap.json [--seeds N] [--out DIR]

``--job`` takes a job spec YAML or a SimAI/AICB workload text file (traffic only: it needs
``--rankmap`` for the layout). Writes ``simulation.json`` and ``simulation.png`` to
``--out`` (default ``rankmap-out``), both or neither. Wire into the main parser with
:func:`add_simulate_parser` and dispatch to :func:`run_simulate`; running this module
directly (``python -m rankmap.simulate_cli ...``) does the same on its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from topology.errors import RankmapError, SpecError

from .argtypes import fraction, non_negative_float, non_negative_int, positive_int

__all__ = ["add_simulate_parser", "run_simulate"]


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", type=Path, help="cluster spec YAML (default: the embedded example's)")
    p.add_argument("--job", type=Path, help="job spec YAML, or a SimAI/AICB workload .txt (needs --rankmap)")
    p.add_argument("--rankmap", type=Path, help="rankmap.json to simulate (default: plan the job first)")
    p.add_argument("--example", default=None, help="embedded example for missing inputs (megascale-12k, racks)")
    p.add_argument("--compare", action="store_true", help="simulate the plan and the three baselines side by side")
    p.add_argument("--seeds", type=positive_int, default=4, help="ECMP hash seeds to simulate (default 4)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="first seed; also seeds planning (default 0)")
    p.add_argument("--routing", choices=("ecmp", "spray"), default="ecmp",
                   help="ecmp (hash per flow, default) or spray (ideal packet spraying)")
    p.add_argument("--qps", type=positive_int, default=1, help="queue pairs per connection (default 1)")
    p.add_argument("--same-hash", action="store_true", help="same hash salt on every switch (hash polarization)")
    p.add_argument("--alpha-us", type=non_negative_float, default=5.0, help="latency per algorithm step, us (default 5)")
    p.add_argument("--efficiency", type=fraction, default=1.0, help="fraction of line rate reached (default 1)")
    p.add_argument("--algorithm", choices=("ring", "tree"), default="ring", help="all-reduce algorithm (default ring)")
    p.add_argument("--time-limit", type=float, default=20.0, help="planner budget, deterministic seconds (default 20)")
    p.add_argument("--out", type=Path, default=Path("rankmap-out"), help="output folder (default rankmap-out)")


def add_simulate_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``simulate`` command to ``rankmap``'s subparsers; returns its parser."""
    p = subparsers.add_parser("simulate", help="simulate a placement's collective traffic (flow level, ECMP)",
                              description="Simulate one training iteration of a placed job: collectives as "
                                          "flows over NICs, rail ToRs and spine with ECMP hashing and max-min "
                                          "fair rates. With no inputs, plans and simulates the embedded default.")
    _add_options(p)
    return p


def _inputs(args):
    """Cluster, job, traffic ops, traffic source name, the given rank map (or None)."""
    from placement.job import load_job
    from placement.rankmap import read_rankmap
    from simulator.iteration import job_comm_ops
    from simulator.workload import looks_like_aicb, read_aicb_workload
    from topology.spec import load_cluster

    from .cli import DEFAULT_EXAMPLE, example_path

    example = args.example or DEFAULT_EXAMPLE
    if args.example is not None and not example_path(example, "cluster.yaml").is_file():
        raise RankmapError(f"--example: no embedded example {example!r} (try megascale-12k, racks)")
    cluster = load_cluster(args.cluster or example_path(example, "cluster.yaml"))
    job_path = args.job
    workload = None
    if job_path is not None and _is_workload(job_path, looks_like_aicb):
        workload = read_aicb_workload(job_path)
        if args.rankmap is None:
            raise SpecError("a SimAI/AICB workload describes traffic, not a layout: give --rankmap too "
                            "(plan the job from a job YAML first)", source=str(job_path))
    given = None
    if args.rankmap is not None:
        given = read_rankmap(args.rankmap)
        given.verify_cluster(cluster, str(args.rankmap))
        job = given.job
        if workload is not None:
            workload.check_job(job)
            return cluster, job, workload.ops, str(job_path), given
        if job_path is not None:
            job = _matching_job(load_job(job_path), given.job, str(job_path))
        return cluster, job, job_comm_ops(job), str(job_path or args.rankmap), given
    job = load_job(job_path or example_path(example, "job.yaml"))
    return cluster, job, None, str(job_path or f"example {example}"), None


def _is_workload(path: Path, looks_like_aicb) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return looks_like_aicb(handle.read(4096))
    except (OSError, UnicodeDecodeError):
        return False  # load_job reports the problem with the file's name


def _matching_job(job, planned, source: str):
    """``job`` with dp (and an ``auto`` order) from the rank map, after checking it has the map's layout."""
    job = dataclasses.replace(job, dp=job.dp or planned.dp, order=planned.order if job.order == "auto" else job.order)
    for key in ("tp", "pp", "dp", "cp", "ep", "order"):
        if getattr(job, key) != getattr(planned, key):
            raise SpecError(f"{key} is {getattr(job, key)!r} but the rank map's job has {getattr(planned, key)!r}",
                            source=source, key=f"parallel.{key}")
    return job.resolved(planned.world_size)


def _candidates(args, cluster, job, given):
    """``[(name, RankMap)]`` to simulate, and the job (dp resolved)."""
    from placement.plan import plan
    from placement.rankmap import RankMap

    rows = []
    if given is not None:
        rows.append((f"given {args.rankmap.name}", given))
        if not args.compare:
            return rows, given.job
    result = plan(cluster, job, time_limit_s=args.time_limit, seed=args.seed)
    rows.append(("rankmap plan", result.rankmap))
    if args.compare:
        rows += [(c.name, _baseline_map(result, cluster, c, RankMap)) for c in result.baselines]
    return rows, result.job


def _baseline_map(result, cluster, cand, RankMap):
    """The rank map launching a baseline's host order gives: every host full, or on hosts of
    different GPU counts whole TP groups per host, the last host what is left (the planner's rule)."""
    gpn = result.rankmap.nproc_per_node
    if result.rankmap.uniform:
        return RankMap.from_hosts(result.job, cluster, list(cand.hosts), gpn)
    tp, left, counts = result.job.tp, result.job.world_size, []
    for name in cand.hosts:
        counts.append(min(cluster.host(name).gpus // tp * tp, left))
        left -= counts[-1]
    return RankMap.from_hosts(result.job, cluster, list(cand.hosts), max(counts), nprocs=counts)


def run_simulate(args) -> int:
    """Run ``rankmap simulate``; raises :class:`RankmapError` on bad input (the caller prints it)."""
    from simulator.collectives import CollectiveConfig
    from simulator.ecmp import EcmpConfig
    from simulator.flows import RankPlacement
    from simulator.iteration import job_comm_ops
    from simulator.network import Network
    from simulator.plot import render_png
    from simulator.report import document_json, placement_summary, simulation_document
    from topology.fileio import atomic_write_files
    from simulator.stats import sweep_iteration

    t0 = time.perf_counter()
    cluster, job, ops, source, given = _inputs(args)
    rows, job = _candidates(args, cluster, job, given)
    ops = ops if ops is not None else job_comm_ops(job)
    config = CollectiveConfig(alpha_s=args.alpha_us * 1e-6, efficiency=args.efficiency, algorithm=args.algorithm)
    routing = EcmpConfig(mode="ecmp", per_switch_salt=not args.same_hash, qps_per_connection=args.qps)
    seeds = range(args.seed, args.seed + args.seeds)
    if args.routing == "spray":
        seeds = range(args.seed, args.seed + 1)   # no hashing: every seed gives the same run
        routing = dataclasses.replace(routing, mode="spray")
    network = Network(cluster)
    summaries, sweeps = [], []
    for name, rm in rows:
        placement = RankPlacement.from_rankmap(rm, network)
        sweep = sweep_iteration(network, placement, rm.layout, ops, seeds, config, routing)
        sweeps.append((name, sweep))
        summaries.append(placement_summary(network, name, placement, sweep))
    doc = simulation_document(network, job, source, ops, config, routing, summaries)
    title = f"{job.name} on {cluster.name}: {job.world_size} ranks, {len(seeds)} ECMP seed(s)"
    png = render_png(network, [(name, s.first) for name, s in sweeps], title)
    written = atomic_write_files(args.out, {"simulation.json": document_json(doc).encode(), "simulation.png": png})
    _print(cluster, job, doc, written, time.perf_counter() - t0, len(seeds))
    return 0


def _print(cluster, job, doc: dict, written, elapsed_s: float, n_seeds: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from placement.metrics import human_bytes

    console = Console(width=170)
    console.print(f"[bold]cluster[/] {cluster.name}: {len(cluster.hosts)} hosts in {len(cluster.tor_groups)} ToR "
                  f"groups; [bold]job[/] {job.name}: tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep}, "
                  f"{job.world_size} ranks; traffic from {doc['traffic']['source']}")
    phases = [p["name"] for p in doc["placements"][0]["phases"]]
    table = Table(title=f"communication time of one iteration ({n_seeds} ECMP seed(s), mean; phases in sequence)",
                  title_justify="left")
    for col in ["placement", "comm time", "seed range", "vs spraying"] + phases + ["slowest group", "ECMP loss*",
                                                                                   "max uplink"]:
        table.add_column(col, justify="left" if col in ("placement", "slowest group") else "right",
                         no_wrap=col in ("placement", "slowest group", "seed range"))
    for p in doc["placements"]:
        t = p["comm_time_s"]
        slow = p["slowest_group"]
        worst = max(p["phases"], key=lambda q: q["time_s"]["mean"]) if p["phases"] else None
        table.add_row(p["name"], f"{t['mean']:.4f} s", f"{t['min']:.4f}-{t['max']:.4f}",
                      f"{p['slowdown_vs_ideal']:.2f}x",
                      *[f"{q['time_s']['mean']:.4f} s" for q in p["phases"]],
                      (f"{slow['collective']} #{slow['group']}, {len(slow['tor_groups'])} ToR grp, "
                       f"{slow['time_s']:.3f} s" if slow else "-"),
                      f"{100 * worst['ecmp']['bandwidth_lost']['mean']:.1f}%" if worst else "-",
                      human_bytes(p["max_uplink_bytes"]))
    console.print(table)
    console.print("* bandwidth lost to hash collisions in the longest phase, over the flows that cross the spine "
                  "(1 - ECMP rates / sprayed rates)")
    first = doc["placements"][0]["comm_time_s"]["mean"]
    for p in doc["placements"][1:]:
        ratio = p["comm_time_s"]["mean"] / first if first > 0 else float("inf")
        console.print(f"{p['name']}: {ratio:.2f}x the communication time of {doc['placements'][0]['name']}")
    console.print("wrote " + ", ".join(str(w) for w in written) + f" in {elapsed_s:.1f} s")
