"""``rankmap plan``, ``rankmap replan`` and ``rankmap verify``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rankmap.cli.common import (
    add_constraint_args,
    add_example_args,
    add_json_arg,
    constraints_from_args,
    dp_size,
    example_inputs,
    hostlist_arg,
    objective_names,
    objectives,
    out_folder,
    out_png,
    path_arg,
    positive_float,
    positive_int,
    report_before_commit,
    seed_int,
    tier_weights_arg,
)
from rankmap.errors import EXIT_OK, UsageError

__all__ = ["add_parsers", "add_verify_parser", "add_show_parser", "run_plan", "run_replan", "run_verify", "run_show",
           "write_map"]


def add_parsers(sub) -> None:
    """Add ``plan`` and ``replan`` to the subparsers."""
    p = sub.add_parser("plan", help="place a job on a cluster; write rankmap.json and hostfile",
                       description="Place a job on the free hosts of a cluster. With no arguments, plans the "
                                   "embedded default: GPT-3 175B on a MegaScale-shaped 12,288-GPU cluster.")
    add_example_args(p, cluster_help="cluster spec YAML (default: embedded megascale-3tier)",
                     job_help="job spec YAML (default: embedded gpt3-175b job)")
    p.add_argument("--out", type=out_folder, default=Path("rankmap-out"), help="output folder (default: rankmap-out)")
    for dim in ("tp", "pp", "cp", "ep"):
        p.add_argument(f"--{dim}", type=positive_int, help=f"{dim} size (overrides the job file)")
    p.add_argument("--dp", type=dp_size, help="dp size or 'auto' (fill the free GPUs) (overrides the job file)")
    p.add_argument("--order", help="Megatron order string, fastest first (default tp-cp-ep-dp-pp)")
    p.add_argument("--model", help="model preset, e.g. gpt3-175b, gpt3-13b, llama2-70b")
    p.add_argument("--micro-batches", type=positive_int, help="micro-batches per iteration per pipeline")
    p.add_argument("--time-limit", type=positive_float, default=20.0,
                   help="budget of the exact solvers (CP-SAT models and relaxation bound), deterministic "
                        "seconds (default 20); the constructive layouts and local searches before them are "
                        "not cut by it (their work grows with the cluster, their result never with time)")
    p.add_argument("--max-wall", type=positive_float,
                   help="wall-clock cap, in seconds from the start of planning, on the exact CP-SAT solves only "
                        "(default: no cap): once it has passed, every CP-SAT solve stops at once with its best "
                        "solution so far. The constructive layouts, local searches and bounds always run to the "
                        "end (most of the time on large clusters: ~20 s for the default plan), so the command can "
                        "take longer than the cap. --time-limit is deterministic (plans identical from run to "
                        "run); when this cap binds, the plan depends on the machine's speed and load")
    p.add_argument("--seed", type=seed_int, default=0, help="seed for the solver and the arrival-order baseline")
    p.add_argument("--workers", type=positive_int, default=1, help="CP-SAT workers (default 1; results stay deterministic)")
    p.add_argument("--objective", type=objectives, default="tiers,uplink,fragmentation",
                   help="objectives, most important first, from: tiers (bytes crossing each tier times its "
                        "weight), top-first (bytes per tier, top tier first), bytes (cross-ToR only), spread, "
                        "uplink, fragmentation, moved (default tiers,uplink,fragmentation; with --previous, moved "
                        "breaks the last ties); NAME=WEIGHT terms are summed into one weighted objective, e.g. "
                        "tiers=1,uplink=4. A sum adds terms of one unit only: bytes per iteration (tiers, bytes, "
                        "uplink) or counts (spread, fragmentation: ToR groups; moved: hosts); order bytes and "
                        "counts instead (moved,tiers). top-first takes no weight; weights are at most 1e12")
    p.add_argument("--tier-weights", type=tier_weights_arg,
                   help="weights of the tiers a byte crosses in the tiers objective, e.g. spine=1,core=3 (default: "
                        "the product of the oversubscription ratios below each tier, 1 on a non-blocking fabric; "
                        "at most 1e12). The plan under the default weights is also tried, so no plan under other "
                        "weights is worse than it on every tier")
    add_constraint_args(p)
    chosen = p.add_mutually_exclusive_group()
    chosen.add_argument("--hosts", type=hostlist_arg,
                        help="plan on exactly these free hosts: a hostlist (n[1-4]), or @FILE with one hostlist per "
                             "line or `kubectl get pods -o json` output (the pods' node names)")
    chosen.add_argument("--allocation", type=hostlist_arg,
                        help="plan on exactly the hosts of this job's own scheduler allocation (\"$SLURM_JOB_NODELIST\""
                             ", or @FILE as for --hosts): hosts the cluster spec marks busy are taken as this job's "
                             "(a spec refreshed from the scheduler marks them allocated); failed ones are refused")
    p.add_argument("--previous", type=path_arg,
                   help="an earlier rankmap.json of this job: keep its hosts at their node ranks where possible (its "
                        "layout, excluded or failed hosts refilled as replan does, is tried; with --objective moved "
                        "first only the hosts that must change move)")
    p.add_argument("--no-picture", action="store_true",
                   help="do not draw plan.png (the plan and the baselines on the fabric; ~2 s at 12,288 GPUs)")
    add_json_arg(p)
    p.set_defaults(func=run_plan)

    r = sub.add_parser("replan", help="replace failed hosts in a rank map, moving only their ranks",
                       description="Replace the failed hosts of a rank map (--failed, and those the cluster spec "
                                   "marks failed) with spare hosts, preferring each one's own ToR group: only their "
                                   "ranks move, every other rank keeps its host. Writes the new rankmap.json and "
                                   "hostfile to --out.")
    r.add_argument("--rankmap", type=path_arg, required=True, help="the current rankmap.json")
    r.add_argument("--cluster", type=path_arg,
                   help="cluster spec YAML the map was made for (default: the embedded example of that name)")
    r.add_argument("--failed", type=hostlist_arg, help="hostlist of hosts that failed (besides those the spec marks)")
    r.add_argument("--out", type=out_folder, default=Path("rankmap-out"), help="output folder (default: rankmap-out)")
    add_constraint_args(r)
    add_json_arg(r)
    r.set_defaults(func=run_replan)


def add_show_parser(sub) -> None:
    """Add ``show`` to the subparsers."""
    s = sub.add_parser("show", help="draw a rank map on its cluster (PNG)",
                       description="Draw a rank map on its cluster: ToR groups and pods, hosts coloured by pipeline "
                                   "stage, DP rings and pipeline hops between ToR groups, busy and failed hosts.")
    s.add_argument("rankmap", type=path_arg, help="rankmap.json")
    s.add_argument("--cluster", type=path_arg,
                   help="cluster spec YAML the map was made for (default: the embedded example of that name)")
    s.add_argument("--out", type=out_png, help="PNG to write (default: plan.png beside the rank map)")
    add_json_arg(s)
    s.set_defaults(func=run_show)


def add_verify_parser(sub) -> None:
    """Add ``verify`` to the subparsers."""
    v = sub.add_parser("verify", help="check a rank map (and that it belongs to a cluster)",
                       description="Check a rank map: the schema, every rank once, ranks and coordinates as its "
                                   "order gives them; with --cluster, that it was made for that cluster and that "
                                   "none of its hosts is marked failed there (busy ones are warned about).")
    v.add_argument("rankmap", type=path_arg, help="rankmap.json")
    v.add_argument("--cluster", type=path_arg, help="cluster spec YAML the map must belong to")
    add_json_arg(v)
    v.set_defaults(func=run_verify)


def run_plan(args: argparse.Namespace) -> int:
    from rankmap import api
    from rankmap.cli.report import print_plan
    from rankmap.launch.stale_files import stale_launch_files, stale_launch_folders

    cluster_path, job_path = example_inputs(args)
    check_objective_flags(args.objective, args.tier_weights, args.previous)
    stale_launch_folders(args.out)  # refused before the solver runs
    stale_launch_files(args.out)
    overrides = {k: getattr(args, k) for k in ("tp", "pp", "cp", "ep", "order", "model")
                 if getattr(args, k) is not None}
    if args.dp is not None:
        overrides["dp"] = None if args.dp == "auto" else args.dp
    if args.micro_batches is not None:
        overrides["num_micro_batches"] = args.micro_batches
    t0 = time.perf_counter()
    cluster = api.load_cluster(cluster_path)
    job = api.load_job(job_path, overrides)
    goals, weights = args.objective, args.tier_weights
    if weights:
        from rankmap.errors import SpecError
        from rankmap.placement.tier_weights import tier_weights
        try:
            given = tier_weights(cluster, weights)
        except SpecError as exc:  # an unknown tier is a bad flag value, as a malformed one is: exit 2
            raise UsageError(str(exc)) from None
        if not any(given):  # the other tiers keep their default weights
            raise UsageError(f"--tier-weights {_terms(weights)}: every tier of cluster {cluster.name!r} then "
                             f"weighs 0, so the tiers objective scores every placement the same; give a weight > 0")
    previous = api.read_rankmap(args.previous) if args.previous else None
    constraints = constraints_from_args(args, cluster)
    hosts = api.select_hosts(cluster, args.hosts, constraints) if args.hosts else None
    if args.allocation:  # this job's nodes: busy in a spec refreshed from the scheduler, free for this plan
        hosts = api.select_hosts(cluster, args.allocation, constraints, allocated=True)
        cluster = api.own_allocation(cluster, hosts)
    from rankmap.cli.report import progress
    with progress(f"planning {job.name} on {cluster.name}"):
        result = api.plan(cluster, job, time_limit_s=args.time_limit, seed=args.seed, workers=args.workers,
                          constraints=constraints, objectives=goals, previous=previous,
                          tier_weights=weights, hosts=hosts, wall_limit_s=args.max_wall,
                          hosts_flag="--allocation" if args.allocation else "--hosts")
    extra = {}
    if not args.no_picture:
        with progress("drawing plan.png"):
            extra = {"plan.png": api.plan_picture(cluster, result)}

    def report(written):
        if args.json:
            from rankmap.cli.report import plan_doc, print_json
            print_json(plan_doc(cluster, result, written, time.perf_counter() - t0))
        else:
            print_plan(cluster, result, written, time.perf_counter() - t0)

    write_map(result.rankmap, args.out, extra, report=report)
    return EXIT_OK


def _terms(terms) -> str:
    """Objectives or tier weights as the flag spells them (``tiers=1,uplink``)."""
    items = terms.items() if isinstance(terms, dict) else terms
    return ",".join(f"{t[0]}={t[1]:g}" if isinstance(t, tuple) else t for t in items)


def check_objective_flags(goals: tuple, tier_weights: dict | None, previous) -> None:
    """Refuse objective flags that would do nothing (UsageError, exit 2, naming the flags):
    ``moved`` without ``--previous`` (it counts hosts changed against it), and ``--tier-weights``
    without the ``tiers`` objective, the only one that weighs tiers (``top-first`` ranks them
    by height; the others count bytes, hosts or groups)."""
    names = objective_names(goals)
    if previous is None and "moved" in names:
        raise UsageError(f"--objective {_terms(goals)}: 'moved' counts hosts changed against --previous; "
                         f"give --previous RANKMAP.json or drop it")
    if tier_weights and "tiers" not in names:
        raise UsageError(f"--tier-weights {_terms(tier_weights)} weighs the tiers objective, which --objective "
                         f"{_terms(goals)} leaves out: add tiers to --objective or drop --tier-weights")


def run_replan(args: argparse.Namespace) -> int:
    from rankmap import api
    from rankmap.cli.report import print_replan
    from rankmap.launch.stale_files import stale_launch_files, stale_launch_folders
    from rankmap.topology.hostnames import expand_hostlist

    previous = api.read_rankmap(args.rankmap)
    stale_launch_folders(args.out)
    stale_launch_files(args.out)
    args.cluster = args.cluster or embedded_cluster_of(previous, args.rankmap)
    cluster = api.load_cluster(args.cluster)
    failed = expand_hostlist(args.failed, key="--failed") if args.failed else []
    constraints = constraints_from_args(args, cluster)
    check_reserved_maps(args.reserve, args.rankmap, previous, cluster, failed)
    result = api.replan(cluster, previous, failed, constraints)
    if result.not_in_map:
        import sys

        from rankmap.topology.hostnames import compress_hostlist
        print(f"rankmap replan: note: {len(result.not_in_map)} failed host(s) outside the map "
              f"({compress_hostlist(list(result.not_in_map))}) held no ranks; they are kept out of the spares",
              file=sys.stderr)

    def report(written):
        if args.json:
            from rankmap.cli.report import print_json
            print_json({"replaced": [{"node_rank": n, "old": old, "new": new} for n, old, new in result.replaced],
                        "moved_ranks": result.moved_ranks, "cross_tor_bytes_before": result.before.cross_tor_bytes,
                        "cross_tor_bytes_after": result.after.cross_tor_bytes, "tiers": list(result.tiers),
                        "tier_bytes_before": list(result.before.tier_bytes),
                        "tier_bytes_after": list(result.after.tier_bytes), "tier_weights": list(result.weights),
                        "weighted_bytes_before": result.before.cost, "weighted_bytes_after": result.after.cost,
                        "outputs": [str(p) for p in written]})
        else:
            print_replan(result, written)

    write_map(result.rankmap, args.out, report=report)
    return EXIT_OK


def check_reserved_maps(paths, rankmap_path: Path, previous, cluster, failed: list[str]) -> None:
    """Refuse a ``--reserve`` map whose job holds hosts this map keeps (all but the failed ones):
    the replanned map would start this job on another job's hosts (or the map is this job's own,
    given by mistake). RankmapError (exit 3) naming the file and the hosts; the library refuses the
    same for any reservation (:func:`rankmap.placement.replan.replan`), without the file's name."""
    from rankmap import api
    from rankmap.errors import RankmapError
    from rankmap.names import host_identity
    from rankmap.topology.hostnames import compress_hostlist

    gone = {host_identity(h) for h in failed} | {host_identity(h.name) for h in cluster.hosts if h.state == "failed"}
    kept = {host_identity(h): h for h in previous.hosts if host_identity(h) not in gone}
    for path in paths:
        other = api.read_rankmap(path)
        clash = sorted(kept[host_identity(h)] for h in other.hosts if host_identity(h) in kept)
        if not clash:
            continue
        if other.hosts == previous.hosts and other.job == previous.job:
            raise RankmapError(f"--reserve {path}: this is the job of --rankmap {rankmap_path} itself, whose kept "
                               f"hosts ({compress_hostlist(clash)}) would be reserved against it: drop that --reserve")
        raise RankmapError(f"--reserve {path}: its job holds {len(clash)} host(s) of the map that replan keeps "
                           f"({compress_hostlist(clash)}); two jobs cannot share hosts: drop that --reserve if the "
                           f"map is stale, or name the hosts in --failed to move this job's ranks off them")


