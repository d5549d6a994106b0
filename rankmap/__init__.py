"""rankmap: plan rank placement for 3D-parallel LLM training on multi-rail clusters.

Public API (see :mod:`rankmap.api`)::

    import rankmap
    result = rankmap.plan(rankmap.load_cluster("cluster.yaml"), rankmap.load_job("job.yaml"))
    rankmap.write_plan_files(result.rankmap, "plan/")

``diagnose`` and ``launch`` are subpackages here; their command functions are
:func:`rankmap.api.diagnose`, :func:`rankmap.api.launch_files` and :func:`rankmap.api.launch_local`.
Importing ``rankmap`` loads nothing else until a name is used (and never torch).
"""

from __future__ import annotations

__version__ = "0.1.0"

_API = ("Cluster", "JobSpec", "RankMap", "PlacementConstraints", "load_cluster", "parse_cluster", "load_job",
        "parse_job", "load_constraints", "read_rankmap", "write_plan_files", "combine_constraints",
        "plan", "replan", "verify", "simulate")

__all__ = list(_API) + ["__version__"]


def __getattr__(name: str):
    if name in _API:
        from rankmap import api
        return getattr(api, name)
    raise AttributeError(f"module 'rankmap' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
