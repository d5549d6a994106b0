"""Input text read with clear errors: size, special files, encoding, JSON depth and integers.

:func:`read_text` returns a file's UTF-8 text or raises :class:`~rankmap.errors.SpecError`
naming the file (and the line where binary data starts). Input limits (size, special files,
JSON depth and integer length) are checked before parsing.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from rankmap.errors import SpecError

__all__ = ["iter_lines", "read_text", "read_bytes", "decode_text", "check_numbers", "parse_json",
           "nesting_depth", "depth_line", "MAX_INPUT_BYTES", "MAX_JSON_DEPTH", "MAX_INT_DIGITS"]


#: Largest input file read, in bytes; ``RANKMAP_MAX_INPUT_BYTES`` overrides it. Checked on the
#: open file's size before a byte is read, and again while reading (a file that grows).
MAX_INPUT_BYTES = int(os.environ.get("RANKMAP_MAX_INPUT_BYTES", str(64 * 2**20)))


def read_text(path: str | Path, *, limit: int | None = None) -> str:
    """A text input file's contents; unreadable, special, oversized or binary files raise SpecError
    naming the file (and the line where binary data starts).

    Only regular files are read: a device (``/dev/zero``, ``/dev/urandom``), FIFO or socket is
    refused before reading, as is a file over ``limit`` bytes (default :data:`MAX_INPUT_BYTES`).
    The file is opened non-blocking, so naming a FIFO with no writer does not hang.

    Raises
    ------
    SpecError
        ``FILE: cannot read file: ...``, ``FILE: not a regular file (a character device)``,
        ``FILE: file is N bytes, over the limit of M (RANKMAP_MAX_INPUT_BYTES)``, or a decoding error.
    """
    return decode_text(read_bytes(path, limit=limit), str(path))


def read_bytes(path: str | Path, *, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most ``limit`` (default :data:`MAX_INPUT_BYTES`); see :func:`read_text`."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror}", source=source) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"not a regular file ({file_kind(info.st_mode)})", source=source)
        if info.st_size > limit:
            raise SpecError(f"file is {info.st_size} bytes, over the limit of {limit} (RANKMAP_MAX_INPUT_BYTES)",
                            source=source)
        chunks, size = [], 0
        while True:
            # the whole file in one read where it can (one buffer: a 130 MB rank map is not held twice by join)
            chunk = os.read(fd, min(max(1 << 20, info.st_size + 1 - size), limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise SpecError(f"file grew over the limit of {limit} bytes (RANKMAP_MAX_INPUT_BYTES)", source=source)
        return b"".join(chunks)
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror}", source=source) from None
    finally:
        os.close(fd)


def iter_lines(text: str):
    r"""The lines of ``text`` one at a time, without their ``\n``: for reading a huge input only as
    far as a limit lets it (``str.splitlines`` makes every line at once; ``io.StringIO`` copies
    the text at 4 bytes a character).

    Examples
    --------
    >>> list(iter_lines("a\nb\n\nc"))
    ['a', 'b', '', 'c']
    """
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        stop = end if stop < 0 else stop
        yield text[start:stop]
        start = stop + 1


def check_numbers(text: str, source: str) -> None:
    """Refuse a run of more decimal digits than Python converts (``sys.get_int_max_str_digits``,
    4,300 by default: ``int()`` raises ValueError past it), naming the line: no number in any
    input format needs as many, and every parser may then call ``int()`` safely."""
    limit = sys.get_int_max_str_digits() or 0
    if limit and len(text) > limit:
        run = re.search(r"[0-9]{%d,}" % (limit + 1), text)
        if run:
            raise SpecError(f"a number of {run.end() - run.start()} digits (at most {limit})", source=source,
                            line=text.count("\n", 0, run.start()) + 1)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``st_mode`` of ``os.stat``), for error messages."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "a special file")


#: Deepest nesting of JSON arrays and objects accepted (a rank map is 3 deep, kubectl output about 8).
MAX_JSON_DEPTH = 100
#: Longest integer literal accepted in JSON, in digits (int64 needs 19).
MAX_INT_DIGITS = 40


def parse_json(text: str, source: str) -> Any:
    """Parse JSON strictly: duplicate keys, NaN/Infinity, integers over :data:`MAX_INT_DIGITS`
    digits and nesting over :data:`MAX_JSON_DEPTH` are errors (SpecError naming the file, and the
    line where the format gives one), as is any syntax error (RFC 8259 §4 leaves duplicate
    names' meaning undefined; Python's ``json`` would keep the last one silently).

    Examples
    --------
    >>> parse_json('{"a": 1, "a": 2}', "m.json")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: m.json:1: duplicate key 'a'
    """
    too_deep = SpecError(f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels", source=source)
    # Integers are checked one by one only where some run of digits is long enough to matter:
    # a hook per integer costs seconds on a rank map of 10^6 ranks (~10^7 integers).
    long_digits = _LONG_DIGITS.search(text) is not None
    try:
        doc = json.loads(text, object_pairs_hook=lambda pairs: _unique(pairs, source),
                         parse_int=(lambda digits: _json_int(digits, source)) if long_digits else None,
                         parse_constant=_no_constant(source))
    except json.JSONDecodeError as exc:
        raise SpecError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except _DuplicateKey as exc:
        found = duplicate_key_at(text)
        if found is None:
            raise SpecError(exc.message, source=source) from None
        key, line = found
        raise SpecError(f"duplicate key {key[:60]!r}", source=source, line=line) from None
    except RecursionError:  # json's C scanner refuses nesting past the interpreter's recursion limit
        raise too_deep from None
    if isinstance(doc, (dict, list)) and _deeper_than(doc, MAX_JSON_DEPTH):
        raise too_deep
    return doc


_LONG_DIGITS = re.compile("[0-9]{%d,}" % (MAX_INT_DIGITS + 1))


def _deeper_than(doc: dict | list, cap: int) -> bool:
    """Whether parsed JSON nests arrays and objects more than ``cap`` deep (the outermost is 1),
    walked without recursion."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > cap:
            return True
        stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node)
                     if isinstance(v, (dict, list)))
    return False


