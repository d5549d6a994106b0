"""rankmap's Python API: every command's work as a function (the command line only parses and prints).

::

    from rankmap.api import load_cluster, load_job, plan, write_plan_files
    result = plan(load_cluster("cluster.yaml"), load_job("job.yaml"))
    write_plan_files(result.rankmap, "plan/")

Functions: :func:`plan`, :func:`replan`, :func:`verify`, :func:`simulate`, :func:`diagnose`,
:func:`launch_files`, :func:`launch_local`, :func:`topo_import`, :func:`topo_show`, :func:`topo_export`. Each takes data (or paths) and returns data;
only :func:`write_plan_files` and :func:`launch_local` touch the file system or start processes.
Heavy modules (the CP-SAT solver, the simulator, matplotlib) are imported when first used.
Errors are :class:`rankmap.errors.RankmapError` subclasses, with the exit code the CLI uses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rankmap.errors import LaunchError, RankmapError, RankMapFileError, SpecError
from rankmap.job.rank_map import RankMap, read_rankmap, write_plan_files
from rankmap.job.spec import JobSpec, parse_job
from rankmap.job.spec import load_job as _load_job
from rankmap.placement.constraints import PlacementConstraints, load_constraints
from rankmap.placement.host_selection import read_host_names, select_hosts
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster
from rankmap.topology.spec import load_cluster, parse_cluster

__all__ = ["Cluster", "JobSpec", "RankMap", "PlacementConstraints",
           "load_cluster", "parse_cluster", "load_job", "parse_job", "load_constraints", "read_rankmap",
           "write_plan_files", "combine_constraints", "read_host_names", "select_hosts",
           "plan", "replan", "verify", "simulate", "SimulationRun", "diagnose", "DiagnosisRun",
           "launch_files", "launch_local", "allocation_files", "framework_flags", "check_engine_run", "topo_import", "topo_show", "topo_export",
           "OVERRIDE_FLAGS", "blame_flags", "plan_context", "busy_hosts", "plan_picture"]


def combine_constraints(cluster: Cluster, constraints: PlacementConstraints | None = None,
                        exclude: str | None = None, reserve: tuple = (), hosts: str | None = None) -> PlacementConstraints:
    """One set of constraints from a constraints file's, an exclusion hostlist, reserved rank maps
    and the exact hosts to plan on.

    Parameters
    ----------
    cluster : Cluster
        Reserved rank maps must belong to it.
    constraints : PlacementConstraints, optional
        Read from a file (:func:`load_constraints`).
    exclude : str, optional
        Slurm hostlist of hosts not to use.
    reserve : tuple of path
        ``rankmap.json`` files of running jobs; their hosts are taken.
    hosts : str, optional
        Plan on exactly these hosts (see :func:`select_hosts`): every other host is excluded.

    Raises
    ------
    SpecError
        Bad hostlist (key ``--exclude`` or ``--hosts``), unreadable map, a map of another
        cluster, or a host of ``hosts`` that is unknown or not free (the host and why named).
    """
    base = constraints or PlacementConstraints()
    excluded = tuple(expand_hostlist(exclude, key="--exclude")) if exclude else ()
    maps = [read_rankmap(path) for path in reserve]
    for rm in maps:
        rm.verify_cluster(cluster)
    reserved = tuple(h for rm in maps for h in rm.hosts)
    out = dataclasses.replace(base, exclude=base.exclude + excluded, reserve=base.reserve + reserved)
    if hosts:
        chosen = select_hosts(cluster, hosts, out)
        out = dataclasses.replace(out, exclude=out.exclude + tuple(h.name for h in cluster.hosts if h.name not in chosen))
    return out


# Job overrides as ``rankmap plan`` takes them: the key they set and the flag that sets it.
OVERRIDE_FLAGS = {"tp": ("parallel.tp", "--tp"), "pp": ("parallel.pp", "--pp"), "cp": ("parallel.cp", "--cp"),
                  "ep": ("parallel.ep", "--ep"), "dp": ("parallel.dp", "--dp"), "order": ("parallel.order", "--order"),
                  "model": ("model", "--model"), "num_micro_batches": ("batch.num_micro_batches", "--micro-batches")}


def blame_flags(exc: SpecError, job: JobSpec | None = None, set_by: dict | None = None) -> SpecError:
    """Point an error about a value the command line set at the flag, not at the job file.

    ``set_by`` (default ``job.set_by``) maps keys to flags; an error whose key is one of them gets
    the flag as its source (and loses the file's line, which holds the value that was replaced).

    Examples
    --------
    >>> str(blame_flags(SpecError("needs 400 hosts", source="job.yaml", key="parallel.dp"),
    ...                 set_by={"parallel.dp": "--dp"}))
    '--dp: needs 400 hosts'
    """
    flags = set_by if set_by is not None else (job.set_by if job is not None else {})
    flag = flags.get(exc.key or "")
    if flag:
        exc.source, exc.line, exc.key = flag, None, None
        exc.args = (str(exc),)
    return exc


def _locate(exc: SpecError, job: JobSpec) -> SpecError:
    """Give an error about a key of the job file (raised after parsing, e.g. by the planner) the
    key's line in that file."""
    if exc.line is None and exc.key and exc.source == job.source and Path(job.source).is_file():
        from rankmap.yamlio import key_line, read_yaml
        try:
            exc.line = key_line(read_yaml(job.source), exc.key)
        except SpecError:  # the file changed since it was read: leave the error as it is
            return exc
        exc.args = (str(exc),)
    return exc


def load_job(path: str | Path, overrides: dict | None = None) -> JobSpec:
    """Read a job spec YAML file and apply ``overrides`` (keys of :data:`OVERRIDE_FLAGS`) on top.

    Errors about an overridden value name its flag (``--dp: ...``), errors about the file name
    FILE:LINE and the key; the job remembers which keys the flags set (``JobSpec.set_by``), so the
    planner's errors about them name the flag too (:func:`plan`).

    Raises
    ------
    SpecError
        Unreadable file, unknown key or bad value.
    """
    overrides = dict(overrides or {})
    set_by = {OVERRIDE_FLAGS[k][0]: OVERRIDE_FLAGS[k][1] for k in overrides if k in OVERRIDE_FLAGS}
    try:
        job = _load_job(path, overrides)
    except SpecError as exc:
        raise blame_flags(exc, set_by=set_by) from None
    changes = {"set_by": set_by}
    if "model" in overrides and "name" not in overrides:
        changes["name"] = overrides["model"]  # the file's name described its own model
    return dataclasses.replace(job, **changes) if set_by else job


def plan(cluster: Cluster, job: JobSpec, *, hosts: set | None = None, wall_limit_s: float | None = None, **kwargs):
    """Place ``job`` on ``cluster``: see :func:`rankmap.placement.plan.plan` for the options.

    With ``hosts`` (the names from :func:`select_hosts`, the others excluded in the
    constraints), the plan must use every one of them: a job that fits on fewer is refused.
    ``wall_limit_s`` caps every CP-SAT solve at that many wall-clock seconds from the start
    (:func:`rankmap.placement.cpsat_model.wall_clock_limit`); the deterministic ``time_limit_s``
    alone keeps plans identical from run to run, a binding wall cap does not.

    Returns a :class:`rankmap.placement.result.PlanResult`; ``write_plan_files(result.rankmap, out)``
    writes ``rankmap.json`` and ``hostfile``.

    Raises
    ------
    RankMapFileError
        ``previous`` (an earlier plan to stay close to) was made for another cluster.
    PlacementError, InfeasibleError
        The job cannot be placed as asked.
    """
    from rankmap.placement.plan import plan as _plan

    if kwargs.get("previous") is not None:
        kwargs["previous"].verify_cluster(cluster)
    from rankmap.placement.cpsat_model import wall_clock_limit
    try:
        with wall_clock_limit(wall_limit_s):
            result = _plan(cluster, job, **kwargs)
    except SpecError as exc:
        raise _locate(blame_flags(exc, job), job) from None
    context = plan_context(kwargs.get("constraints"))
    if context:
        result = dataclasses.replace(result, rankmap=dataclasses.replace(result.rankmap, context=context))
    unused = sorted(set(hosts or ()) - set(result.rankmap.hosts))
    if unused:
        raise SpecError(f"--hosts gives {len(hosts)} hosts but the job uses {len(result.rankmap.hosts)}: "
                        f"{', '.join(unused[:4])}{' ...' if len(unused) > 4 else ''} would stay idle; set dp to fill "
                        f"them (dp auto) or list fewer hosts", key="--hosts")
    return result


def plan_picture(cluster: Cluster, result=None, rankmap: RankMap | None = None) -> bytes:
    """PNG of a plan on its cluster (:mod:`rankmap.placement.picture`): ``result``'s plan with its
    baselines beside it, or one ``rankmap`` alone."""
    from rankmap.placement.picture import plan_picture as _picture

    if result is not None:
        maps = [("rankmap plan", result.rankmap)] + [(b.name, result.candidate_rankmap(cluster, b))
                                                     for b in result.baselines]
        rm = result.rankmap
    else:
        maps, rm = [(Path(rankmap.source).name, rankmap)], rankmap
    job = rm.job
    title = (f"{job.name} (tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep}, {rm.world_size} ranks) on "
             f"{cluster.name}: hosts coloured by pipeline stage")
    return _picture(cluster, maps, title)


def plan_context(constraints: PlacementConstraints | None) -> dict:
    """What a rank map remembers of its constraints: excluded and reserved hosts as hostlists.

    Examples
    --------
    >>> plan_context(PlacementConstraints(exclude=("n3", "n1", "n2"), reserve=("m7",)))
    {'excluded': 'n[1-3]', 'reserved': 'm7'}
    """
    from rankmap.topology.hostnames import compress_hostlist

    if constraints is None:
        return {}
    return {key: compress_hostlist(sorted(set(hosts))) for key, hosts in
            (("excluded", constraints.exclude), ("reserved", constraints.reserve)) if hosts}


def replan(cluster: Cluster, previous: RankMap, failed: list[str] = (), constraints=None):
    """Replace failed hosts in ``previous``, moving only their ranks.

    See :func:`rankmap.placement.replan.replan`. ``failed`` hosts must be in ``cluster``. Hosts
    the original plan excluded or reserved (``previous.context``) stay out, besides ``constraints``;
    the new map remembers both, and the hosts replaced so far (``context.failed``), which later
    replans do not take back.

    Raises
    ------
    SpecError
        A failed host is not in the cluster (key ``--failed``).
    InfeasibleError
        Too few usable hosts to replace them.
    """
    from rankmap.placement.replan import replan as _replan

    for host in failed:
        if not cluster.has_host(host):
            raise SpecError(f"host {host!r} is not in cluster {cluster.name!r}", key="--failed")
    from rankmap.topology.hostnames import compress_hostlist

    kept = {key: tuple(expand_hostlist(previous.context[key], source=previous.source, key=f"context.{key}"))
            for key in ("excluded", "reserved", "failed") if previous.context.get(key)}
    constraints = constraints or PlacementConstraints()
    constraints = dataclasses.replace(constraints, exclude=constraints.exclude + kept.get("excluded", ()),
                                      reserve=constraints.reserve + kept.get("reserved", ()))
    context = plan_context(constraints)
    result = _replan(cluster, previous, list(failed),
                     dataclasses.replace(constraints, exclude=constraints.exclude + kept.get("failed", ())))
    gone = set(kept.get("failed", ())) | {old for _, old, _ in result.replaced}
    if gone:
        context["failed"] = compress_hostlist(sorted(gone))
    if context:
        result = dataclasses.replace(result, rankmap=dataclasses.replace(result.rankmap, context=context))
    return result


def verify(rankmap_path: str | Path, cluster: Cluster | None = None, cluster_path: str | Path | None = None) -> RankMap:
    """Read a rank map, check it, and (with ``cluster``) check that it belongs to that cluster
    and that none of its hosts is marked failed there now.

    Raises
    ------
    RankMapFileError
        Malformed or inconsistent file, made for another cluster (file and key named), or a
        host of the map (node 0 is the rendezvous master) is failed in the cluster spec: the
        message names them and the ``rankmap replan`` command that replaces them.
    """
    rm = read_rankmap(rankmap_path)
    if cluster is not None:
        rm.verify_cluster(cluster, str(rankmap_path))
        down = [(n, h) for n, h in enumerate(rm.hosts) if cluster.host(h).state == "failed"]
        if down:
            names = ", ".join(f"{h} (node rank {n}{', the rendezvous master' if n == 0 else ''})" for n, h in down[:4])
            raise RankMapFileError(f"{len(down)} host(s) of the map are failed in cluster {cluster.name!r}: {names}"
                                   f"{' ...' if len(down) > 4 else ''}; replace them with `rankmap replan "
                                   f"--rankmap {rankmap_path} --cluster {cluster_path or 'CLUSTER.yaml'}`",
                                   source=str(rankmap_path), key="ranks")
    return rm


def busy_hosts(rm: RankMap, cluster: Cluster) -> list[str]:
    """Hosts of ``rm`` that ``cluster`` marks busy (another job's, or this job's once running)."""
    return [h for h in rm.hosts if cluster.has_host(h) and cluster.host(h).state == "busy"]


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
             compare: bool = False, seeds: int = 4, seed: int = 0, routing: str = "ecmp", qps: int = 1, same_hash: bool = False, alpha_us: float = 5.0,
             efficiency: float = 1.0, algorithm: str = "ring", time_limit_s: float = 20.0,
             hardware: dict | None = None, channels_per_nic: int = 2,
             qp_rate_fraction: float | None = 0.8) -> SimulationRun:
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
    alpha_us, efficiency, algorithm :
        Latency per algorithm step (us), fraction of line rate, ``"ring"`` or ``"tree"``.
    time_limit_s : float
        Planner budget (deterministic seconds).
    channels_per_nic, qp_rate_fraction :
        NCCL channels per NIC and the most one queue pair moves, as a fraction of its NIC's
        line rate (:class:`rankmap.simulator.collectives.CollectiveConfig`).
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
                              channels_per_nic=channels_per_nic, qp_rate_fraction=qp_rate_fraction)
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


