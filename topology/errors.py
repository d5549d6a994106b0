"""Exceptions shared by every layer of rankmap.

Every error a user can cause derives from :class:`RankmapError`; the command line maps
each subclass to one line of text and a documented exit code, and shows a traceback
only with ``--debug``.
"""

from __future__ import annotations

__all__ = ["RankmapError", "SpecError", "TopologyError"]


class RankmapError(Exception):
    """Base class of every error caused by input or by an infeasible request."""

    exit_code = 3


class SpecError(RankmapError):
    """A specification file (or mapping) holds a bad key or value.

    Parameters
    ----------
    message : str
        What is wrong, in words.
    source : str, optional
        File name (or ``"<inline>"``) the value came from.
    line : int, optional
        1-based line of the offending key or value.
    key : str, optional
        Dotted key path, e.g. ``"links.tor_uplinks"``.

    Examples
    --------
    >>> str(SpecError("must be positive, got -1", source="c.yaml", line=4, key="links.nic_gbps"))
    'c.yaml:4: links.nic_gbps: must be positive, got -1'
    """

    def __init__(self, message: str, *, source: str | None = None,
                 line: int | None = None, key: str | None = None):
        self.message = message
        self.source = source
        self.line = line
        self.key = key
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.source:
            where = self.source + (f":{self.line}" if self.line else "") + ": "
        key = f"{self.key}: " if self.key else ""
        return f"{where}{key}{self.message}"


class TopologyError(RankmapError):
    """A cluster model is inconsistent (duplicate host, host in two ToR groups, ...)."""
