"""Reading the ``ranks`` of a rankmap.json as :func:`~rankmap.job.rank_map.rankmap_json_chunks` writes
them, straight from the text into columns, without a dict per rank.

``json.loads`` of a map of 800,000 ranks builds 800,000 dicts (~700 MB at once); the writer's
rank lines have one fixed shape (``    {"rank": 0, "host": "h", "node_rank": 0, ...}``, keys in
one order, integers in decimal, names without escapes), so a regular expression read over
pieces of ~4 MB of text gives the columns a piece at a time. :func:`split_written` finds that
shape; anything else (another layout, escapes, floats, a key out of order) is None, and the
caller parses the whole document with ``json`` as before, so every error message stays that
of the full parse.

The JSON grammar (RFC 8259) is context free: a text whose ``ranks`` array holds only lines
of this shape parses as JSON exactly when the same text with an empty array there does, and
gives the same document but for that array.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import numpy as np

from rankmap.job.rank_map_columns import name_codes
from rankmap.job.spec import DIMS

__all__ = ["split_written", "rank_columns", "entry_line", "inexact_number"]

_OPEN, _CLOSE = '\n  "ranks": [\n', "\n  ]\n}\n"
_INT = r"(0|[1-9][0-9]{0,17})"                         # JSON integers that fit int64 (18 digits)
_NAME = r'"([ !#-\[\]-~]*)"'                           # printable ASCII but " and \: no escapes
#: The keys of a rank line, in the order the writer prints them, and each one's pattern.
LINE_KEYS = ("rank", "host", "node_rank", "local_rank", "tor_group", "rail") + DIMS
_LINE = r"^    \{" + ", ".join(f'"{k}": ' + (_NAME if k in ("host", "tor_group") else _INT)
                               for k in LINE_KEYS) + r"\}(,?)$"
#: per type of text (str, or the file's bytes: the rank lines are ASCII): the line, "\n", "," and the ends
_SHAPES = {str: (re.compile(_LINE, re.MULTILINE), "\n", ",", _OPEN, _CLOSE, '\n  "ranks": []\n}\n'),
           bytes: (re.compile(_LINE.encode(), re.MULTILINE), b"\n", b",", _OPEN.encode(), _CLOSE.encode(),
                   b'\n  "ranks": []\n}\n')}
_PIECE_CHARS = 4 << 20


def split_written(text: str | bytes) -> tuple[str | bytes, int, int] | None:
    """``(head, start, stop)`` when ``text`` ends in a ``ranks`` array as the writer prints it:
    ``head`` is the document with that array empty (``"ranks": []``), and ``text[start:stop]``
    the rank lines (one entry a line, ``,`` between lines); None otherwise.

    >>> text = '{\\n  "a": 1,\\n  "ranks": [\\n    {"x": 0},\\n    {"x": 1}\\n  ]\\n}\\n'
    >>> head, start, stop = split_written(text)
    >>> head, text[start:stop]
    ('{\\n  "a": 1,\\n  "ranks": []\\n}\\n', '    {"x": 0},\\n    {"x": 1}')
    """
    _, _, _, opening, closing, empty = _SHAPES[type(text)]
    at = text.find(opening)                            # a JSON string holds no raw newline: this is no string
    if at < 0 or not text.endswith(closing) or at + len(opening) >= len(text) - len(closing):
        return None
    return text[:at] + empty, at + len(opening), len(text) - len(closing)


def rank_columns(text: str | bytes, start: int, stop: int) -> dict | None:
    """The columns of the rank lines ``text[start:stop]``, or None when any line is not of the
    writer's shape (then the caller parses the whole document). ``text``: str, or the file's
    bytes (the lines are ASCII, so no decoded copy of the whole text is needed).

    Returns ``{key: int64 array [W]}`` for the integer keys of :data:`LINE_KEYS` and
    ``{"host" | "tor_group": (distinct names, code[W])}`` (see
    :func:`rankmap.job.rank_map_columns.name_codes`), ``W`` the number of lines, in file order.

    >>> line = ('    {"rank": 1, "host": "a", "node_rank": 0, "local_rank": 1, "tor_group": "t", '
    ...         '"rail": 1, "tp": 1, "cp": 0, "ep": 0, "dp": 0, "pp": 0}')
    >>> cols = rank_columns(line, 0, len(line))
    >>> cols["rank"], cols["host"]
    (array([1]), (['a'], array([0])))
    """
    line, newline, comma = _SHAPES[type(text)][:3]
    world = text.count(newline, start, stop) + 1
    cols = {key: np.empty(world, dtype=np.int64) for key in LINE_KEYS}     # [W] each, filled piece by piece
    known: dict = {"host": {}, "tor_group": {}}
    pos, done = start, 0
    while pos < stop:
        end = text.find(newline, min(pos + _PIECE_CHARS, stop), stop)
        end = stop if end < 0 else end                 # pieces end at a line's end
        lines = line.findall(text, pos, end)           # (11 fields, comma) per line; a line matches once at most
        if len(lines) != text.count(newline, pos, end) + 1:
            return None                                # some line is not of the writer's shape
        fields = list(zip(*lines))
        if fields[-1].count(comma) != len(lines) - (end == stop):
            return None                                # a "," missing between lines, or one after the last
        for i, key in enumerate(LINE_KEYS):
            cols[key][done:done + len(lines)] = (name_codes(fields[i], known[key])[1] if key in known
                                                 else np.array(fields[i], dtype=np.int64))
        pos, done = end + 1, done + len(lines)
    for key, code in known.items():
        cols[key] = ([name.decode() if isinstance(name, bytes) else name for name in code], cols[key])
    return cols


# A JSON string, a structural character or a bare value (number, true, false, null): enough to walk
# arrays and count their entries without parsing values.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]|-?[0-9][0-9.eE+-]*|true|false|null')


def entry_line(text: str, index: int) -> int | None:
    r"""1-based line on which entry ``index`` of the top-level ``ranks`` array of JSON ``text``
    starts, or None (no such entry). For error messages: straight to it when the array has one
    entry a line (as the writer prints it), else a walk of the text up to that entry.

    >>> entry_line('{"a": [1],\n "ranks": [{"rank": 0},\n  {"rank": 1}]}', 1)
    3
    >>> entry_line('{"ranks": [\n  5,\n  {"rank": 1}]}', 1)   # an entry that is no object counts too
    3
    """
    written = split_written(text)
    if written is not None:
        _, start, stop = written
        lines = text[start:stop].split("\n")
        if all(line.count("{") == 1 and line.strip().startswith("{") and line.rstrip(", \r").endswith("}")
               for line in lines):
            return text.count("\n", 0, start) + 1 + index if 0 <= index < len(lines) else None
    depth, key, inside, expecting, count = 0, None, False, False, 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if inside and depth == 2:       # between the entries of ranks
            if tok == "]":
                return None
            if tok == ",":
                expecting = True
                continue
            if expecting:               # the first token of an entry
                if count == index:
                    return text.count("\n", 0, m.start()) + 1
                count, expecting = count + 1, False
        if tok in "[{":
            if depth == 1 and tok == "[" and key == '"ranks"':
                inside, expecting = True, True
            depth += 1
        elif tok in "]}":
            depth -= 1
        elif depth == 1 and tok != ":":
            key = tok if tok.startswith('"') else None
    return None


# A number written with a fraction or an exponent, after the ':' , or '[' before a JSON value.
_FLOAT = re.compile(r"[:,\[]\s*(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+))\s*(?=[,\]}])")


def inexact_number(text: str) -> tuple[int, str] | None:
    r"""``(line, literal)`` of the first number in JSON ``text`` that is not an integer as written
    but reads as one in binary64 (``1e-400`` underflows to 0, ``1.00000000000000000001`` rounds to
    1), or None. Such a number would pass as an integer key (``"rank": 0``) of the map
    (:func:`rankmap.job.rank_map_schema.as_int` takes integer-valued floats, as JSON Schema does),
    though the file does not say that integer.

    >>> inexact_number('{"a": 1.0,\n "rank": 1e-400}')
    (2, '1e-400')
    >>> inexact_number('{"a": 0.5, "b": 2e3, "c": 7}') is None
    True
    >>> inexact_number('{"rank": 1e-99999999999999999999999}')
    (1, '1e-99999999999999999999999')
    """
    for m in _FLOAT.finditer(text):
        literal = m.group(1)
        value = float(literal)
        if not value.is_integer() or abs(value) >= 2**53:
            continue
        try:
            exact = Decimal(literal) == int(value)
        except InvalidOperation:  # an exponent past Decimal's range: not the integer it rounds to
            exact = False
        if not exact:
            return text.count("\n", 0, m.start(1)) + 1, literal
    return None
