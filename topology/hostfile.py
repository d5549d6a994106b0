"""Hostfiles (DeepSpeed, Open MPI, MPICH, bare names) -> a flat Cluster.

One host a line, with its GPU count as the launcher knows it::

    worker-a slots=8          # DeepSpeed and Open MPI
    worker-b slots=2 max_slots=2
    worker-c:4                # MPICH
    worker-d                  # bare name: ImportOptions.gpus GPUs
    fd00:10::11 slots=8       # an IPv6 address

Open MPI and MPICH also read a host listed on several lines as one slot per line
([1]_, [2]_): bare names repeated N times are one host with N slots (a note says so).
DeepSpeed refuses a repeated host [3]_, and so does this reader when a repeated host
also gives ``slots=``: which count is meant is unclear. An IPv6 address in MPICH's
``host:N`` form (``fd00:10::11:8``) is itself a valid address, so it is refused as
ambiguous unless the line also gives ``slots=``; ``fd00:10::11 slots=8`` is the way
to write it.

A hostfile says nothing about switches, so every host lands in one ToR group, ``flat``.
A line that cannot be read is an error naming its line and token (``worker-e lots=8``
is not skipped); a last line without a newline is fine.

References
----------
.. [1] Open MPI documentation, "Host file syntax" (mpirun(1), ``--hostfile``): a host listed
   several times gets one slot per listing. https://docs.open-mpi.org/en/main/launching-apps/scheduling.html
.. [2] MPICH Hydra, "Using the Hydra Process Manager": hostfile lines ``host:N``, one
   process per line without ``:N``. https://github.com/pmodels/mpich/blob/main/doc/wiki/how_to/Using_the_Hydra_Process_Manager.md
.. [3] DeepSpeed, ``deepspeed/launcher/runner.py``: ``_parse_hostfile`` raises on a host
   defined twice. https://github.com/deepspeedai/DeepSpeed
"""

from __future__ import annotations

import re

from rankmap.errors import SpecError
from rankmap.fileio import iter_lines
from rankmap.names import charge_hosts, is_ip_address
from rankmap.topology.hostnames import check_hostname
from rankmap.topology.sources import (
    Diagnostics,
    ImportOptions,
    ImportResult,
    Leaf,
    build_cluster,
    file_stem,
    warn_odd_names,
)

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
    lines: dict[str, list[tuple[int, int | None]]] = {}   # host -> [(line, slots or None if bare)]
    for number, raw in enumerate(iter_lines(text), 1):  # lazily: a huge file stops at the host limit
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        name, gpus = _host_line(words, source, number)
        seen = lines.setdefault(name, [])
        if not seen:  # a new host: counts against the file's host limit (rankmap.names.host_budget)
            charge_hosts(1, source=source, line=number, key=words[0])
        if seen and (gpus is not None or seen[0][1] is not None):
            raise SpecError(f"host {name} is listed twice (first on line {seen[0][0]}): list it once with "
                            f"slots=N (Open MPI and MPICH read a bare name repeated N times as N slots)",
                            source=source, line=number, key=words[0])
        seen.append((number, gpus))
    if not lines:
        raise SpecError("no hosts in hostfile", source=source, line=1)
    hosts = []
    for name, seen in lines.items():
        if len(seen) > 1:
            diags.note(f"host {name} is listed on {len(seen)} lines (first on line {seen[0][0]}): read as "
                       f"{len(seen)} slots, one per line, as Open MPI and MPICH do")
        hosts.append((name, len(seen) if len(seen) > 1 else seen[0][1] or options.gpus))
    warn_odd_names([Leaf(name=FLAT_GROUP, hosts=hosts)], diags, source, {n: seen[0][0] for n, seen in lines.items()},
                   what="hostfile group")
    diags.note(f"a hostfile says nothing about switches: all {len(hosts)} hosts are in one ToR group "
               f"{FLAT_GROUP!r}")
    cluster = build_cluster([Leaf(name=FLAT_GROUP, hosts=hosts)], options, default_name=file_stem(source),
                            source=source, host_lines={n: seen[0][0] for n, seen in lines.items()})
    return ImportResult(cluster=cluster, format="hostfile", source=source, warnings=tuple(diags.warnings),
                        notes=tuple(diags.notes))


def _host_line(words: list[str], source: str, line: int) -> tuple[str, int | None]:
    """``(host, slots)`` of one line; slots None for a bare name."""
    first, attrs = words[0], words[1:]
    slots: int | None = None
    if first.count(":") > 1:  # an IPv6 address, perhaps in MPICH's host:N form
        first, slots = _ipv6_word(first, bool(attrs), source, line)
    else:
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
    return first, slots if slots is not None else given.get("max_slots")


def _ipv6_word(word: str, has_attrs: bool, source: str, line: int) -> tuple[str, int | None]:
    """An IPv6 host word: the address, or MPICH's ``address:N`` when only that reading is valid."""
    head, _, tail = word.rpartition(":")
    whole, split = is_ip_address(word, 6), tail.isdigit() and is_ip_address(head, 6)
    if whole and split and not has_attrs:
        raise SpecError(f"{word!r} is ambiguous: the IPv6 address {word}, or MPICH's host:N form for {head} with "
                        f"{tail} slots; write '{head} slots={tail}' (or '{word} slots=N')", source=source,
                        line=line, key=word)
    if whole or not split:
        return word, None
    return head, _count(tail, word, source, line)


def _count(value: str, token: str, source: str, line: int) -> int:
    if not value.isdigit() or int(value) < 1:
        raise SpecError(f"expected a positive whole number of slots, got {value!r}", source=source, line=line,
                        key=token)
    return int(value)
