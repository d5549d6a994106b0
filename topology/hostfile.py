"""Hostfiles (DeepSpeed, Open MPI, MPICH, bare names) -> a flat Cluster.

One host a line, with its GPU count as the launcher knows it::

    worker-a slots=8          # DeepSpeed and Open MPI
    worker-b slots=2 max_slots=2
    worker-c:4                # MPICH
    worker-d                  # bare name: ImportOptions.gpus GPUs

A hostfile says nothing about switches, so every host lands in one ToR group, ``flat``.
A line that cannot be read is an error naming its line and token (``worker-e lots=8``
is not skipped); a last line without a newline is fine.
"""

from __future__ import annotations

import re

from rankmap.errors import SpecError
from rankmap.topology.hostnames import check_hostname
from rankmap.topology.sources import Diagnostics, ImportOptions, ImportResult, Leaf, build_cluster, file_stem

__all__ = ["parse_hostfile", "FLAT_GROUP"]

FLAT_GROUP = "flat"
_ATTRS = {"slots": "slots", "max_slots": "max_slots", "max-slots": "max_slots"}
_COLON = re.compile(r"^([^:\s]+):(\S*)$")


def parse_hostfile(text: str, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Read a hostfile into one ToR group of hosts with their slot (GPU) counts.

    Raises
    ------
    SpecError
        ``FILE:LINE: token: what is wrong`` for an unknown attribute, a bad count, a bad
        or repeated host name, or a file without hosts.

    Examples
    --------
    >>> r = parse_hostfile("# gpus\\nworker-a slots=8\\nworker-b slots=2\\nworker-c", "hosts")
    >>> [(h.name, h.gpus) for h in r.cluster.hosts]
    [('worker-a', 8), ('worker-b', 2), ('worker-c', 8)]
    >>> parse_hostfile("worker-e lots=8", "hosts")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: hosts:1: lots=8: unknown attribute 'lots' (expected slots=N or max_slots=N)
    """
    options = options or ImportOptions()
    diags = Diagnostics(options.strict)
    hosts: list[tuple[str, int]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        name, gpus = _host_line(words, options.gpus, source, number)
        if name in seen:
            raise SpecError(f"host {name} is listed twice (first on line {seen[name]})", source=source,
                            line=number, key=words[0])
        seen[name] = number
        hosts.append((name, gpus))
    if not hosts:
        raise SpecError("no hosts in hostfile", source=source, line=1)
    diags.note(f"a hostfile says nothing about switches: all {len(hosts)} hosts are in one ToR group "
               f"{FLAT_GROUP!r}")
    cluster = build_cluster([Leaf(name=FLAT_GROUP, hosts=hosts)], options, default_name=file_stem(source),
                            source=source)
    return ImportResult(cluster=cluster, format="hostfile", source=source, warnings=tuple(diags.warnings),
                        notes=tuple(diags.notes))


def _host_line(words: list[str], default_gpus: int, source: str, line: int) -> tuple[str, int]:
    first, attrs = words[0], words[1:]
    slots: int | None = None
    colon = _COLON.match(first)
    if colon:  # MPICH: host:N
        first = colon.group(1)
        slots = _count(colon.group(2), words[0], source, line)
    why = check_hostname(first)
    if why:
        raise SpecError(f"bad host name {first!r}: {why}", source=source, line=line, key=words[0])
    given: dict[str, int] = {}
    for word in attrs:
        key, eq, value = word.partition("=")
        attr = _ATTRS.get(key.lower())
        if not eq or attr is None:
            raise SpecError(f"unknown attribute {key!r} (expected slots=N or max_slots=N)" if eq else
                            f"expected slots=N after the host name, got {word!r}", source=source,
                            line=line, key=word)
        if attr in given or (attr == "slots" and slots is not None):
            raise SpecError(f"{attr} is given twice", source=source, line=line, key=word)
        given[attr] = _count(value, word, source, line)
    slots = given.get("slots", slots)
    if slots is not None and given.get("max_slots", slots) < slots:
        raise SpecError(f"slots={slots} is more than max_slots={given['max_slots']}", source=source,
                        line=line, key=" ".join(attrs))
    return first, slots if slots is not None else given.get("max_slots", default_gpus)


def _count(value: str, token: str, source: str, line: int) -> int:
    if not value.isdigit() or int(value) < 1:
        raise SpecError(f"expected a positive whole number of slots, got {value!r}", source=source, line=line,
                        key=token)
    return int(value)