@dataclass(frozen=True)
class DiagnosisRun:
    """What :func:`diagnose` returns.

    Attributes
    ----------
    diagnosis : Diagnosis
        Flags and the hang, as :func:`rankmap.diagnose.analysis.diagnose` finds them.
    summary : dict
        The ``diagnosis.json`` document.
    constraints : PlacementConstraints
        Flagged hosts excluded, slow ToR groups given a quota of 0: for the next ``plan``.
    files : dict of str to str or bytes
        ``diagnosis.json``, ``heatmap.png``, ``trace.json``, ``constraints.yaml``.
    host_of, tor_of : dict
        Rank -> host and host -> ToR group, from the rank map.
    """

    diagnosis: object
    summary: dict
    constraints: PlacementConstraints
    files: dict
    host_of: dict
    tor_of: dict


def diagnose(run_dir: str | Path, rankmap: RankMap, *, z: float = 5.0, min_ratio: float = 1.5,
             min_excess_s: float = 0.05, run_id: str | None = None) -> DiagnosisRun:
    """Stragglers and hangs from a run's timing records (``RUN_DIR/events``), with what to exclude next.

    Parameters
    ----------
    run_dir : path
        Run folder the engine wrote.
    rankmap : RankMap
        The run's rank map (ranks -> hosts, ToR groups, pipeline stages).
    z, min_ratio, min_excess_s : float
        Flag a duration at this robust z-score, and only at ``min_ratio`` times the median and
        ``min_excess_s`` seconds above it.
    run_id : str, optional
        Which run of ``RUN_DIR/events/`` (default: the newest).

    Returns
    -------
    DiagnosisRun

    Raises
    ------
    RankmapError
        Missing or malformed records, or records whose ranks or hosts the rank map contradicts.
    """
    import json

    from rankmap.diagnose.analysis import diagnose as _diagnose
    from rankmap.diagnose.heatmap import heatmap_png
    from rankmap.diagnose.records import read_run
    from rankmap.diagnose.trace import chrome_trace
    from rankmap.placement.constraints import constraints_to_yaml

    records = read_run(run_dir, run_id)
    host_of = {r: rankmap.hosts[int(rankmap.rank_node[r])] for r in range(rankmap.world_size)}
    _check_records_hosts(records, host_of, run_dir)
    node_of = {r: int(rankmap.rank_node[r]) for r in range(rankmap.world_size)}
    tor_of = dict(zip(rankmap.hosts, rankmap.tor_groups))
    stage = rankmap.layout.column("pp")
    role_of = {r: int(stage[r]) for r in range(rankmap.world_size)}
    d = _diagnose(records, host_of, tor_of, role_of=role_of, z=z, min_ratio=min_ratio, min_excess_s=min_excess_s)
    bad_hosts = sorted({host_of[int(f.who)] for f in d.flags if f.what == "rank"} |
                       {f.who for f in d.flags if f.what == "host"} | set(d.hang.culprit_hosts if d.hang else ()))
    bad_groups = sorted({f.who for f in d.flags if f.what == "tor_group"})
    constraints = PlacementConstraints(exclude=tuple(bad_hosts), quotas={g: 0 for g in bad_groups},
                                       source="diagnosis")
    summary = {
        "run_id": records.run_id, "ranks": len(d.ranks), "phases": list(d.phases),
        "clock_offsets_s": {h: round(v, 6) for h, v in sorted(d.offsets.items())},
        "flags": [{"what": f.what, "who": f.who, "phase": f.phase, "measure": f.measure, "value_s": f.value_s,
                   "typical_s": f.typical_s, "z": round(f.z, 3), "ranks": list(f.ranks),
                   **({"host": host_of.get(int(f.who), "?"), "rail": _rail(rankmap, int(f.who))}
                      if f.what == "rank" else {})} for f in d.flags],
        "hang": None if d.hang is None else {
            "group": d.hang.group, "seq": d.hang.seq, "phase": d.hang.phase, "waiting": list(d.hang.waiting),
            "culprits": list(d.hang.culprits), "culprit_hosts": list(d.hang.culprit_hosts),
            "culprit_rails": [_rail(rankmap, c) for c in d.hang.culprits],
            "culprit_tor_groups": [tor_of[host_of[c]] if c in host_of else "?" for c in d.hang.culprits],
            "culprit_state": list(d.hang.culprit_state),
            "blocked_in": [{"phase": ph, "group": g, "members": list(m), "seq": q, "entered": list(e),
                            "never_entered": list(n)} for ph, g, m, q, e, n in d.hang.instances]},
        "exclude_hosts": bad_hosts, "exclude_tor_groups": bad_groups,
    }
    files = {
        "diagnosis.json": json.dumps(summary, indent=1, sort_keys=True) + "\n",
        "heatmap.png": heatmap_png(d, host_of, tor_of),
        "trace.json": chrome_trace(records, host_of, node_of, d.offsets),
        "constraints.yaml": constraints_to_yaml(
            constraints, "written by rankmap diagnose: use with rankmap plan --constraints"),
    }
    return DiagnosisRun(d, summary, constraints, files, host_of, tor_of)


