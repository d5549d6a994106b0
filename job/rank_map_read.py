"""Reading a rank map: ``rankmap.json`` checked against every rule, errors naming the entry.

A map as :func:`rankmap.job.rank_map_write.rankmap_json_chunks` writes it is read rank lines
to columns (:mod:`rankmap.job.rank_map_text`, :mod:`rankmap.job.rank_map_columns`); any
other text, or a map that breaks a rule, is parsed whole and checked entry by entry, so
that the error names the first faulty entry. The format is described in
:mod:`rankmap.job.rank_map`, its JSON Schema rules in :mod:`rankmap.job.rank_map_schema`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import numpy as np

from rankmap import names
from rankmap.errors import RankMapFileError, SpecError
from rankmap.fileio import decode_text, parse_json, read_bytes
from rankmap.fileio.reading import MAX_INPUT_BYTES
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map_columns import checked_columns, columns_of_entries
from rankmap.job.rank_map_model import ENTRY_KEYS, RankMap
from rankmap.job.rank_map_schema import as_int, check_document, job_ints
from rankmap.job.rank_map_text import entry_line, inexact_number, rank_columns, split_written
from rankmap.job.spec import DIMS, JobSpec
from rankmap.job.spec_file import job_from_data
from rankmap.names import host_identity, name_problem
from rankmap.topology.hostnames import check_hostname

__all__ = ["read_rankmap", "parse_rankmap", "rank_map_limit", "RANK_MAP_BYTES_PER_HOST"]


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
    """The map of any JSON text, checked entry by entry; every error about an entry of ``ranks``
    names its line (:func:`~rankmap.job.rank_map_text.entry_line`)."""
    try:
        doc = parse_json(text, source)  # strict: duplicate keys, huge integers, deep nesting refused
    except SpecError as exc:
        raise RankMapFileError(f"not a JSON rank map: {exc.message}", source=source, line=exc.line) from None
    found = inexact_number(text)
    if found is not None:
        line, literal = found
        raise RankMapFileError(f"number {literal[:40]} reads as {float(literal):.0f} (binary64 rounds it) but is not "
                               f"that integer: write integers as integers", source=source, line=line)
    try:
        return _from_document(doc, source)
    except RankMapFileError as exc:
        entry = _ENTRY_KEY.match(exc.key or "")
        if exc.line is not None or entry is None:
            raise
        raise RankMapFileError(exc.message, source=exc.source, line=entry_line(text, int(entry.group(1))),
                               key=exc.key) from None


_ENTRY_KEY = re.compile(r"ranks\[(\d+)\]")


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
    fast = columns_of_entries(ranks, nprocs, layout, ENTRY_KEYS)    # all rules at once, on columns
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
        if not isinstance(rec, dict) or set(rec) != set(ENTRY_KEYS):
            raise RankMapFileError(f"entry must have exactly the keys {', '.join(ENTRY_KEYS)}", source=source, key=key)
        ints = [k for k in ENTRY_KEYS if k not in ("host", "tor_group")]
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
