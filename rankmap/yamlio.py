"""YAML loading that remembers line numbers, so spec errors can name FILE:LINE.

Only PyYAML's safe loader is used (``yaml.SafeLoader`` composes the node tree; the
safe constructor turns scalars into Python values). Nothing here executes input.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from rankmap.errors import SpecError
from rankmap.fileio import depth_line, nesting_depth
from rankmap.names import check_name

__all__ = ["LocMap", "LocList", "parse_yaml", "parse_yaml_documents", "read_yaml", "Fields"]


class LocMap(dict):
    """A YAML mapping whose keys remember their 1-based line (``key_lines``)."""

    line: int = 0
    key_lines: dict


class LocList(list):
    """A YAML sequence whose items remember their 1-based line (``item_lines``)."""

    line: int = 0
    item_lines: list


#: Most values (mappings, sequences, scalars) one document may expand to. YAML aliases can
#: expand a small file into billions of nodes, so the budget is also bounded by the text: a
#: document without aliases has fewer nodes than characters, so ``2 * len(text) + 100,000``
#: leaves room for ordinary alias use and refuses an alias bomb after at most ~0.2 s.
MAX_NODES = int(os.environ.get("RANKMAP_MAX_YAML_NODES", "2000000"))
#: Deepest nesting of flow collections (``[`` / ``{``) accepted, checked before PyYAML runs
#: (its scanner is quadratic in the flow depth).
MAX_FLOW_DEPTH = 100
#: Largest YAML text parsed, in bytes (``RANKMAP_MAX_YAML_BYTES``). PyYAML's pure-Python scanner
#: reads about 0.4-1 MB/s, so this bounds a parse at some 10-20 s; larger specs belong in hostlists.
MAX_YAML_BYTES = int(os.environ.get("RANKMAP_MAX_YAML_BYTES", str(8 * 2**20)))


def _budget(text: str) -> list:
    limit = min(MAX_NODES, 2 * len(text) + 100_000)
    return [limit, limit]


def _convert(loader: yaml.SafeLoader, node: yaml.Node, source: str, budget: list) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise SpecError(f"document too large (over {budget[1]} values once aliases are expanded; "
                        "RANKMAP_MAX_YAML_NODES)", source=source)
    if isinstance(node, yaml.MappingNode):
        out = LocMap()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        loader.flatten_mapping(node)  # resolves YAML merge keys ("<<") safely
        for key_node, value_node in node.value:
            key = _convert(loader, key_node, source, budget)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise SpecError(f"mapping keys must be plain scalars, got {key!r}",
                                source=source, line=line)
            if isinstance(key, bool):  # YAML 1.1 reads yes/no/on/off/y/n as booleans: never a name
                raise SpecError(f"key {key_node.value!r} reads as the boolean {str(key).lower()} in YAML; "
                                f"quote it ('{key_node.value}') if it is a name", source=source, line=line)
            if key in out:
                raise SpecError(f"duplicate key {key!r}", source=source, line=line)
            out[key] = _convert(loader, value_node, source, budget)
            out.key_lines[key] = line
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LocList(_convert(loader, item, source, budget) for item in node.value)
        seq.line = node.start_mark.line + 1
        seq.item_lines = [item.start_mark.line + 1 for item in node.value]
        return seq
    return loader.construct_object(node, deep=True)


def parse_yaml(text: str, source: str = "<string>") -> Any:
    """Parse one YAML document into plain values with line information.

    Parameters
    ----------
    text : str
        The YAML document.
    source : str
        Name used in error messages.

    Returns
    -------
    LocMap, LocList, scalar or None
        Mappings and sequences carry 1-based line numbers.

    Raises
    ------
    SpecError
        On a YAML syntax error, a forbidden character, a duplicate key or more than one
        document.

    Examples
    --------
    >>> doc = parse_yaml("a: 1\\nb: [x, y]\\n")
    >>> doc["b"], doc.key_lines["b"]
    (['x', 'y'], 2)
    """
    return _load(text, source, lambda loader: _single(loader, source, _budget(text)))


def parse_yaml_documents(text: str, source: str = "<string>") -> list:
    """Every document of a multi-document YAML stream, with line numbers (errors at the end
    of the stream are reported on its last line)."""
    budget = _budget(text)

    def documents(loader):
        docs = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                docs.append(_convert(loader, node, source, budget))
        return docs
    return _load(text, source, documents, clamp=max(1, len(text.splitlines())))


def _single(loader: yaml.SafeLoader, source: str, budget: list) -> Any:
    node = loader.get_single_node()
    return None if node is None else _convert(loader, node, source, budget)


def _load(text: str, source: str, read, clamp: int | None = None) -> Any:
    """Run ``read(loader)`` on a safe loader, turning every YAML failure into SpecError."""
    def reader_error(exc: yaml.reader.ReaderError) -> SpecError:
        line = text.count("\n", 0, exc.position) + 1
        return SpecError(f"invalid YAML: character {exc.character!r} is not allowed", source=source, line=line)

    if len(text) > MAX_YAML_BYTES:
        raise SpecError(f"YAML text of {len(text)} characters, over the limit of {MAX_YAML_BYTES} "
                        "(RANKMAP_MAX_YAML_BYTES)", source=source)
    depth = nesting_depth(text, MAX_FLOW_DEPTH)
    if depth > MAX_FLOW_DEPTH:
        raise SpecError(f"invalid YAML: brackets nested deeper than {MAX_FLOW_DEPTH} levels", source=source,
                        line=depth_line(text, MAX_FLOW_DEPTH))
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:  # raised at once for characters YAML forbids
        raise reader_error(exc) from None
    try:
        return read(loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise SpecError(f"invalid YAML: {exc.problem or exc.context}", source=source,
                        line=min(line, clamp) if clamp else line) from None
    except yaml.reader.ReaderError as exc:
        raise reader_error(exc) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}", source=source, line=1) from None
    except RecursionError:
        raise SpecError("invalid YAML: nested too deeply", source=source) from None
    except ValueError as exc:  # int() of more than sys.get_int_max_str_digits() digits, a bad timestamp
        digits = re.search(r"[0-9_]{%d,}" % sys.get_int_max_str_digits(), text)
        line = text.count("\n", 0, digits.start()) + 1 if digits else None
        raise SpecError(f"invalid YAML value: {str(exc).split(';')[0]}", source=source, line=line) from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file with :func:`parse_yaml`; I/O and decoding errors become SpecError."""
    from rankmap.fileio import read_text

    return parse_yaml(read_text(path), str(path))


