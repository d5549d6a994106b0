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

The code is split by topic; every name below is importable from here:

- :mod:`rankmap.job.rank_map_model` -- :class:`RankMap`, the placed job;
- :mod:`rankmap.job.rank_map_write` -- ``rankmap.json`` (streamed) and the ``hostfile``;
- :mod:`rankmap.job.rank_map_read` -- reading ``rankmap.json`` back, every rule checked;
- :mod:`rankmap.job.rank_map_schema`, :mod:`rankmap.job.rank_map_text`,
  :mod:`rankmap.job.rank_map_columns` -- the schema's rules, and reading written rank lines
  to columns.
"""

from __future__ import annotations

from rankmap.job.rank_map_model import ENTRY_KEYS, RankMap
from rankmap.job.rank_map_read import RANK_MAP_BYTES_PER_HOST, parse_rankmap, rank_map_limit, read_rankmap
from rankmap.job.rank_map_schema import SCHEMA
from rankmap.job.rank_map_write import hostfile_text, rankmap_json_chunks, rankmap_to_json, write_plan_files

__all__ = ["RankMap", "SCHEMA", "read_rankmap", "parse_rankmap", "write_plan_files", "rankmap_to_json",
           "rankmap_json_chunks", "hostfile_text", "ENTRY_KEYS", "rank_map_limit", "RANK_MAP_BYTES_PER_HOST"]
