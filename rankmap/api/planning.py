"""Planning commands: constraints, job overrides, ``plan``, ``replan``, ``verify`` and the plan picture.

Each function takes data and returns data; the CP-SAT solver and matplotlib are imported
when first used.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rankmap.errors import RankMapFileError, SpecError
from rankmap.job.rank_map import RankMap, read_rankmap
from rankmap.job.spec import JobSpec
from rankmap.job.spec_file import load_job as _load_job
from rankmap.names import host_identity
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.host_selection import select_hosts
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster

__all__ = ["combine_constraints", "OVERRIDE_FLAGS", "blame_flags", "load_job", "plan", "plan_picture", "plan_context",
           "replan", "verify", "busy_hosts"]


def combine_constraints(cluster: Cluster, constraints: PlacementConstraints | None = None,
                        exclude: str | None = None, reserve: tuple = (), hosts: str | None = None,
                        allocated: bool = False) -> PlacementConstraints:
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
    allocated : bool
        ``hosts`` are this job's scheduler allocation: hosts the cluster marks busy are accepted
        (plan on :func:`rankmap.placement.host_selection.own_allocation` of the cluster).

    Raises
    ------
    SpecError
        Bad hostlist (key ``--exclude`` or ``--hosts``), unreadable map, a map of another
        cluster, or a host of ``hosts`` that is unknown or not free (the host and why named).
    """
    base = constraints or PlacementConstraints()
    excluded = tuple(expand_hostlist(exclude, key="--exclude")) if exclude else ()
    for host in excluded:
        if not cluster.has_host(host):
            raise SpecError(f"host {host!r} is not in cluster {cluster.name!r}", key="--exclude")
    maps = [read_rankmap(path) for path in reserve]
    for rm in maps:
        rm.verify_cluster(cluster)
    reserved = tuple(h for rm in maps for h in rm.hosts)
    by = base.reserved_by | {host_identity(h): (None, None, f"--reserve {path}", str(path))
                             for path, rm in zip(reserve, maps) for h in rm.hosts}
    out = dataclasses.replace(base, exclude=base.exclude + excluded, reserve=base.reserve + reserved, reserved_by=by)
    out = out.in_spelling_of(cluster)
    if hosts:
        chosen = select_hosts(cluster, hosts, out, allocated)
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


def plan(cluster: Cluster, job: JobSpec, *, hosts: set | None = None, wall_limit_s: float | None = None,
         hosts_flag: str = "--hosts", **kwargs):
    """Place ``job`` on ``cluster``: see :func:`rankmap.placement.plan.plan` for the options.

    With ``hosts`` (the names from :func:`select_hosts`, the others excluded in the
    constraints), the plan must use every one of them: a job that fits on fewer is refused,
    naming ``hosts_flag`` (the flag that gave them: ``--hosts`` or ``--allocation``).
    ``wall_limit_s`` caps every CP-SAT solve at that many wall-clock seconds from the start
    (:func:`rankmap.placement.cpsat_model.wall_clock_limit`), and nothing else: the constructive
    layouts, local searches and bounds run to the end whatever it is, so planning can take
    longer. The deterministic ``time_limit_s`` alone keeps plans identical from run to run, a
    binding wall cap does not.

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
        raise SpecError(f"{hosts_flag} gives {len(hosts)} hosts but the job uses {len(result.rankmap.hosts)}: "
                        f"{', '.join(unused[:4])}{' ...' if len(unused) > 4 else ''} would stay idle; set dp to fill "
                        f"them (dp auto) or list fewer hosts", key=hosts_flag)
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

    See :func:`rankmap.placement.replan.replan`. ``failed`` hosts must be in ``cluster``, and one
    at least in the map; the others (a whole failed rack) are kept out of the spares. Hosts
    the original plan excluded or reserved (``previous.context``) stay out, besides ``constraints``;
    the new map remembers both, and the hosts replaced so far (``context.failed``), which later
    replans do not take back.

    Raises
    ------
    SpecError
        A failed host is not in the cluster, or none is in the map (key ``--failed``).
    InfeasibleError
        Too few usable hosts to replace them.
    """
    from rankmap.placement.replan import replan as _replan
    from rankmap.topology.hostnames import compress_hostlist

    in_map = {host_identity(h) for h in previous.hosts}
    for host in failed:
        if not cluster.has_host(host):
            raise SpecError(f"host {host!r} is not in cluster {cluster.name!r}", key="--failed")
    if failed and not any(host_identity(h) in in_map for h in failed):  # some may be: a failed rack's others
        hosts = compress_hostlist(sorted(previous.hosts))
        what = (f"host {failed[0]!r} is not in the rank map: it holds" if len(failed) == 1 else
                f"none of its {len(failed)} hosts is in the rank map: they hold")
        raise SpecError(f"{what} none of the job's ranks (the map's "
                        f"{len(previous.hosts)} hosts: {hosts if len(hosts) <= 120 else hosts[:117] + '...'})",
                        key="--failed")
    failed = [cluster.host(host).name for host in failed]   # the cluster's spelling

    kept = {key: tuple(expand_hostlist(previous.context[key], source=previous.source, key=f"context.{key}"))
            for key in ("excluded", "reserved", "failed") if previous.context.get(key)}
    constraints = constraints or PlacementConstraints()
    constraints = dataclasses.replace(constraints, exclude=constraints.exclude + kept.get("excluded", ()),
                                      reserve=constraints.reserve + kept.get("reserved", ()))
    context = plan_context(constraints)
    result = _replan(cluster, previous, list(failed),
                     dataclasses.replace(constraints, exclude=constraints.exclude + kept.get("failed", ())))
    gone = set(kept.get("failed", ())) | {old for _, old, _ in result.replaced} | set(result.not_in_map)
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
