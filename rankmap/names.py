"""One grammar per kind of name: hosts, and the names of ToR groups, switches, clusters and jobs.

Names travel from input files into shell scripts (sbatch headers, torchrun commands,
``mpirun.sh``), hostfiles, rankfiles and YAML/JSON outputs. Every name is checked here,
whole-string (``re.fullmatch``; a ``$`` anchor would let a trailing newline through),
before it reaches any of them, so a generated file never holds a character that a shell,
a hostfile reader or a YAML reader would give a meaning to.

Hosts
    An RFC 1123 host name (RFC 1123 §2.1: dot-separated labels of letters, digits and
    '-', 1-63 characters, not starting or ending with '-'; 253 characters in all; a last
    label of digits only is an address, not a name, RFC 3696 §2), or an IP address in its
    canonical form: dotted-decimal IPv4 (RFC 791) or compressed lower-case IPv6 without a
    zone id (RFC 5952 §4; a zone id, RFC 6874, may hold any character). The other
    spellings the resolver takes for one IPv4 address (``inet_aton(3)``: octal
    ``010.0.0.1``, hexadecimal ``0xa.0.0.1``, fewer parts ``10.1``, one integer
    ``167772161``) name the same machine as the canonical one and are refused with the
    canonical form in the message. Host names are case-insensitive (RFC 4343 §3):
    :func:`host_identity` is the key under which two spellings are one host.

Jobs
    As below, and also spaces (not at either end) and ``: + @ , ( )``: a job name is
    written for people; the sbatch header writes a sanitised copy, scripts quote it.

Groups, switches, clusters
    1-253 characters of letters, digits, '-', '_', '.', '/' and '#', starting with a
    letter, digit or '_' (the characters of Kubernetes label values and object names,
    joined by '/' into a domain path, and of Slurm switch names, where ``\\#`` writes a '#';
    slurm.conf(5)). None of these is special to a shell inside a word, and every YAML or
    JSON output goes through a safe serialiser that quotes what YAML would read otherwise.

Examples
--------
>>> host_problem("gpu-r1-n01") is None, host_problem("10.0.0.30") is None, host_problem("fd00::12") is None
(True, True, True)
>>> host_problem("fe80::1%eth0;id")
"character '%' is not allowed in an IPv6 address (no zone ids)"
>>> host_problem("010.0.0.1")
"'010.0.0.1' is another spelling of IPv4 address 8.0.0.1: write it as 8.0.0.1"
>>> host_problem("n1\\n")
"character '\\\\n' is not allowed in a hostname (RFC 1123)"
>>> name_problem("tg-00_a.1") is None, name_problem("a: b")
(True, "character ':' is not allowed in a name (letters, digits, '-', '_', '.', '/', '#')")
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from contextlib import contextmanager
from contextvars import ContextVar

from rankmap.errors import SpecError

__all__ = ["MAX_NAME_CHARS", "MAX_HOSTS", "is_ip_address", "host_problem", "name_problem", "host_identity", "check_host",
           "check_name", "host_budget", "charge_hosts", "regex_problem"]

#: Longest accepted name (RFC 1123's 253 characters for a host name); longer input is refused
#: before any name-specific work.
MAX_NAME_CHARS = 253

#: Most hosts one cluster, hostlist or hostfile may expand to; ``RANKMAP_MAX_HOSTS`` overrides it.
MAX_HOSTS = int(os.environ.get("RANKMAP_MAX_HOSTS", "65536"))

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_NUMERIC = re.compile(r"(?:0[xX][0-9A-Fa-f]*|[0-9]+)(?:\.(?:0[xX][0-9A-Fa-f]*|[0-9]+)){0,3}")
_IPV6_CHARS = re.compile(r"[0-9a-fA-F:.]{2,45}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./#-]{0,252}")
_JOB_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_ ./#:+@,()-]{0,251}[A-Za-z0-9_./#:+@,()-])?")


def _show(name: str) -> str:
    return repr(name) if len(name) <= 60 else repr(name[:57]) + "..."


def host_problem(name: object) -> str | None:
    """Why ``name`` is not a host name or canonical IP address (see the module doc), or None.

    Parameters
    ----------
    name : object
        The candidate; anything but a str is refused.

    Returns
    -------
    str or None
        A one-line reason, or None for a valid host.
    """
    if not isinstance(name, str) or not name:
        return "empty hostname" if name == "" else f"expected a hostname, got {type(name).__name__}"
    if len(name) > MAX_NAME_CHARS:
        return f"hostname longer than {MAX_NAME_CHARS} characters ({len(name)})"
    if ":" in name:
        return _ipv6_problem(name)
    for label in name.split("."):
        if not _LABEL.fullmatch(label):
            bad = next((c for c in label if not (c.isascii() and (c.isalnum() or c == "-"))), None)
            if bad is not None:
                return f"character {bad!r} is not allowed in a hostname (RFC 1123)"
            return f"label {_show(label)} must be 1-63 letters, digits or '-', not starting or ending with '-'"
    if _NUMERIC.fullmatch(name):
        try:
            canonical = socket.inet_ntoa(socket.inet_aton(name))
        except OSError:
            return f"{_show(name)} is neither a hostname nor an IPv4 address (a last label of digits only)"
        if canonical != name:
            return f"{_show(name)} is another spelling of IPv4 address {canonical}: write it as {canonical}"
    elif name.rsplit(".", 1)[-1].isdigit():
        return f"{_show(name)} is neither a hostname nor an IPv4 address (a last label of digits only)"
    return None


def _ipv6_problem(name: str) -> str | None:
    if not _IPV6_CHARS.fullmatch(name):
        bad = next((c for c in name if c not in "0123456789abcdefABCDEF:."), None)
        if bad is not None:
            return f"character {bad!r} is not allowed in an IPv6 address (no zone ids)"
        return f"{_show(name)} is not a valid IPv6 address"
    try:
        address = ipaddress.IPv6Address(name)
    except ValueError:
        return f"{_show(name)} is not a valid IPv6 address"
    if address.ipv4_mapped is not None:
        return f"{_show(name)} is IPv4 address {address.ipv4_mapped}: write it as {address.ipv4_mapped}"
    if address.compressed != name:
        return f"{_show(name)} is IPv6 address {address.compressed}: write it in that form (RFC 5952)"
    return None


def is_ip_address(text: str, version: int | None = None) -> bool:
    """Whether ``text`` is an IP address in any spelling :mod:`ipaddress` reads (``version``: 4, 6 or either).

    >>> is_ip_address("10.0.0.1"), is_ip_address("fe80::1", 6), is_ip_address("10.0.0.1", 6), is_ip_address("gpu1")
    (True, True, False, False)
    """
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return version is None or address.version == version


def host_identity(name: str) -> str:
    """The key under which two spellings of a valid host name are one host: lower case (RFC 4343).

    >>> host_identity("GPU-R1-N01") == host_identity("gpu-r1-n01")
    True
    """
    return name.lower()


def name_problem(name: object, kind: str = "name") -> str | None:
    """Why ``name`` is not a valid group/switch/tier/cluster/job name (see the module doc), or None."""
    if not isinstance(name, str) or not name:
        return f"empty {kind}" if name == "" else f"expected a {kind}, got {type(name).__name__}"
    if len(name) > MAX_NAME_CHARS:
        return f"{kind} longer than {MAX_NAME_CHARS} characters ({len(name)})"
    job = kind == "job name"
    if (_JOB_NAME if job else _NAME).fullmatch(name):
        return None
    extra = "_./#-" + (" :+@,()" if job else "")
    bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in extra))), None)
    if bad is not None:
        allowed = "letters, digits, '-', '_', '.', '/', '#'" + (", ' ', ':', '+', '@', ',', '(', ')'" if job else "")
        return f"character {bad!r} is not allowed in a {kind} ({allowed})"
    return f"{kind} {_show(name)} must start with a letter, digit or '_'" + (" and not end with a space" if job else "")


def check_host(name: object, *, source: str | None = None, line: int | None = None,
               key: str | None = None) -> str:
    """``name`` if it is a valid host (:func:`host_problem`); else SpecError naming source, line and key."""
    why = host_problem(name)
    if why:
        raise SpecError(f"bad host {_show(name) if isinstance(name, str) else repr(name)}: {why}",
                        source=source, line=line, key=key)
    return name


def check_name(name: object, kind: str = "name", *, source: str | None = None, line: int | None = None,
               key: str | None = None) -> str:
    """``name`` if it is valid for ``kind`` (:func:`name_problem`); else SpecError naming source, line and key."""
    why = name_problem(name, kind)
    if why:
        raise SpecError(f"bad {kind} {_show(name) if isinstance(name, str) else repr(name)}: {why}",
                        source=source, line=line, key=key)
    return name


_HOSTS_LEFT: ContextVar[list | None] = ContextVar("rankmap_hosts_left", default=None)


@contextmanager
def host_budget(limit: int | None = None):
    """Count the hosts every hostlist expanded inside this block against one limit
    (default :data:`MAX_HOSTS`), so that many small expressions cannot add up to millions
    of hosts. Nested blocks share the outermost budget."""
    if _HOSTS_LEFT.get() is not None:
        yield
        return
    token = _HOSTS_LEFT.set([MAX_HOSTS if limit is None else limit, MAX_HOSTS if limit is None else limit])
    try:
        yield
    finally:
        _HOSTS_LEFT.reset(token)


def charge_hosts(count: int, *, source: str | None = None, line: int | None = None, key: str | None = None) -> None:
    """Take ``count`` hosts from the current :func:`host_budget` (or from a fresh one of
    :data:`MAX_HOSTS` outside any); SpecError once the budget is spent."""
    budget = _HOSTS_LEFT.get() or [MAX_HOSTS, MAX_HOSTS]
    budget[0] -= count
    if budget[0] < 0:
        raise SpecError(f"more than {budget[1]} hosts (the limit; set RANKMAP_MAX_HOSTS to raise it)",
                        source=source, line=line, key=key)


#: Most variable-length repeats (``*``, ``+``, ``{m,n}``) one node-name pattern may hold:
#: k adjacent repeats over a name of n characters can backtrack O(n^k) times.
MAX_PATTERN_REPEATS = 2
MAX_PATTERN_CHARS = 1000


def regex_problem(pattern: str) -> str | None:
    """Why a node-name regular expression could backtrack for long (so is refused), or None.

    Python's ``re`` backtracks; Volcano matches ``regexMatch`` with Go's linear-time RE2
    engine (Go ``regexp`` package documentation), so a pattern such as ``(a+)+$`` is harmless
    there and takes minutes here. Refused: a repeat inside a repeat, an alternation inside a
    repeat, back-references, more than :data:`MAX_PATTERN_REPEATS` variable repeats, counted
    repeats over 1000, patterns over :data:`MAX_PATTERN_CHARS` characters. What remains
    searches a name of n characters in O(n^3) steps at most (2 ms for 253 characters).

    Examples
    --------
    >>> regex_problem("^node-[0-9]+$") is None, regex_problem("(gpu|cpu)[0-9]{1,3}") is None
    (True, True)
    >>> regex_problem("(a+)+$")
    'a repeat inside a repeat can take exponential time (nested quantifiers)'
    """
    import re._constants as c
    import re._parser as sre_parse

    if len(pattern) > MAX_PATTERN_CHARS:
        return f"pattern longer than {MAX_PATTERN_CHARS} characters"
    try:
        parsed = sre_parse.parse(pattern)
    except Exception as exc:  # re.error, RecursionError, OverflowError on absurd counts
        return f"not a regular expression: {exc}"
    repeats = [0]

    def walk(items, in_repeat: bool) -> str | None:
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                low, high, body = av
                varies = high != low
                if high != c.MAXREPEAT and high > 1000:
                    return f"a counted repeat of {high} (at most 1000)"
                if in_repeat and high > 1:
                    return "a repeat inside a repeat can take exponential time (nested quantifiers)"
                repeats[0] += varies
                why = walk(body, in_repeat or high > 1)
            elif op == c.SUBPATTERN:
                why = walk(av[-1], in_repeat)
            elif op == c.BRANCH:
                if in_repeat:
                    return "an alternation inside a repeat can take exponential time"
                why = next((w for w in (walk(b, in_repeat) for b in av[1]) if w), None)
            elif op in (c.GROUPREF, c.GROUPREF_EXISTS):
                return "back-references are not supported (Volcano's RE2 has none)"
            elif op in (c.ASSERT, c.ASSERT_NOT):
                why = walk(av[1], in_repeat)
            else:
                why = None
            if why:
                return why
        return None

    why = walk(parsed, False)
    if why is None and repeats[0] > MAX_PATTERN_REPEATS:
        why = f"{repeats[0]} variable repeats (at most {MAX_PATTERN_REPEATS}) can take polynomial time of high degree"
    return why
