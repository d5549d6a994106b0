"""Lines of a Slurm configuration file (topology.conf) as slurmctld reads them.

slurmctld's parser (``s_p_parse_file``) treats keys case-insensitively, ends a line at
``#`` (``\\#`` is a literal ``#``), continues a line that ends in ``\\``, and splits it
into ``Key=Value`` pairs separated by any whitespace; spaces may stand around ``=`` and
a value may be double-quoted. This module does the same and nothing more: what the keys
mean is up to :mod:`rankmap.topology.slurm` and :mod:`rankmap.topology.slurm_block`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import hostlist

from rankmap.errors import SpecError
from rankmap.names import name_problem

__all__ = ["Token", "Record", "parse_records", "expand_names", "compress_names", "check_switch_name",
           "slurm_hostlist", "slurm_rejects"]

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")
_PAIR = re.compile(r'([A-Za-z0-9]+)[ \t]*=[ \t]*(?:"([^"]*)"|([^\s"]+))(?=\s|$)')
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Token:
    """One ``Key=Value`` pair: ``key`` in canonical spelling, ``text`` as written."""

    key: str
    value: str
    text: str
    line: int


@dataclass(frozen=True)
class Record:
    """One logical line: its first physical line number and its pairs, in order."""

    line: int
    tokens: tuple[Token, ...]

    def get(self, key: str) -> Token | None:
        return next((t for t in self.tokens if t.key == key), None)


def parse_records(text: str, source: str, keys: tuple[str, ...], hints: dict[str, str] | None = None) -> list[Record]:
    """Split a Slurm config into records of known keys.

    Parameters
    ----------
    text : str
        File contents.
    source : str
        File name for messages.
    keys : tuple of str
        Keys allowed anywhere in a line, in canonical spelling (matched case-insensitively).
    hints : dict of str to str, optional
        Keys of another file kind -> what to do instead (``{"BlockName": "... --from
        slurm-block"}``), added to the unknown-key message.

    Raises
    ------
    SpecError
        A word that is not ``Key=Value``, an unknown key, an empty value or a key given
        twice on one line, at ``FILE:LINE`` with the token as written.

    Examples
    --------
    >>> recs = parse_records("switchname=s1\\tNODES = n[1-2]  # rack 1\\n", "t.conf",
    ...                      ("SwitchName", "Nodes"))
    >>> [(t.key, t.value) for t in recs[0].tokens]
    [('SwitchName', 's1'), ('Nodes', 'n[1-2]')]
    """
    canon = {k.lower(): k for k in keys}
    records: list[Record] = []
    for line_no, body in _logical_lines(text):
        tokens: list[Token] = []
        pos = 0
        while True:
            word = _WORD.search(body, pos)
            if word is None:
                break
            match = _PAIR.match(body, word.start())
            if match is None:
                raise SpecError(_not_a_pair(body[word.start():]), source=source, line=line_no, key=word.group())
            written = match.group(0)
            key = canon.get(match.group(1).lower())
            if key is None:
                hint = {k.lower(): v for k, v in (hints or {}).items()}.get(match.group(1).lower())
                raise SpecError(f"unknown key {match.group(1)!r} (expected one of: {', '.join(keys)})"
                                + (f": {hint}" if hint else ""), source=source, line=line_no, key=written)
            value = match.group(2) if match.group(2) is not None else match.group(3)
            if not value.strip():
                raise SpecError(f"{key} has an empty value", source=source, line=line_no, key=written)
            if any(t.key == key for t in tokens):
                raise SpecError(f"{key} is given twice on one line", source=source, line=line_no, key=written)
            tokens.append(Token(key, value.strip(), written, line_no))
            pos = match.end()
        if tokens:
            records.append(Record(line_no, tuple(tokens)))
    return records


def _not_a_pair(rest: str) -> str:
    """Why the text at ``rest`` does not start with a ``Key=Value`` pair."""
    word = rest.split()[0]
    key, eq, value = rest.partition("=")
    if not eq or (key.strip() and len(key.split()) > 1):
        return f"expected Key=Value, got {word!r} (a truncated line?)"
    if not re.fullmatch(r"[A-Za-z0-9]+", key.strip()):
        return f"bad key {key.strip()!r}: keys are letters and digits"
    if not value.strip() or value.strip().startswith("#"):
        return f"{key.strip()} has an empty value"
    return f"cannot read {word!r}: an unbalanced quote?"


def _logical_lines(text: str):
    """Yield ``(first line number, text without comments)``, joining ``\\`` continuations."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        body = _strip_comment(raw)
        if not pending:
            start = number
        if body.rstrip().endswith("\\"):
            pending += body.rstrip()[:-1] + " "
            continue
        yield start, pending + body
        pending = ""
    if pending:
        yield start, pending


def _strip_comment(raw: str) -> str:
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and raw[i + 1:i + 2] == "#":
            out.append("#")
            i += 2
            continue
        if raw[i] == "#":
            break
        out.append(raw[i])
        i += 1
    return "".join(out)


def check_switch_name(name: str) -> str | None:
    """Why ``name`` cannot be a Slurm switch or block name (None if it can).

    slurmctld limits names to 64 characters; names are also read back through hostlist
    expressions, so brackets, commas and whitespace cannot appear in them. (``#`` can: it
    is written as ``\\#``.)

    Examples
    --------
    >>> check_switch_name("leaf[1")
    "character '[' cannot appear in a switch name"
    """
    if not name:
        return "empty name"
    if len(name) > 64:
        return f"switch names must be shorter than 64 characters ({len(name)} given)"
    bad = next((c for c in name if c in ',[]="\\' or c.isspace() or not c.isprintable()), None)
    if bad is not None:
        return f"character {bad!r} cannot appear in a switch name"
    return name_problem(name, "switch name")  # the grammar names in every generated file keep


def expand_names(token: Token, source: str) -> list[str]:
    """Expand a hostlist of switch names (``sp[3,7]`` is sp3 and sp7), rejecting repeats.

    Examples
    --------
    >>> expand_names(Token("Switches", "sp[3,7],leaf[01-02]", "Switches=...", 1), "t.conf")
    ['sp3', 'sp7', 'leaf01', 'leaf02']
    """
    try:
        names = hostlist.expand_hostlist(token.value, allow_duplicates=True)
    except hostlist.BadHostlist as exc:
        raise SpecError(f"bad hostlist {token.value!r}: {exc}", source=source, line=token.line,
                        key=token.text) from None
    seen: set[str] = set()
    for name in names:
        why = check_switch_name(name)
        if why:
            raise SpecError(f"bad name {name!r} in {token.value!r}: {why}", source=source, line=token.line,
                            key=token.text)
        if name in seen:
            raise SpecError(f"{name!r} is listed twice", source=source, line=token.line, key=token.text)
        seen.add(name)
    return names


def slurm_hostlist(names) -> str:
    """Compress names into a hostlist that slurmctld itself reads back exactly.

    Slurm's parser refuses text after a bracket (``ip-10-[20,25]-6-18``, which
    python-hostlist writes), so only a bracket of the trailing digits is used:
    ``prefix[ranges]``. A range keeps the zero padding of its first number (Slurm pads
    every number to the width of the range's low bound), so ``k010`` and ``k10`` stay two
    hosts and no host is invented or merged. Names come out in natural order.

    Examples
    --------
    >>> slurm_hostlist(["srv-008", "srv-007", "n9", "n10", "n11", "k010", "k10", "alpha"])
    'alpha,k[10,010],n[9-11],srv-[007-008]'
    """
    names = sorted(set(names), key=_natural)
    groups: dict[str, list[str]] = {}
    plain: list[str] = []
    for name in names:
        m = _TRAILING_DIGITS.match(name)
        if m and m.group(1):
            groups.setdefault(m.group(1), []).append(m.group(2))
        else:
            plain.append(name)
    parts = {name: name for name in plain}
    for prefix, numbers in groups.items():
        runs = _runs(sorted(numbers, key=lambda d: (int(d), len(d))))
        if len(runs) == 1 and runs[0][0] == runs[0][1]:
            parts[prefix + runs[0][0]] = prefix + runs[0][0]
        else:
            parts[prefix + runs[0][0]] = prefix + "[" + ",".join(a if a == b else f"{a}-{b}" for a, b in runs) + "]"
    return ",".join(parts[k] for k in sorted(parts, key=_natural))


def _runs(numbers: list[str]) -> list[tuple[str, str]]:
    """Consecutive runs that Slurm expands back to the same strings: ``[(low, high), ...]``."""
    runs: list[list[str]] = []
    for d in numbers:
        if runs:
            low, high = runs[-1]
            if int(d) == int(high) + 1 and d == str(int(d)).zfill(len(low)) and len(d) >= len(high):
                runs[-1][1] = d
                continue
        runs.append([d, d])
    return [(a, b) for a, b in runs]


def _natural(name: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def slurm_rejects(expr: str) -> str | None:
    """The element of a hostlist that slurmctld cannot read (text after its last bracket).

    Examples
    --------
    >>> slurm_rejects("a[1-2]-b[1-2],n[1-3]") is None, slurm_rejects("gpu,a[1-2]-6")
    (True, 'a[1-2]-6')
    """
    depth, start = 0, 0
    for i, c in enumerate(expr + ","):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            element = expr[start:i]
            if "]" in element and element.rsplit("]", 1)[1]:
                return element
            start = i + 1
    return None


def compress_names(names) -> str:
    """:func:`slurm_hostlist`, checked: comma-joined names if it would not expand back.

    Examples
    --------
    >>> compress_names(["leaf3", "leaf1", "leaf2"])
    'leaf[1-3]'
    """
    names = list(names)
    expr = slurm_hostlist(names)
    try:
        back = hostlist.expand_hostlist(expr, allow_duplicates=True)
    except hostlist.BadHostlist:
        back = []
    if len(back) == len(names) and set(back) == set(names):
        return expr
    return ",".join(names)
