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

import os as _os
import signal as _signal
import sys as _sys

__version__ = "0.1.0"


def _started_as_command() -> bool:
    """This process is the ``rankmap`` command (console script or ``python -m rankmap``)."""
    argv = getattr(_sys, "orig_argv", _sys.argv)
    as_module = any(a == "-m" and b == "rankmap" for a, b in zip(argv, argv[1:]))
    return as_module or _os.path.basename(_sys.argv[0] if _sys.argv else "") == "rankmap"


def _interrupted_while_starting(signum, frame) -> None:
    """Ctrl-C before the command runs (while modules load): nothing is written yet, so say so
    and leave at once, without a traceback; :func:`rankmap.cli.main` takes over from here.

    Before this module runs, Python's own handler applies: Ctrl-C in the interpreter's start-up
    (``site``: the ``.pth`` files, an editable install's finder; ~20-40 ms) prints its traceback
    and exits 1. A package cannot run code earlier except from a ``.pth`` file, which would run
    in every Python process of the environment; the console script is pip's, not ours."""
    _os.write(2, b"rankmap: interrupted\n")
    _os._exit(130)  # EXIT_INTERRUPTED (128 + SIGINT); the package's first import cannot load rankmap.errors


# The command line handles Ctrl-C from its very first instruction; a library user's handler is left alone.
if _started_as_command() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)

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