def _rail(rankmap: RankMap, rank: int):
    """The rail (NIC index) of a rank, from the rank map (None when unknown)."""
    if not 0 <= rank < rankmap.world_size:
        return None
    entry = rankmap.entry(rank)
    rails = rankmap.rails[int(rankmap.rank_node[rank])]
    return int(rails[entry["local_rank"]]) if entry["local_rank"] < len(rails) else None


def _check_records_hosts(records, host_of: dict, run_dir) -> None:
    """Refuse records the rank map contradicts (another run's map): ranks it lacks, other hosts."""
    bad = sorted({(e.rank, e.host) for e in records.events + records.hangs if host_of.get(e.rank) != e.host})
    if bad:
        rank, host = bad[0]
        where = f"puts rank {rank} on {host_of[rank]!r}" if rank in host_of else f"has no rank {rank}"
        raise RankmapError(f"{run_dir}: the records say rank {rank} ran on {host!r} but the rank map {where} "
                           f"({len(bad)} rank/host pairs differ): give the rank map this run was launched with")


def check_engine_run(rankmap: RankMap, config_path: str | Path | None = None, steps: int | None = None):
    """Load and check the engine config for ``rankmap``'s job before anything starts.

    Returns the :class:`rankmap.engine.config.EngineConfig` (``steps`` applied).

    Raises
    ------
    SpecError, EngineError
        Bad config, or a config that does not fit the job (file and key named).
    """
    from rankmap.engine.config import load_config
    from rankmap.engine.runspec import resolve_run

    cfg = load_config(config_path)
    if steps is not None:
        cfg = cfg.with_steps(steps)
    resolve_run(cfg, rankmap.job)
    return cfg


