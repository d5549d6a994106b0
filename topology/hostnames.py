"""Hostnames and Slurm hostlist expressions.

Expansion and compression use python-hostlist (the library Slurm sites use for the
same syntax); this module only adds checks and error messages.
"""

from __future__ import annotations

import functools
import re

import hostlist

from rankmap.errors import SpecError
from rankmap.names import MAX_NAME_CHARS, charge_hosts, host_identity, host_problem

__all__ = ["expand_hostlist", "compress_hostlist", "check_hostname", "natural_key"]



def check_hostname(name: str) -> str | None:
    """Return why ``name`` is neither an RFC 1123 hostname nor a canonical IP address, or None
    (the grammar of :func:`rankmap.names.host_problem`).

    Names that pass contain only letters, digits, '-', '.' (and ':' in IPv6 addresses),
    so they are safe in generated shell scripts even before quoting.

    Examples
    --------
    >>> check_hostname("ip-10-0-3-17") is None, check_hostname("10.0.0.30") is None
    (True, True)
    >>> check_hostname("fd00::12") is None
    True
    >>> check_hostname("a;rm -rf ~")
    "character ';' is not allowed in a hostname (RFC 1123)"
    >>> check_hostname("$(id)")
    "character '$' is not allowed in a hostname (RFC 1123)"
    """
    return host_problem(name)


def expand_hostlist(expr: str, *, source: str | None = None, line: int | None = None,
                    key: str | None = None) -> list[str]:
    """Expand a Slurm hostlist expression, keeping order and zero padding.

    Parameters
    ----------
    expr : str
        e.g. ``"gpu[003,010-011],cpu1"``.
    source, line, key
        Where the expression came from, for error messages.

    Returns
    -------
    list of str
        Host names in expression order.

    Raises
    ------
    SpecError
        Bad syntax, a duplicate host, or a name that is not a valid hostname.

    Examples
    --------
    >>> expand_hostlist("n[0098-0100]")
    ['n0098', 'n0099', 'n0100']
    """
    if not isinstance(expr, str) or not expr.strip():
        raise SpecError(f"expected a hostlist expression, got {_short(expr)}", source=source, line=line, key=key)
    try:
        names = hostlist.expand_hostlist(expr.strip(), allow_duplicates=True)
    except hostlist.BadHostlist as exc:
        raise SpecError(f"bad hostlist {_short(expr)}: {exc}", source=source, line=line, key=key) from None
    charge_hosts(len(names), source=source, line=line, key=key)
    seen: set[str] = set()
    for name in names:
        why = check_hostname(name)
        if why:
            raise SpecError(f"bad host {_short(name)} in hostlist {_short(expr)}: {why}", source=source, line=line,
                            key=key)
        if host_identity(name) in seen:
            raise SpecError(f"host {name!r} appears twice in hostlist {_short(expr)} (host names ignore case)",
                            source=source, line=line, key=key)
        seen.add(host_identity(name))
    return names


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_NAME_CHARS else text[:MAX_NAME_CHARS - 3] + "..."


def compress_hostlist(names: list[str]) -> str:
    """Compress host names into a hostlist expression that expands back to the same set.

    Zero padding is kept and no host is invented (python-hostlist keeps ``k010`` and
    ``k10`` apart). The expression lists hosts in natural order. Text after a bracket may
    result (``n[1-2]-ib``), which Slurm reads only since 23.02.5: files for Slurm use
    :func:`rankmap.topology.slurmconf.compress_names` instead.

    Examples
    --------
    >>> compress_hostlist(["srv-007", "srv-008"])
    'srv-[007-008]'
    """
    if not names:
        return ""
    return hostlist.collect_hostlist(list(names))


@functools.lru_cache(maxsize=1 << 18)
def natural_key(name: str) -> tuple:
    """Sort key that orders digit runs by value: node7 < node8 < node66 < node70.

    Text and digit runs alternate (``("node", 7, "")``), so keys of any two names compare.
    The planner sorts the same hosts many times over (the spec hash, each baseline, each
    tier's domains): keys are cached, up to 2^18 names (~45 MB at most, ~18 MB for 10^5 hosts).

    Examples
    --------
    >>> sorted(["node70", "node8", "node66", "node7"], key=natural_key)
    ['node7', 'node8', 'node66', 'node70']
    >>> natural_key("ip-10-2-3")
    ('ip-', 10, '-', 2, '-', 3, '')
    """
    parts = _DIGIT_RUNS.split(name)                  # text, digits, text, ..., text
    parts[1::2] = map(int, parts[1::2])
    return tuple(parts)


_DIGIT_RUNS = re.compile(r"(\d+)")
