"""The ``rankmap`` command: the only place that reads argv.

Exit codes: 0 success; 2 usage error; 3 invalid input (bad spec, rank map or file);
4 infeasible (the job cannot be placed as asked); 70 internal error (a bug: rerun with
``--debug`` for the traceback).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from importlib import resources
from pathlib import Path

from topology.errors import RankmapError

from .argtypes import positive_float, positive_int, seed_int
from .diagnose_cli import add_diagnose_parser, run_diagnose
from .launch_cli import add_launch_parser, run_launch
from .simulate_cli import add_simulate_parser, run_simulate
from .topo_cli import add_topo_parser, run_topo

EXIT_OK, EXIT_USAGE, EXIT_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL = 0, 2, 3, 4, 70
DEFAULT_EXAMPLE = "megascale-12k"


def example_path(example: str, name: str) -> Path:
    """Path of an embedded example file (``rankmap.examples/<example>/<name>``)."""
    return Path(str(resources.files("rankmap.examples").joinpath(example, name)))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankmap", description="Plan rank placement for 3D-parallel LLM training.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plan", help="place a job on a cluster; write rankmap.json and hostfile",
                       description="Place a job on the free hosts of a cluster. With no arguments, plans the "
                                   "embedded default: GPT-3 175B on a MegaScale-shaped 12,288-GPU cluster.")
    p.add_argument("--cluster", type=Path, help="cluster spec YAML (default: embedded megascale-12k)")
    p.add_argument("--job", type=Path, help="job spec YAML (default: embedded gpt3-175b job)")
    p.add_argument("--example", default=None, help="use an embedded example's cluster and job (megascale-12k, racks)")
    p.add_argument("--out", type=Path, default=Path("rankmap-out"), help="output folder (default: rankmap-out)")
    for dim in ("tp", "pp", "cp", "ep"):
        p.add_argument(f"--{dim}", type=positive_int, help=f"{dim} size (overrides the job file)")
    p.add_argument("--dp", type=_dp, help="dp size or 'auto' (fill the free GPUs)")
    p.add_argument("--order", help="Megatron order string, fastest first (default tp-cp-ep-dp-pp)")
    p.add_argument("--model", help="model preset, e.g. gpt3-175b, gpt3-13b, llama2-70b")
    p.add_argument("--micro-batches", type=positive_int, help="micro-batches per iteration per pipeline")
    p.add_argument("--time-limit", type=positive_float, default=20.0,
                   help="solver budget, deterministic seconds (default 20)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed for the solver and the arrival-order baseline")
    p.add_argument("--workers", type=positive_int, default=1, help="CP-SAT workers (default 1; results stay deterministic)")
    p.add_argument("--objective", default="bytes,uplink,fragmentation",
                   help="objectives, most important first, from: bytes, spread, uplink, fragmentation, moved "
                        "(default bytes,uplink,fragmentation); NAME=WEIGHT terms are summed into one weighted "
                        "objective, e.g. bytes=1,uplink=4")
    _constraint_args(p)
    p.add_argument("--previous", type=Path, help="an earlier rankmap.json of this job: keep its hosts where possible")

    r = sub.add_parser("replan", help="replace failed hosts in a rank map, moving only their ranks")
    r.add_argument("--rankmap", type=Path, required=True, help="the current rankmap.json")
    r.add_argument("--cluster", type=Path, required=True, help="cluster spec YAML the map was made for")
    r.add_argument("--failed", default="", help="hostlist of hosts that failed (besides those the spec marks)")
    r.add_argument("--out", type=Path, default=Path("rankmap-out"), help="output folder (default: rankmap-out)")
    _constraint_args(r)

    add_topo_parser(sub)
    add_simulate_parser(sub)
    add_diagnose_parser(sub)
    add_launch_parser(sub)

    v = sub.add_parser("verify", help="check a rank map (and that it belongs to a cluster)")
    v.add_argument("rankmap", type=Path, help="rankmap.json")
    v.add_argument("--cluster", type=Path, help="cluster spec YAML the map must belong to")
    return parser


def _constraint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exclude", help="hostlist of hosts not to use")
    p.add_argument("--reserve", type=Path, action="append", default=[],
                   help="rankmap.json of a running job whose hosts are taken (repeatable)")
    p.add_argument("--constraints", type=Path, help="constraints YAML: exclude, reserve, quotas, pins")


def _constraints(args, cluster):
    """Constraints from --constraints, --exclude and --reserve, combined; reserved maps must
    belong to ``cluster``."""
    from placement.constraints import PlacementConstraints, load_constraints
    from placement.rankmap import read_rankmap
    from topology.hostnames import expand_hostlist

    base = load_constraints(args.constraints, cluster) if args.constraints else PlacementConstraints()
    exclude = tuple(expand_hostlist(args.exclude, key="--exclude")) if args.exclude else ()
    maps = [read_rankmap(path) for path in args.reserve]
    for rm in maps:
        rm.verify_cluster(cluster)
    reserve = tuple(h for rm in maps for h in rm.hosts)
    return PlacementConstraints(exclude=base.exclude + exclude, reserve=base.reserve + reserve, quotas=base.quotas,
                                stage_pins=base.stage_pins, rank_pins=base.rank_pins, source=base.source)


def _dp(text: str):
    return "auto" if text == "auto" else positive_int(text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv or ["plan"])
    if args.command is None:  # global options only (e.g. --debug): the default command
        args = _parser().parse_args(argv + ["plan"])
    command = args.command
    try:
        if command == "plan":
            return _plan(args)
        if command == "replan":
            return _replan(args)
        if command == "topo":
            return run_topo(args)
        if command == "simulate":
            return run_simulate(args)
        if command == "diagnose":
            return run_diagnose(args)
        if command == "launch":
            return run_launch(args)
        return _verify(args)
    except RankmapError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"rankmap: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_INPUT)
    except KeyboardInterrupt:
        print("rankmap: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not the user's mistake
        if args.debug:
            traceback.print_exc()
        print(f"rankmap: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", file=sys.stderr)
        return EXIT_INTERNAL


def _inputs(args) -> tuple[Path, Path]:
    example = args.example or DEFAULT_EXAMPLE
    if args.example is not None and not example_path(example, "cluster.yaml").is_file():
        raise RankmapError(f"--example: no embedded example {example!r} (try megascale-12k, racks)")
    cluster = args.cluster or example_path(example, "cluster.yaml")
    job = args.job or example_path(example, "job.yaml")
    return cluster, job


def _plan(args) -> int:
    from placement.job import load_job
    from placement.plan import plan
    from placement.rankmap import read_rankmap, write_plan_files
    from topology.spec import load_cluster

    from .report import print_plan

    cluster_path, job_path = _inputs(args)
    overrides = {k: getattr(args, k) for k in ("tp", "pp", "cp", "ep", "order", "model")
                 if getattr(args, k) is not None}
    if args.dp is not None:
        overrides["dp"] = None if args.dp == "auto" else args.dp
    if args.micro_batches is not None:
        overrides["num_micro_batches"] = args.micro_batches
    t0 = time.perf_counter()
    cluster = load_cluster(cluster_path)
    job = load_job(job_path, overrides)
    objectives = _objectives(args.objective)
    previous = read_rankmap(args.previous) if args.previous else None
    if previous is not None:
        previous.verify_cluster(cluster)
    result = plan(cluster, job, time_limit_s=args.time_limit, seed=args.seed, workers=args.workers,
                  constraints=_constraints(args, cluster), objectives=objectives, previous=previous)
    written = write_plan_files(result.rankmap, args.out)
    print_plan(cluster, result, written, time.perf_counter() - t0)
    return EXIT_OK


def _objectives(text: str) -> tuple:
    """``bytes,uplink`` (lexicographic) or ``bytes=1,uplink=0.5`` (weighted sum)."""
    out = []
    for item in (o.strip() for o in text.split(",") if o.strip()):
        name, _, weight = item.partition("=")
        if weight:
            try:
                out.append((name.strip(), float(weight)))
            except ValueError:
                raise RankmapError(f"--objective: bad weight {weight!r} for {name.strip()!r}") from None
        else:
            out.append(name)
    return tuple(out)


def _replan(args) -> int:
    from placement.rankmap import read_rankmap, write_plan_files
    from placement.replan import replan
    from topology.hostnames import expand_hostlist
    from topology.spec import load_cluster

    from .report import print_replan

    cluster = load_cluster(args.cluster)
    previous = read_rankmap(args.rankmap)
    failed = expand_hostlist(args.failed, key="--failed") if args.failed else []
    for host in failed:
        if not cluster.has_host(host):
            raise RankmapError(f"--failed: host {host!r} is not in cluster {cluster.name!r}")
    result = replan(cluster, previous, failed, _constraints(args, cluster))
    written = write_plan_files(result.rankmap, args.out)
    print_replan(result, written)
    return EXIT_OK


def _verify(args) -> int:
    from placement.rankmap import read_rankmap
    from topology.spec import load_cluster

    rm = read_rankmap(args.rankmap)
    if args.cluster:
        rm.verify_cluster(load_cluster(args.cluster), str(args.rankmap))
    where = f", cluster {rm.cluster_name!r}" + (" (verified)" if args.cluster else "")
    print(f"{args.rankmap}: valid rank map: {rm.world_size} ranks on {len(rm.hosts)} hosts{where}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
