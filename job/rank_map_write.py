"""Writing a rank map: ``rankmap.json`` (byte-stable, streamed in pieces) and the ``hostfile``.

The format is described in :mod:`rankmap.job.rank_map`; every write is atomic
(:func:`rankmap.fileio.atomic_write_files`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np

from rankmap.fileio import atomic_write_files
from rankmap.job.layout import COORD
from rankmap.job.rank_map_model import RankMap
from rankmap.job.rank_map_schema import SCHEMA
from rankmap.job.spec import DIMS
from rankmap.job.spec_file import job_to_dict

__all__ = ["rankmap_to_json", "rankmap_json_chunks", "hostfile_text", "write_plan_files"]


def rankmap_to_json(rm: RankMap) -> str:
    """Serialise a rank map; one rank per line, keys in a fixed order (byte-stable)."""
    return "".join(rankmap_json_chunks(rm))


def rankmap_json_chunks(rm: RankMap, ranks_per_chunk: int = 32768) -> Iterator[str]:
    """The text of :func:`rankmap_to_json` in pieces of about ``ranks_per_chunk`` ranks (~4 MB),
    so that writing the map of 10^6 ranks never holds the whole text (~130 MB) at once.

    The rank lines are formatted from columns (node rank, local rank, rail and the parallel
    coordinates of every rank, as arrays) rather than one dict per rank; they read as
    ``json.dumps`` of :meth:`RankMap.entry` with keys in :data:`~rankmap.job.rank_map_model.ENTRY_KEYS` order.
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