def launch_files(rankmap: RankMap, fmt: str, options, out: str | Path) -> dict:
    """``{file name: text}`` of launch files for ``rankmap`` in format ``fmt``.

    See :func:`rankmap.launch.formats.launch_files` (formats ``FORMATS``; ``options`` a
    :class:`rankmap.launch.common.LaunchOptions`). Nothing is written.
    """
    from rankmap.launch.formats import launch_files as _launch_files
    return _launch_files(rankmap, fmt, options, out)


def launch_local(rankmap_path: str | Path, run_dir: str | Path, *, config_path: str | Path | None = None,
                 steps: int | None = None, master_port: int | None = None, timeout_s: float | None = None,
                 cwd: str | Path | None = None, entry: tuple | None = None, max_procs: int | None = None) -> Path:
    """Train ``rankmap_path``'s job on this machine: one torchrun agent per host of the map, on 127.0.0.1.

    Refuses a map with more workers than ``max_procs`` (see
    :func:`rankmap.launch.local.check_local_size`). With ``entry`` None, checks the engine
    config first (:func:`check_engine_run`) and runs the bundled engine; else runs ``entry``
    (the user's command, argv-exact, with ``RANKMAP_FILE`` naming the map) in ``cwd``. Runs
    the agents to the end (see :func:`rankmap.launch.local.run_agents`); every process started
    is stopped when the run ends. Returns the run folder.

    Raises
    ------
    LaunchError
        Too many workers, an agent failed or the run timed out (the engine's ``error.txt`` is
        quoted when present).
    SpecError
        Bad rank map or config.
    """
    from rankmap.fileio import read_text
    from rankmap.launch.local import check_local_size, free_port, local_agents, run_agents

    rankmap_path = Path(rankmap_path).resolve()
    rm = read_rankmap(rankmap_path)
    check_local_size(rm, max_procs)
    run_dir = Path(run_dir).resolve()
    if entry:
        agents = local_agents(rm, [], master_port or free_port(), entry=tuple(entry), rankmap_file=str(rankmap_path))
    else:
        agents = local_agents(rm, _engine_args(rm, rankmap_path, run_dir, config_path, steps),
                              master_port or free_port(), rankmap_file=str(rankmap_path))
    try:
        run_agents(agents, cwd=Path(cwd) if cwd else Path.cwd(), timeout_s=timeout_s)
    except LaunchError:
        error = run_dir / "error.txt"
        if not entry and error.is_file():
            raise LaunchError(f"the job stopped: {read_text(error).strip()}") from None
        raise
    return run_dir


