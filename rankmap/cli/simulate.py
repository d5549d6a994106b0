"""``rankmap simulate``: what a placement costs on the network, before GPU hours are spent.

    rankmap simulate                                   # plan the embedded default, simulate the plan
    rankmap simulate --compare                         # the plan against the three baselines
    rankmap simulate --cluster C --job J --rankmap DIR/rankmap.json [--seeds N] [--out DIR]

``--job`` takes a job spec YAML or a SimAI/AICB workload text file (traffic only: it needs
``--rankmap`` for the layout). Writes ``simulation.json`` and ``simulation.png`` to
``--out`` (default ``rankmap-out``), both or neither. The work is :func:`rankmap.api.simulate`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rankmap.cli.common import (
    add_example_args,
    add_json_arg,
    example_inputs,
    fraction,
    int_in,
    non_negative_float,
    out_folder,
    path_arg,
    positive_float,
    report_before_commit,
    seed_int,
)
from rankmap.errors import EXIT_OK, SpecError
from rankmap.job.spec import GPU_NAMES

__all__ = ["add_parser", "run_simulate"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``simulate`` command to ``rankmap``'s subparsers; returns its parser."""
    p = subparsers.add_parser("simulate", help="simulate a placement's collective traffic (flow level, ECMP)",
                              description="Simulate one training iteration of a placed job: collectives as "
                                          "flows over NICs, rail ToRs and spine with ECMP hashing and max-min "
                                          "fair rates. With no inputs, plans and simulates the embedded default.")
    add_example_args(p, cluster_help="cluster spec YAML (default: the embedded example's)",
                     job_help="job spec YAML, or a SimAI/AICB workload .txt (needs --rankmap)")
    p.add_argument("--rankmap", type=path_arg, help="rankmap.json to simulate (default: plan the job first)")
    p.add_argument("--compare", action="store_true", help="simulate the plan and the three baselines side by side")
    p.add_argument("--seeds", type=int_in(1, 4096, "a seed count"), default=4, help="ECMP hash seeds to simulate (default 4)")
    p.add_argument("--seed", type=seed_int, default=0, help="first seed; also seeds planning (default 0)")
    p.add_argument("--routing", choices=("ecmp", "spray"), default="ecmp",
                   help="ecmp (hash per flow, default) or spray (ideal packet spraying)")
    p.add_argument("--qps", type=int_in(1, 256, "a queue-pair count"), default=1, help="queue pairs per connection (default 1)")
    p.add_argument("--same-hash", action="store_true", help="same hash salt on every switch (hash polarization)")
    p.add_argument("--alpha-us", type=non_negative_float, default=5.0,
                   help="latency per algorithm step that crosses the network, us (default 5)")
    p.add_argument("--alpha-nvlink-us", type=non_negative_float, default=None,
                   help="latency per algorithm step that stays on NVLink, us (default: --alpha-us's value; NCCL's "
                        "tuning model, src/graph/tuning.cc hwLatencies, puts a Simple-protocol ring step at "
                        "3.4 us on NVLink and 14 us on the network)"),
    p.add_argument("--efficiency", type=fraction, default=1.0, help="fraction of every link's line rate the flows reach (default 1); the "
                        "per-connection cap below applies to what is left")
    p.add_argument("--algorithm", choices=("ring", "tree"), default="ring", help="all-reduce algorithm (default ring)")
    p.add_argument("--channels-per-nic", type=int_in(1, 64, "a channel count"), default=2,
                   help="NCCL channels per NIC of a ring or tree group across hosts (NCCL duplicates its "
                        "channels; NCCL_MIN_NCHANNELS; default 2); the channels of one connection share its rate cap")
    p.add_argument("--connection-rate-fraction", type=_fraction_or_none, default=0.8,
                   help="most one connection (a group's hop from a rank to its peer through one NIC, all its "
                        "channels and queue pairs together) moves, as a fraction of the NIC's rate after "
                        "--efficiency (default 0.8, an assumption: a ring alone reaches 0.8 of it and two rings "
                        "on one NIC run 1.6x slower, not 2x; a NIC carrying two or more connections, e.g. both "
                        "trees of a tree all-reduce or two GPUs' rings, can fill it; 1 or none: no cap, "
                        "line-rate busbw as nccl-tests shows on an idle fabric)")
    g = p.add_argument_group("iteration time (compute model; defaults from the job YAML's hardware/overlap)")
    g.add_argument("--gpu", choices=GPU_NAMES, help="GPU preset: peak dense BF16 from the vendor datasheet")
    g.add_argument("--efficiency-gemm", type=fraction, help="achieved fraction of peak in GEMM/attention (0.65)")
    g.add_argument("--efficiency-elementwise", type=fraction,
                   help="achieved fraction of HBM bandwidth in elementwise kernels (0.7)")
    g.add_argument("--recompute", action=argparse.BooleanOptionalAction, default=None,
                   help="full activation recomputation (default: the job's, off)")
    g.add_argument("--no-overlap", action="store_true",
                   help="run TP, CP, EP, ZeRO all-gather and gradient reduction exposed (every overlap off)")
    p.add_argument("--time-limit", type=positive_float, default=20.0, help="planner budget, deterministic seconds (default 20)")
    p.add_argument("--out", type=out_folder, default=Path("rankmap-out"), help="output folder (default rankmap-out)")
    add_json_arg(p)
    p.set_defaults(func=run_simulate)
    return p