_MISSING = object()


def _number_hint(value: Any, integer: bool) -> str:
    """Why a number came as text: YAML 1.1 (PyYAML) reads ``1e14`` as a string (its floats
    need a dot), and a quoted number is a string."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if number != number or abs(number) == float("inf"):
        return ""
    if integer:
        return f" (write {int(number)} without quotes or exponent)" if number.is_integer() else ""
    if "e" in value.lower() and "." not in value:
        return f" (YAML reads {value.strip()} as text: write it with a dot, e.g. {number:.1e})"
    return " (a quoted number is text: write it without quotes)"


class Fields:
    """Typed, checked access to one YAML mapping; unknown keys are errors.

    Parameters
    ----------
    data : LocMap or dict
        The mapping to read.
    source : str
        File name for messages.
    prefix : str
        Dotted key path of ``data`` itself ("" at top level).

    Examples
    --------
    >>> f = Fields(parse_yaml("tp: 8\\n"), "job.yaml")
    >>> f.int("tp", minimum=1), f.int("pp", default=1)
    (8, 1)
    >>> f.done()
    """

    def __init__(self, data: Any, source: str, prefix: str = "", line: int | None = None):
        if not isinstance(data, dict):
            raise SpecError(f"expected a mapping, got {_show(data)}", source=source,
                            line=line or getattr(data, "line", None), key=prefix or None)
        self.data = data
        self.source = source
        self.prefix = prefix
        self.used: set = set()
        self.line = getattr(data, "line", None) or line

    def path(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def line_of(self, key: str) -> int | None:
        lines = getattr(self.data, "key_lines", None)
        return lines.get(key, self.line) if lines else self.line

    def error(self, key: str, message: str) -> SpecError:
        """A SpecError located at ``key`` of this mapping."""
        return SpecError(message, source=self.source, line=self.line_of(key), key=self.path(key))

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        if key not in self.data:
            if default is _MISSING:
                raise SpecError("required key is missing", source=self.source,
                                line=self.line, key=self.path(key))
            return default
        self.used.add(key)
        return self.data[key]

    def _typed(self, key: str, default: Any, check: Callable[[Any], bool], what: str) -> Any:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if not check(value):
            raise self.error(key, f"expected {what}, got {_show(value)}{_number_hint(value, what == 'an integer')}")
        return value

    def int(self, key: str, default: Any = _MISSING, minimum: int | None = None, maximum: int = 10**15) -> Any:
        value = self._typed(key, default, lambda v: isinstance(v, int) and not isinstance(v, bool),
                            "an integer")
        if minimum is not None and isinstance(value, int) and value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        if isinstance(value, int) and not isinstance(value, bool) and value > maximum:
            raise self.error(key, f"must be <= {maximum}, got {value}")
        return value

    def number(self, key: str, default: Any = _MISSING, positive: bool = True) -> Any:
        value = self._typed(key, default, lambda v: isinstance(v, (int, float))
                            and not isinstance(v, bool) and v == v and abs(v) < 1e15,
                            "a number below 1e15")
        if positive and isinstance(value, (int, float)) and value <= 0:
            raise self.error(key, f"must be positive, got {value}")
        return value

    def str(self, key: str, default: Any = _MISSING) -> Any:
        value = self._typed(key, default, lambda v: isinstance(v, str) and v.strip() != "",
                            "a non-empty string")
        return value.strip() if isinstance(value, str) else value

    def name(self, key: str, kind: str, default: Any = _MISSING) -> Any:
        """A name of ``kind`` ("ToR group name", "job name", ...) in the grammar of
        :func:`rankmap.names.name_problem`; anything else is an error at ``key``."""
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        return check_name(value, kind, source=self.source, line=self.line_of(key), key=self.path(key))

    def bool(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, default, lambda v: isinstance(v, bool), "true or false")

    def choice(self, key: str, choices: tuple, default: Any = _MISSING) -> Any:
        value = self.raw(key, default)
        if value not in choices:
            raise self.error(key, f"expected one of {', '.join(map(str, choices))}; got {_show(value)}")
        return value

    def sub(self, key: str, required: bool = False) -> "Fields":
        """The nested mapping at ``key`` (an empty one if absent and not required)."""
        if not required and key not in self.data:
            return Fields({}, self.source, self.path(key), self.line)
        value = self.raw(key)
        return Fields(value, self.source, self.path(key), self.line_of(key))

    def seq(self, key: str, default: Any = _MISSING) -> Any:
        value = self._typed(key, default, lambda v: isinstance(v, list), "a list")
        return value

    def only(self, *keys: str) -> "Fields":
        """Raise SpecError now for the first key not in ``keys`` (before reporting missing ones)."""
        for key in self.data:
            if key not in keys:
                raise SpecError(f"unknown key {key!r} (expected one of: {', '.join(keys)})",
                                source=self.source, line=self.line_of(key), key=self.path(str(key)))
        return self

    def done(self) -> None:
        """Raise SpecError for the first key that was never read (an unknown key)."""
        for key in self.data:
            if key not in self.used:
                raise SpecError(f"unknown key {key!r}", source=self.source,
                                line=self.line_of(key), key=self.path(str(key)))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def key_line(data: Any, dotted_key: str) -> int | None:
    """The 1-based line of ``dotted_key`` (``"parallel.dp"``) in YAML read by :func:`parse_yaml`;
    the nearest enclosing key's line when the last parts are missing, None when none is found.

    Examples
    --------
    >>> key_line(parse_yaml("name: j\\nparallel:\\n  tp: 8\\n  dp: auto\\n"), "parallel.dp")
    4
    >>> key_line(parse_yaml("name: j\\nparallel:\\n  tp: 8\\n"), "parallel.dp")
    2
    """
    line = None
    for part in dotted_key.split("."):
        lines = getattr(data, "key_lines", None)
        if not isinstance(data, dict) or not lines or part not in lines:
            break
        line, data = lines[part], data[part]
    return line