def _engine_args(rm: RankMap, rankmap_path: Path, run_dir: Path, config_path, steps) -> list[str]:
    """The bundled engine's options for a local run (config checked first)."""
    cfg = check_engine_run(rm, config_path, steps)
    if cfg.data.root and not Path(cfg.data.root).is_dir():  # checked here: the agents would all fail
        raise RankmapError(f"{config_path}: data.root: {cfg.data.root} is not a folder")
    args = ["--rankmap", str(rankmap_path), "--out", str(run_dir)]
    if config_path:
        args += ["--config", str(Path(config_path).resolve())]
    if steps is not None:
        args += ["--steps", str(steps)]
    return args


def allocation_files(rankmap: RankMap, options, cluster_path: str, out: str | Path) -> dict:
    """``{file name: text}`` of an sbatch script that plans ``rankmap``'s job inside its allocation.

    See :func:`rankmap.launch.allocation.allocation_files`. Nothing is written.
    """
    from rankmap.launch.allocation import allocation_files as _files
    return _files(rankmap, options, cluster_path, str(out))


def framework_flags(rankmap: RankMap, framework: str) -> str:
    """A framework's command-line flags that build exactly ``rankmap``'s groups (one text block).

    See :mod:`rankmap.launch.adapters`.

    Raises
    ------
    LaunchError
        The framework cannot express the map's order (the reason is named).
    """
    from rankmap.launch.adapters import framework_flags as _flags
    return _flags(rankmap, framework)