def write_map(rm, out: Path, extra: dict | None = None, *, report) -> None:
    """Commit ``rm`` (rankmap.json, hostfile, ``extra``) into ``out`` after printing ``report``.

    An old ``plan.png`` in ``out`` that ``extra`` does not redraw would show another map (the
    failed host of a replan still in use): it is removed in the same commit, and stderr says how
    to draw the new map (``rankmap show``).

    Launch files that ``rankmap launch`` wrote into ``out`` for the earlier map (``launch-slurm/``
    with that map's ``--nodes``, a torchrun line per old host) would start the old job beside the
    new map: they go in the same commit, as an old ``plan.png`` does, and stderr names them; so do
    the files ``rankmap launch --out OUT`` wrote straight into ``out`` (:func:`~rankmap.launch.stale_files.stale_launch_files`). Each
    is renamed aside once the new files are staged, put back if the commit fails, and deleted
    after it. ``run/`` (logs and records of a training run) is data and stays.
    """
    import os
    import shutil
    import sys

    from rankmap import api
    from rankmap.launch.formats import MANIFEST
    from rankmap.launch.stale_files import stale_launch_files, stale_launch_folders

    folders = stale_launch_folders(out)
    files = stale_launch_files(out, keep=("rankmap.json", "hostfile", *(extra or {})))
    stale = folders + files
    aside: list[tuple[Path, Path]] = []
    old_picture = "plan.png" not in (extra or {}) and (out / "plan.png").is_file()

    def before_commit(paths) -> None:
        report_before_commit(report)(paths)
        for folder in stale:
            trash = folder.with_name(f".{folder.name}.{os.getpid()}.removed")
            os.rename(folder, trash)
            aside.append((folder, trash))

    try:
        api.write_plan_files(rm, out, extra, remove=("plan.png",) if old_picture else (), before_commit=before_commit)
    except BaseException:
        for folder, trash in reversed(aside):
            os.rename(trash, folder)
        raise
    for folder, trash in aside:
        if trash.is_dir() and not trash.is_symlink():
            shutil.rmtree(trash, ignore_errors=True)
        else:
            trash.unlink(missing_ok=True)
    shown = [f"{f}/" for f in folders] + [str(f) for f in files if f.name != MANIFEST]
    if shown:
        print(f"rankmap: removed {', '.join(shown)}: launch files of the map this one replaces "
              f"(`rankmap launch --rankmap {out / 'rankmap.json'} --format ...` writes them for the new map)",
              file=sys.stderr)
    if old_picture:
        print(f"rankmap: removed {out / 'plan.png'}: it drew the map this one replaces (`rankmap show "
              f"{out / 'rankmap.json'}` draws the new one)", file=sys.stderr)