def _fraction_or_none(text: str) -> float | None:
    """A number in (0, 1], or ``none`` (no cap)."""
    if text.strip().lower() == "none":
        return None
    try:
        return fraction(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1] or none, got {text!r}") from None


def _is_workload(path: Path) -> bool:
    from rankmap.fileio import read_text
    from rankmap.simulator.workload import looks_like_aicb
    try:
        return looks_like_aicb(read_text(path)[:4096])
    except SpecError:
        return False  # load_job reports the problem with the file's name


def _hardware_overrides(args: argparse.Namespace) -> dict:
    """``rankmap.job.spec.Hardware`` fields the command line sets."""
    out = {k: getattr(args, k) for k in ("gpu", "efficiency_gemm", "efficiency_elementwise", "recompute")
           if getattr(args, k) is not None}
    if args.no_overlap:
        out.update(overlap_tp=False, overlap_cp=False, overlap_ep=False, overlap_dp_gather=False, overlap_dp_reduce=False)
    return out


def run_simulate(args: argparse.Namespace) -> int:
    """Run ``rankmap simulate``; raises :class:`RankmapError` on bad input (the caller prints it)."""
    from rankmap import api
    from rankmap.cli.report import print_simulation
    from rankmap.examples import DEFAULT_EXAMPLE
    from rankmap.fileio import atomic_write_files
    from rankmap.simulator.workload import read_aicb_workload

    t0 = time.perf_counter()
    cluster_path, job_path = example_inputs(args, job_from="--rankmap" if args.rankmap is not None else None)
    cluster = api.load_cluster(cluster_path)
    workload = read_aicb_workload(args.job) if args.job is not None and _is_workload(args.job) else None
    if workload is not None and args.rankmap is None:
        raise SpecError("a SimAI/AICB workload describes traffic, not a layout: give --rankmap too "
                        "(plan the job from a job YAML first)", source=str(args.job))
    # checked as `rankmap verify --cluster` checks it: a map on hosts the spec marks failed is refused
    given = api.verify(args.rankmap, cluster, cluster_path) if args.rankmap is not None else None
    job = None
    if workload is None and (given is None or args.job is not None):
        job = api.load_job(job_path)
    source = str(args.job) if args.job is not None else (str(args.rankmap) if given is not None
                                                          else f"example {args.example or DEFAULT_EXAMPLE}")
    from rankmap.cli.report import progress
    with progress(f"simulating one iteration ({'every placement' if args.compare else 'one placement'}, "
                  f"{args.seeds} seed(s))"):
        run = api.simulate(cluster, job, rankmap=given, rankmap_name=f"given {args.rankmap.name}" if given else "",
                           workload=workload, traffic_source=source, compare=args.compare, seeds=args.seeds,
                           seed=args.seed, routing=args.routing, qps=args.qps, same_hash=args.same_hash,
                           alpha_us=args.alpha_us, alpha_nvlink_us=args.alpha_nvlink_us,
                           efficiency=args.efficiency, algorithm=args.algorithm,
                           time_limit_s=args.time_limit, hardware=_hardware_overrides(args),
                           channels_per_nic=args.channels_per_nic,
                           connection_rate_fraction=args.connection_rate_fraction)
    sim = run.simulation

    def report(written):
        if args.json:
            from rankmap.cli.report import print_json
            print_json({**sim.document, "outputs": [str(p) for p in written]})
        else:
            print_simulation(cluster, run.job, sim.document, written, time.perf_counter() - t0, len(sim.seeds))

    atomic_write_files(args.out, {"simulation.json": sim.json().encode(), "simulation.png": sim.png},
                       before_commit=report_before_commit(report))
    return EXIT_OK
