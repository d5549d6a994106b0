"""rankmap's Python API: every command's work as a function (the command line only parses and prints).

::

    from rankmap.api import load_cluster, load_job, plan, write_plan_files
    result = plan(load_cluster("cluster.yaml"), load_job("job.yaml"))
    write_plan_files(result.rankmap, "plan/")

Functions: :func:`plan`, :func:`replan`, :func:`verify`, :func:`simulate`, :func:`diagnose`,
:func:`launch_files`, :func:`launch_local`, :func:`topo_import`, :func:`topo_show`, :func:`topo_export`. Each takes data (or paths) and returns data;
only :func:`write_plan_files` and :func:`launch_local` touch the file system or start processes.
Heavy modules (the CP-SAT solver, the simulator, matplotlib) are imported when first used.
The functions live by topic in :mod:`~rankmap.api.planning`, :mod:`~rankmap.api.simulation`,
:mod:`~rankmap.api.diagnosis`, :mod:`~rankmap.api.running` and :mod:`~rankmap.api.topo`.
Errors are :class:`rankmap.errors.RankmapError` subclasses, with the exit code the CLI uses.
"""

from __future__ import annotations

from rankmap.api.diagnosis import DiagnosisRun, diagnose
from rankmap.api.planning import (
                                  OVERRIDE_FLAGS,
                                  blame_flags,
                                  busy_hosts,
                                  combine_constraints,
                                  load_job,
                                  plan,
                                  plan_context,
                                  plan_picture,
                                  replan,
                                  verify,
)
from rankmap.api.running import allocation_files, check_engine_run, framework_flags, launch_files, launch_local
from rankmap.api.simulation import SimulationRun, simulate
from rankmap.api.topo import topo_export, topo_import, topo_show
from rankmap.job.rank_map import RankMap, read_rankmap, write_plan_files
from rankmap.job.spec import JobSpec
from rankmap.job.spec_file import parse_job
from rankmap.placement.constraints import PlacementConstraints, load_constraints
from rankmap.placement.host_selection import own_allocation, read_host_names, select_hosts
from rankmap.topology.model import Cluster
from rankmap.topology.spec import load_cluster, parse_cluster

__all__ = ["Cluster", "JobSpec", "RankMap", "PlacementConstraints",
           "load_cluster", "parse_cluster", "load_job", "parse_job", "load_constraints", "read_rankmap",
           "write_plan_files", "combine_constraints", "read_host_names", "select_hosts", "own_allocation",
           "plan", "replan", "verify", "simulate", "SimulationRun", "diagnose", "DiagnosisRun",
           "launch_files", "launch_local", "allocation_files", "framework_flags", "check_engine_run", "topo_import", "topo_show", "topo_export",
           "OVERRIDE_FLAGS", "blame_flags", "plan_context", "busy_hosts", "plan_picture"]