def run_verify(args: argparse.Namespace) -> int:
    from rankmap import api

    cluster = api.load_cluster(args.cluster) if args.cluster else None
    rm = api.verify(args.rankmap, cluster, args.cluster)
    busy = api.busy_hosts(rm, cluster) if cluster is not None else []
    if busy:
        print(f"rankmap: warning: {len(busy)} host(s) of the map are busy in cluster {cluster.name!r} "
              f"({', '.join(busy[:4])}{' ...' if len(busy) > 4 else ''}): fine if this job runs there, otherwise "
              f"`rankmap replan --rankmap {args.rankmap} --cluster {args.cluster} --failed HOSTS` moves its ranks",
              file=sys.stderr)
    if args.json:
        from rankmap.cli.report import print_json
        print_json({"rankmap": str(args.rankmap), "valid": True, "world_size": rm.world_size, "hosts": len(rm.hosts),
                    "cluster": rm.cluster_name, "cluster_verified": bool(args.cluster), "busy_hosts": busy,
                    "summary_checked": False})
        return EXIT_OK
    where = f", cluster {rm.cluster_name!r}" + (" (verified)" if args.cluster else "")
    # the placement is checked rank by rank; the summary is the planner's report of it (costs, bounds, baselines)
    unchecked = "; its summary (the planner's figures) is not checked" if rm.summary else ""
    print(f"{args.rankmap}: valid rank map: {rm.world_size} ranks on {len(rm.hosts)} hosts{where}{unchecked}")
    return EXIT_OK


