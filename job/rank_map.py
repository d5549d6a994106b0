"""Rank maps: which host and GPU every global rank runs on, and the files that carry them.

``rankmap.json`` (schema ``rankmap/v1``)::

    {"schema": "rankmap/v1",
     "cluster": {"name": ..., "sha256": <Cluster.spec_hash()>},
     "job": {<job spec, dp resolved>},
     "world_size": W, "nproc_per_node": G, "num_nodes": N,
     "summary": {<plan metrics>},
     "context": {"excluded": <hostlist>, "reserved": <hostlist>, "failed": <hostlist replaced by replan>},
                (only the keys the plan had)
     "ranks": [{"rank": 0, "host": "h", "node_rank": 0, "local_rank": 0, "tor_group": "tg00",
                "rail": 0, "tp": 0, "pp": 0, "dp": 0, "cp": 0, "ep": 0}, ...]}

Global rank ``r`` runs on node rank ``r // G`` at local rank ``r % G`` -- what torchrun,
Slurm and mpirun do when hosts are given in node-rank order -- so the ``hostfile`` (one
host per line, in node-rank order) reproduces the map. On hosts with different GPU
counts (``"nprocs"`` lists ranks per node) ranks are numbered node after node the same
way, and the hostfile says ``host slots=N``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterator

import numpy as np

from rankmap import names
from rankmap.errors import RankMapFileError, SpecError
from rankmap.fileio import atomic_write_files, decode_text, parse_json, read_bytes
from rankmap.fileio.reading import MAX_INPUT_BYTES
from rankmap.job.layout import COORD, ParallelLayout
from rankmap.job.rank_map_columns import checked_columns, columns_of_entries
from rankmap.job.rank_map_schema import SCHEMA, as_int, check_document, job_ints
from rankmap.job.rank_map_text import rank_columns, split_written
from rankmap.job.spec import DIMS, JobSpec
from rankmap.job.spec_file import job_from_data, job_to_dict
from rankmap.names import host_identity, name_problem
from rankmap.topology.hostnames import check_hostname
from rankmap.topology.model import Cluster

__all__ = ["RankMap", "SCHEMA", "read_rankmap", "parse_rankmap", "write_plan_files", "rankmap_to_json",
           "rankmap_json_chunks", "hostfile_text"]

_ENTRY_KEYS = ("rank", "host", "node_rank", "local_rank", "tor_group", "rail") + DIMS


@dataclass(frozen=True)
class RankMap:
    """A placed job.

    Attributes
    ----------
    job : JobSpec
        The job, dp resolved.
    cluster_name, cluster_hash : str
        The cluster it was planned on (see ``Cluster.spec_hash``).
    hosts : tuple of str
        Host of each node rank (``hosts[node_rank]``).
    tor_groups : tuple of str
        ToR group of each node rank.
    rails : tuple of tuple of int
        ``rails[node_rank][local_rank]``: rail (NIC) that GPU uses; ``len(rails[n])`` is the
        number of ranks on node n.
    nproc_per_node : int
        Ranks per host (G): the same on every host, except in maps of hosts with different
        GPU counts, where it is the largest and ``nprocs`` gives each node's.
    summary : dict
        Plan metrics written alongside (informational).
    """

    job: JobSpec
    cluster_name: str
    cluster_hash: str
    hosts: tuple
    tor_groups: tuple
    rails: tuple
    nproc_per_node: int
    summary: dict = field(default_factory=dict, compare=False)
    source: str = field(default="rankmap.json", compare=False)
    # What the plan was told besides the cluster and the job (hosts excluded and reserved, as
    # hostlists), so that `rankmap replan` keeps honouring it.
    context: dict = field(default_factory=dict, compare=False)

    @cached_property
    def nprocs(self) -> tuple:
        """Ranks on each node rank (computed once: loops over nodes index it)."""
        return tuple(len(r) for r in self.rails)

    @property
    def uniform(self) -> bool:
        """Every node runs ``nproc_per_node`` ranks (rank = node_rank * G + local_rank)."""
        return all(n == self.nproc_per_node for n in self.nprocs)

    @cached_property
    def offsets(self) -> np.ndarray:
        """``offsets[N+1]``: first global rank of each node rank (launchers number ranks so)."""
        return np.concatenate([[0], np.cumsum(self.nprocs)])

    @property
    def world_size(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def rank_node(self) -> np.ndarray:
        """``rank_node[W]``: node rank of each global rank."""
        return np.repeat(np.arange(len(self.hosts)), self.nprocs)

    @cached_property
    def layout(self) -> ParallelLayout:
        return ParallelLayout.of(self.job)

    def entry(self, rank: int) -> dict:
        """The ``ranks[rank]`` record of rankmap.json."""
        node = int(self.rank_node[rank])
        local = rank - int(self.offsets[node])
        rec = {"rank": rank, "host": self.hosts[node], "node_rank": node, "local_rank": local,
               "tor_group": self.tor_groups[node], "rail": self.rails[node][local]}
        rec.update(self.layout.coords(rank))
        return rec

    @classmethod
    def from_hosts(cls, job: JobSpec, cluster: Cluster, hosts: list[str], nproc_per_node: int,
                   summary: dict | None = None, nprocs: list[int] | None = None) -> "RankMap":
        """Build the map that launching ``hosts`` in this order gives (``nprocs[n]`` ranks on
        node n; default ``nproc_per_node`` on every node)."""
        hs = [cluster.host(h) for h in hosts]
        counts = nprocs or [nproc_per_node] * len(hs)
        shapes: dict = {}            # one rails tuple per (GPUs, NICs, ranks) shape, shared by its hosts
        rails = tuple(shapes.get((h.gpus, h.nics, n)) or shapes.setdefault(
            (h.gpus, h.nics, n), tuple(h.rail_of_gpu(lr) for lr in range(n))) for h, n in zip(hs, counts))
        return cls(job=job, cluster_name=cluster.name, cluster_hash=cluster.spec_hash(), hosts=tuple(hosts),
                   tor_groups=tuple(h.tor_group for h in hs), rails=rails, nproc_per_node=max(counts),
                   summary=dict(summary or {}))

    def verify_cluster(self, cluster: Cluster, source: str | None = None) -> None:
        """Check the map belongs to ``cluster``: same spec hash, hosts present, GPUs enough.

        Raises
        ------
        RankMapFileError
            The map was made for another cluster (its hash, or its name, differs: the hash
            covers the name, so a name edited in the map is caught too) or names a host the
            cluster lacks.
        """
        source = source or self.source
        if self.cluster_hash == cluster.spec_hash() and self.cluster_name != cluster.name:
            raise RankMapFileError(f"rank map names cluster {self.cluster_name!r}, but its sha256 is that of "
                                   f"{cluster.name!r}: the map was edited", source=source, key="cluster.name")
        if self.cluster_hash != cluster.spec_hash():
            raise RankMapFileError(f"rank map was made for cluster {self.cluster_name!r} "
                               f"(sha256 {self.cluster_hash[:12]}...), not for {cluster.name!r} "
                               f"(sha256 {cluster.spec_hash()[:12]}...)", source=source, key="cluster.sha256")
        for node, name in enumerate(self.hosts):
            if not cluster.has_host(name):
                raise RankMapFileError(f"host {name!r} is not in the cluster", source=source, key="ranks")
            host = cluster.host(name)
            rails = tuple(host.rail_of_gpu(lr) for lr in range(min(host.gpus, self.nprocs[node])))
            if rails != tuple(self.rails[node]):
                raise RankMapFileError(f"host {name!r}: the map's rails {list(self.rails[node])} are not the cluster's "
                                   f"{list(rails)}", source=source, key="ranks")
            if host.gpus < self.nprocs[node] or host.tor_group != self.tor_groups[node]:
                raise RankMapFileError(f"host {name!r} does not match the cluster (GPUs {host.gpus}, "
                                   f"ToR group {host.tor_group!r})", source=source, key="ranks")


def rankmap_to_json(rm: RankMap) -> str:
    """Serialise a rank map; one rank per line, keys in a fixed order (byte-stable)."""
    return "".join(rankmap_json_chunks(rm))


def rankmap_json_chunks(rm: RankMap, ranks_per_chunk: int = 32768) -> Iterator[str]:
    """The text of :func:`rankmap_to_json` in pieces of about ``ranks_per_chunk`` ranks (~4 MB),
    so that writing the map of 10^6 ranks never holds the whole text (~130 MB) at once.

    The rank lines are formatted from columns (node rank, local rank, rail and the parallel
    coordinates of every rank, as arrays) rather than one dict per rank; they read as
    ``json.dumps`` of :meth:`RankMap.entry` with keys in :data:`_ENTRY_KEYS` order.
    """
    head = {
        "schema": SCHEMA,
        "cluster": {"name": rm.cluster_name, "sha256": rm.cluster_hash},
        "job": job_to_dict(rm.job),
        "world_size": rm.world_size,
        "nproc_per_node": rm.nproc_per_node,
        **({} if rm.uniform else {"nprocs": list(rm.nprocs)}),
        "num_nodes": len(rm.hosts),
        "summary": rm.summary,
        **({"context": rm.context} if rm.context else {}),
    }
    yield "{\n" + "".join(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)},\n"
                           for key, value in head.items()) + '  "ranks": [\n'
    # per node: the text between "host": and "local_rank": and that between "tor_group": and "rail":
    host_part = [f"{json.dumps(h)}, \"node_rank\": {n}" for n, h in enumerate(rm.hosts)]
    tor_part = [json.dumps(t) for t in rm.tor_groups]
    node = rm.rank_node
    local = np.arange(rm.world_size) - rm.offsets[node]
    rail = np.fromiter((r for node_rails in rm.rails for r in node_rails), dtype=np.int64, count=rm.world_size)
    coords = rm.layout.coord_table                                      # [W, 5]: columns COORD
    columns = [COORD[d] for d in DIMS]                                  # in the order the lines print them
    line = ('    {"rank": %d, "host": %s, "local_rank": %d, "tor_group": %s, "rail": %d, '
            '"tp": %d, "cp": %d, "ep": %d, "dp": %d, "pp": %d}')
    for first in range(0, rm.world_size, ranks_per_chunk):
        cut = slice(first, min(first + ranks_per_chunk, rm.world_size))
        nodes = node[cut].tolist()
        fields = (range(cut.start, cut.stop), map(host_part.__getitem__, nodes), local[cut].tolist(),
                  map(tor_part.__getitem__, nodes), rail[cut].tolist(), *coords[cut][:, columns].T.tolist())
        yield ("" if first == 0 else ",\n") + ",\n".join(map(line.__mod__, zip(*fields)))
    yield "\n  ]\n}\n"


def hostfile_text(rm: RankMap) -> str:
    """One host per line in node-rank order; ``host slots=N`` (DeepSpeed / Open MPI syntax)
    when hosts run different numbers of ranks."""
    if rm.uniform:
        return "".join(h + "\n" for h in rm.hosts)
    return "".join(f"{h} slots={n}\n" for h, n in zip(rm.hosts, rm.nprocs))


def write_plan_files(rm: RankMap, out_dir: str | Path, extra: dict | None = None, *, remove: tuple[str, ...] = (),
                     before_commit=None) -> list[Path]:
    """Write ``rankmap.json`` and ``hostfile`` (and ``extra``, ``{name: text or bytes}``, e.g. the
    plan's picture) into ``out_dir`` atomically (all or none); returns the paths, rankmap.json first.

    ``remove``: stale files of an earlier plan to delete in the same commit (``plan.png`` when
    this plan draws none). ``before_commit(paths)``: called with the paths (rankmap.json first)
    once all are staged, before any is renamed; if it raises, nothing is written
    (:func:`rankmap.fileio.atomic_write_files`)."""
    def ready(paths: list[Path]) -> None:
        if before_commit is not None:
            before_commit([paths[-1], *paths[:-1]])

    # rankmap.json last: it names its hosts, so a hostfile beside it can always be checked against it
    written = atomic_write_files(out_dir, {"hostfile": hostfile_text(rm), **(extra or {}),
                                           "rankmap.json": rankmap_json_chunks(rm)}, remove=remove, before_commit=ready)
    return [written[-1], *written[:-1]]


def read_rankmap(path: str | Path) -> RankMap:
    """Read and validate ``rankmap.json``.

    Checks the rules of ``docs/rankmap.schema.json`` (:mod:`rankmap.job.rank_map_schema`), that every rank 0..W-1 appears once, every (host, local rank) once,
    node ranks and hosts agree, ``rank = node_rank * G + local_rank``, and that each rank's
    parallel coordinates are those the job's order string gives.

    Raises
    ------
    RankMapFileError
        Naming the file and the offending key (e.g. ``ranks[17].host``).
    """
    source = str(path)
    try:
        data = read_bytes(path, limit=rank_map_limit())
        rm = _parse_written(data, source)   # no decoded copy of the whole file (130 MB at 800k ranks)
        if rm is not None:
            return rm
        text = decode_text(data, source)
    except SpecError as exc:
        raise RankMapFileError(exc.message, source=exc.source, line=exc.line) from None
    del data
    return _parse_whole(text, source)


#: Bytes a rank map may take per host the cluster may hold (a rank's entry is ~165 bytes; 16
#: ranks per host fit), so that a map of :data:`~rankmap.names.MAX_HOSTS` hosts is readable.
RANK_MAP_BYTES_PER_HOST = 4096


def rank_map_limit() -> int:
    """Largest rank map read, in bytes: ``RANKMAP_MAX_INPUT_BYTES`` when set, else the larger of
    the input limit (64 MiB) and :data:`RANK_MAP_BYTES_PER_HOST` per host of ``RANKMAP_MAX_HOSTS``
    (256 MiB at the default 65,536 hosts): ``rankmap plan`` on 100,000 hosts (800k ranks) writes
    a 130 MB map that verify, launch and replan must read back."""
    if os.environ.get("RANKMAP_MAX_INPUT_BYTES"):
        return MAX_INPUT_BYTES
    return max(MAX_INPUT_BYTES, RANK_MAP_BYTES_PER_HOST * names.MAX_HOSTS)


def parse_rankmap(text: str, source: str = "<string>") -> RankMap:
    """Parse and validate rank map JSON text; see :func:`read_rankmap`.

    A map as :func:`rankmap_json_chunks` writes it is read rank lines to columns
    (:mod:`rankmap.job.rank_map_text`: no dict per rank, ~1/3 of the memory at 10^6 ranks);
    any other text, and any map that breaks a rule, is parsed whole, so that the error
    names the first faulty entry as before."""
    return _parse_written(text, source) or _parse_whole(text, source)


def _parse_written(text: str | bytes, source: str) -> RankMap | None:
    """The map of a text (or the file's bytes) as :func:`rankmap_json_chunks` writes it, read
    rank lines to columns; None when the text is otherwise or breaks any rule."""
    written = split_written(text)
    if written is None:
        return None
    head, start, stop = written
    try:
        doc = parse_json(head if isinstance(head, str) else decode_text(head, source), source)
        columns = rank_columns(text, start, stop) if isinstance(doc, dict) and doc.get("ranks") == [] else None
    except SpecError:
        return None
    if columns is None:
        return None
    doc["ranks"] = [columns]            # for the schema's rule: a non-empty list
    try:
        return _from_document(doc, source, columns)
    except RankMapFileError:
        return None                     # said again by the full parse, naming the entry


def _parse_whole(text: str, source: str) -> RankMap:
    try:
        doc = parse_json(text, source)  # strict: duplicate keys, huge integers, deep nesting refused
    except SpecError as exc:
        raise RankMapFileError(f"not a JSON rank map: {exc.message}", source=source, line=exc.line) from None
    return _from_document(doc, source)


def _from_document(doc, source: str, columns: dict | None = None) -> RankMap:
    """The rank map of a parsed document: of its ``ranks`` entries, or (when given) of the
    ``columns`` of :func:`~rankmap.job.rank_map_text.rank_columns`, checked as a whole."""
    check_document(doc, source)  # the rules of docs/rankmap.schema.json
    for key in ("world_size", "nproc_per_node", "num_nodes"):  # 64.0 is 64, as for the schema
        doc[key] = as_int(doc[key])
    if isinstance(doc.get("nprocs"), list):
        doc["nprocs"] = [as_int(n) for n in doc["nprocs"]]
    try:
        job = job_from_data(job_ints(doc.get("job")), source + " (job)")  # "tp": 8.0 is 8, as for the schema
        g = doc["nproc_per_node"]
        nprocs = doc.get("nprocs")
        ranks = doc["ranks"]
        cluster = doc["cluster"]
        name, digest = cluster["name"], cluster["sha256"]
    except SpecError as exc:
        raise RankMapFileError(exc.message, source=source, key=f"job.{exc.key}" if exc.key else "job") from None
    except (KeyError, TypeError) as exc:
        raise RankMapFileError(f"missing or bad key {exc}", source=source) from None
    if job.dp is None or not isinstance(g, int) or g < 1 or not isinstance(ranks, list):
        raise RankMapFileError("needs a resolved dp, nproc_per_node >= 1 and a ranks list", source=source)
    if doc.get("world_size") != job.world_size:
        raise RankMapFileError(f"world_size {doc.get('world_size')!r} is not the job's {job.world_size}", source=source,
                           key="world_size")
    if nprocs is None:
        if job.world_size % g:
            raise RankMapFileError(f"world size {job.world_size} is not a multiple of nproc_per_node {g}", source=source)
        nprocs = [g] * (job.world_size // g)
    elif (not isinstance(nprocs, list) or not all(isinstance(n, int) and 1 <= n <= g for n in nprocs)
          or sum(nprocs) != job.world_size):
        raise RankMapFileError(f"nprocs must list ranks per node (1..{g}) summing to {job.world_size}",
                           source=source, key="nprocs")
    if doc["num_nodes"] != len(nprocs):
        raise RankMapFileError(f"num_nodes {doc['num_nodes']} is not the {len(nprocs)} nodes the ranks use",
                               source=source, key="num_nodes")
    context = doc.get("context") or {}
    if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
        raise RankMapFileError("context must map names to hostlists", source=source, key="context")
    if columns is not None:
        rm = _from_columns(job, name, digest, nprocs, columns, doc.get("summary") or {}, source)
    else:
        rm = _from_entries(job, name, digest, nprocs, ranks, doc.get("summary") or {}, source)
    return dataclasses.replace(rm, context=context) if context else rm


def _from_columns(job: JobSpec, name: str, digest: str, nprocs: list, columns: dict, summary: dict,
                  source: str) -> RankMap:
    """:func:`_from_entries` of a map read as columns; RankMapFileError (unworded) when any rule fails."""
    fast = None
    if len(columns["rank"]) == job.world_size:
        fast = checked_columns(columns, nprocs, ParallelLayout.of(job))
    if fast is None:
        raise RankMapFileError("breaks a rule", source=source)      # the full parse says which
    hosts, tors, rails = fast
    rm = RankMap(job=job, cluster_name=name, cluster_hash=digest, hosts=hosts, tor_groups=tors, rails=rails,
                 nproc_per_node=max(nprocs), summary=summary, source=source)
    _check_groups(rm, source)
    return rm


def _from_entries(job: JobSpec, name: str, digest: str, nprocs: list, ranks: list, summary: dict,
                  source: str) -> RankMap:
    world = job.world_size
    if len(ranks) != world:
        raise RankMapFileError(f"{len(ranks)} ranks listed, the job has {world}", source=source, key="ranks")
    layout = ParallelLayout.of(job)
    fast = columns_of_entries(ranks, nprocs, layout, _ENTRY_KEYS)    # all rules at once, on columns
    if fast is not None:
        hosts, tors, rails = fast
        rm = RankMap(job=job, cluster_name=name, cluster_hash=digest, hosts=hosts, tor_groups=tors, rails=rails,
                     nproc_per_node=max(nprocs), summary=summary, source=source)
        _check_groups(rm, source)
        return rm
    # some rule fails: check entry by entry, to name the first entry that breaks it
    n_nodes = len(nprocs)
    offsets = np.concatenate([[0], np.cumsum(nprocs)]).tolist()
    hosts: list = [None] * n_nodes
    tors: list = [None] * n_nodes
    rails = [[None] * n for n in nprocs]
    seen_rank: set = set()
    seen_gpu: set = set()
    node_of_host: dict = {}
    for i, rec in enumerate(ranks):
        key = f"ranks[{i}]"
        if not isinstance(rec, dict) or set(rec) != set(_ENTRY_KEYS):
            raise RankMapFileError(f"entry must have exactly the keys {', '.join(_ENTRY_KEYS)}", source=source, key=key)
        ints = [k for k in _ENTRY_KEYS if k not in ("host", "tor_group")]
        rec = {k: as_int(v) if k in ints else v for k, v in rec.items()}  # "rail": 1.0 is rail 1, as for the schema
        bad = next((k for k in ints if not isinstance(rec[k], int) or isinstance(rec[k], bool) or rec[k] < 0), None)
        if bad is not None:
            value = json.dumps(rec[bad])[:60]   # as the file wrote it: true, "3", -1
            raise RankMapFileError(f"must be an integer >= 0 (as rank, node_rank, local_rank, rail and coordinates "
                                   f"all are), got {value}", source=source, key=f"{key}.{bad}")
        r, host, node, local = rec["rank"], rec["host"], rec["node_rank"], rec["local_rank"]
        why = check_hostname(host) if isinstance(host, str) else "not a string"
        if why:
            raise RankMapFileError(f"bad host {host[:60] if isinstance(host, str) else host!r}: {why}", source=source,
                                   key=f"{key}.host")
        why = name_problem(rec["tor_group"], "ToR group name")
        if why:
            raise RankMapFileError(why, source=source, key=f"{key}.tor_group")
        if r >= world or r in seen_rank:
            raise RankMapFileError(f"rank {r} is out of range or listed twice", source=source, key=f"{key}.rank")
        if (host, local) in seen_gpu:
            raise RankMapFileError(f"GPU {local} of host {host!r} is given two ranks", source=source,
                               key=f"{key}.local_rank")
        seen_rank.add(r)
        seen_gpu.add((host, local))
        if node >= n_nodes or local >= nprocs[node] or offsets[node] + local != r:
            raise RankMapFileError(f"rank {r} must be the ranks before its node plus its local_rank, got node_rank "
                               f"{node}, local_rank {local}", source=source, key=key)
        if node_of_host.setdefault(host_identity(host), node) != node or hosts[node] not in (None, host):
            raise RankMapFileError(f"node rank {node} and host {host!r} disagree with earlier entries",
                               source=source, key=f"{key}.host")
        if tors[node] not in (None, rec["tor_group"]):
            raise RankMapFileError(f"ranks on host {host!r} name ToR groups {tors[node]!r} and {rec['tor_group']!r}",
                               source=source, key=f"{key}.tor_group")
        hosts[node], tors[node], rails[node][local] = host, rec["tor_group"], rec["rail"]
        want = layout.coords(r)
        got = {d: rec[d] for d in DIMS}
        if got != want:
            raise RankMapFileError(f"rank {r} has coordinates {got}, the job's order {job.order!r} gives {want}",
                               source=source, key=key)
    rm = RankMap(job=job, cluster_name=name, cluster_hash=digest, hosts=tuple(hosts), tor_groups=tuple(tors),
                 rails=tuple(tuple(r) for r in rails), nproc_per_node=max(nprocs), summary=summary, source=source)
    _check_groups(rm, source)
    return rm


def _check_groups(rm: RankMap, source: str) -> None:
    """TP groups inside hosts; on equal hosts, every inter-host group rail-aligned."""
    from rankmap.job.traffic import alignment_problems, job_traffic

    local = np.arange(rm.world_size) - rm.offsets[rm.rank_node]
    problems = alignment_problems(rm.layout, job_traffic(rm.job), rm.rank_node, local, limit=1)
    if not rm.uniform:
        problems = [p for p in problems if p.startswith("TP group")]
    if problems:
        raise RankMapFileError(f"the map breaks the placement rules: {problems[0]}", source=source, key="ranks")
