"""Errors of the training engine and its launchers.

Every error derives from :class:`topology.errors.RankmapError`, so the command line prints
one line and exits with code 3 (bad input) without a traceback.
"""

from __future__ import annotations

from topology.errors import RankmapError

__all__ = ["EngineError", "LaunchError", "PlacementMismatch"]


class EngineError(RankmapError):
    """The engine cannot run as configured (bad config, unsupported layout, ...)."""


class LaunchError(RankmapError):
    """A launch file cannot be generated or read (bad or unresolvable host, bad line, ...)."""


class PlacementMismatch(EngineError):
    """The processes did not start where the rank map puts them (raised on every rank alike)."""