def nesting_depth(text: str, cap: int) -> int:
    """Deepest running count of ``[``/``{`` minus ``]``/``}`` in ``text``; 0 when there are
    no more than ``cap`` opening brackets at all (vectorised: linear time, ~10 ns a character).

    >>> nesting_depth("a: [[1], {b: [2]}]", 1), nesting_depth("[[[", 2)
    (3, 3)
    """
    if text.count("[") + text.count("{") <= cap:
        return 0
    import numpy as np  # only for files with many brackets

    depth = _running_depth(text, np)
    return int(depth.max()) if depth.size else 0


def depth_line(text: str, cap: int) -> int:
    """1-based line where the bracket nesting of ``text`` first exceeds ``cap``."""
    import numpy as np

    depth = _running_depth(text, np)
    first = int(np.argmax(depth > cap))
    return text.count("\n", 0, first) + 1 if depth.size and depth[first] > cap else 1


def _running_depth(text: str, np):
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    step = (np.isin(codes, (0x5B, 0x7B)).astype(np.int32) - np.isin(codes, (0x5D, 0x7D)).astype(np.int32))
    return np.cumsum(step, dtype=np.int64)


def _unique(pairs: list, source: str) -> dict:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(f"duplicate key {key[:60]!r}", source=source)
    return out


class _DuplicateKey(SpecError):
    """A duplicate key, raised inside json's parser, which knows no position: parse_json finds it."""


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def duplicate_key_at(text: str) -> tuple[str, int] | None:
    """The first key repeated inside one JSON object, by the position of its repeat, and
    the 1-based line of that repeat; None without one. Only for the error path (a Python
    scan of the whole text).

    >>> duplicate_key_at('{"a": {"b": 1},\\n "c": [{"b": 2, "b": 3}]}')
    ('b', 2)
    """
    stack: list[set | None] = []            # per open bracket: the keys of an object, None for an array
    last = None
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok in "{[":
            stack.append(set() if tok == "{" else None)
        elif tok in "}]":
            if stack:
                stack.pop()
        elif tok == ":":
            if last is not None and stack and stack[-1] is not None:
                key = json.loads(last.group())
                if key in stack[-1]:
                    return key, text.count("\n", 0, last.start()) + 1
                stack[-1].add(key)
        last = m if tok.startswith('"') else None
    return None


def _json_int(digits: str, source: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise SpecError(f"integer of {len(digits)} digits (at most {MAX_INT_DIGITS})", source=source)
    return int(digits)


def _no_constant(source: str):
    def refuse(name: str):
        raise SpecError(f"{name} is not a JSON number", source=source)
    return refuse


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text of an input file; binary data is an error naming the line it starts on.

    Examples
    --------
    >>> decode_text(b"SwitchName=s1\\n\\xff\\xfe", "t.conf")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: t.conf:2: not UTF-8 text (byte 14 is 0xff): a binary file?
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}): a binary file?",
                        source=source, line=line) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise SpecError("NUL byte in text: a binary file?", source=source, line=text.count("\n", 0, nul) + 1)
    return text.removeprefix("\ufeff")