def embedded_cluster_of(rm, rankmap_path: Path) -> Path:
    """The embedded example's cluster.yaml whose cluster ``rm`` was made for (maps of ``rankmap plan
    --example``), for commands given no ``--cluster``; RankMapFileError if there is none."""
    from rankmap import api
    from rankmap.errors import RankMapFileError
    from rankmap.examples import example_names, example_path

    for name in example_names():
        if api.load_cluster(example_path(name, "cluster.yaml")).name == rm.cluster_name:
            return example_path(name, "cluster.yaml")
    raise RankMapFileError(f"cluster {rm.cluster_name!r} is not an embedded example: give --cluster CLUSTER.yaml",
                           source=str(rankmap_path), key="cluster.name")


def run_show(args: argparse.Namespace) -> int:
    from rankmap import api
    from rankmap.fileio import atomic_write_files

    rm = api.read_rankmap(args.rankmap)
    args.cluster = args.cluster or embedded_cluster_of(rm, args.rankmap)
    cluster = api.load_cluster(args.cluster)
    rm.verify_cluster(cluster, str(args.rankmap))
    out = args.out or args.rankmap.parent / "plan.png"

    def report(written):
        if args.json:
            from rankmap.cli.report import print_json
            print_json({"rankmap": str(args.rankmap), "cluster": cluster.name, "world_size": rm.world_size,
                        "hosts": len(rm.hosts), "outputs": [str(p) for p in written]})
        else:
            print(f"wrote {written[0]}: {rm.world_size} ranks on {len(rm.hosts)} hosts of cluster {cluster.name!r}")

    atomic_write_files(out.parent, {out.name: api.plan_picture(cluster, rankmap=rm)},
                       before_commit=report_before_commit(report))
    return EXIT_OK
