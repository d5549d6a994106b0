"""rankmap: plan rank placement for 3D-parallel LLM training on multi-rail clusters.

Public API::

    from rankmap import load_cluster, load_job, plan, replan, read_rankmap, write_plan_files
"""

from placement.job import JobSpec, load_job, parse_job
from placement.rankmap import RankMap, read_rankmap, write_plan_files
from topology import Cluster, load_cluster, parse_cluster

__all__ = ["Cluster", "JobSpec", "RankMap", "load_cluster", "parse_cluster", "load_job", "parse_job",
           "plan", "replan", "read_rankmap", "write_plan_files"]


def plan(cluster, job, **kwargs):
    """Place ``job`` on ``cluster``; see :func:`placement.plan.plan` (imports the solver lazily)."""
    from placement.plan import plan as _plan
    return _plan(cluster, job, **kwargs)


def replan(cluster, previous, failed, **kwargs):
    """Replace failed hosts in a rank map; see :func:`placement.replan.replan`."""
    from placement.replan import replan as _replan
    return _replan(cluster, previous, failed, **kwargs)