def topo_import(path: str | Path, fmt: str, options=None) -> tuple:
    """Import a topology file (Slurm tree/block, k8s labels, Volcano, hostfile) as a cluster spec.

    Parameters
    ----------
    path : path
        The file.
    fmt : str
        One of :data:`rankmap.topology.importers.IMPORT_FORMATS`.
    options : ImportOptions, optional
        GPUs, rails, speeds, known hosts, label levels, strictness.

    Returns
    -------
    (ImportResult, str, list of str)
        The import (cluster, warnings, notes), the cluster spec YAML to write, and the summary lines.

    Raises
    ------
    SpecError
        The file is malformed (FILE:LINE, key and value named), or warnings with ``strict``.
    """
    from rankmap.topology.importers import import_file
    from rankmap.topology.spec import cluster_to_yaml
    from rankmap.topology.summary import summarize

    result = _with_identity(import_file(fmt, path, options), path, options)
    text = f"# Imported by rankmap topo import --from {fmt} from {Path(path).name}\n" + cluster_to_yaml(result.cluster)
    if parse_cluster(text, "<import>") != result.cluster:  # the spec must carry everything imported
        raise RuntimeError("cluster spec does not read back as the imported cluster")
    return result, text, summarize(result)


def topo_show(path: str | Path, fmt: str | None = None, options=None) -> tuple:
    """Read a cluster spec or topology file (format guessed when ``fmt`` is None) and summarise it.

    Returns ``(ImportResult, summary lines)``; raises :class:`SpecError` for a malformed file.
    """
    from rankmap.topology.importers import load_any
    from rankmap.topology.summary import summarize

    result = load_any(path, fmt, options)
    if result.format != "cluster":
        result = _with_identity(result, path, options)
    return result, summarize(result)


def _with_identity(result, path, options):
    """The exported cluster's name, group names and hash back, when the file carries them
    (:mod:`rankmap.topology.identity`)."""
    from rankmap.fileio import read_text
    from rankmap.topology.identity import restore

    return restore(result, read_text(path), keep_name=bool(options is not None and options.name))


def topo_export(cluster: Cluster, fmt: str, levels: tuple | None = None, slurm_version: str | None = None) -> str:
    """A cluster's topology as a scheduler reads it: Slurm topology.conf (tree or block) or k8s node labels.

    Raises
    ------
    RankmapError
        ``levels`` given for a format other than ``k8s-labels``.
    """
    from rankmap.topology.importers import export_cluster

    if levels and fmt != "k8s-labels":
        raise RankmapError("--levels applies to --to k8s-labels only")
    if slurm_version and fmt not in ("slurm-block", "slurm-yaml"):
        raise RankmapError("--slurm-version applies to --to slurm-block and --to slurm-yaml only")
    from rankmap.topology.identity import stamp

    kwargs = {"levels": levels} if levels else {"slurm_version": slurm_version} if slurm_version else {}
    return stamp(fmt, cluster, export_cluster(fmt, cluster, **kwargs))
