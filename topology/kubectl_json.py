"""Line numbers of the items of a ``kubectl ... -o json`` List, for error messages.

:mod:`json` keeps no positions, so a node or pod refused by an importer would be cited at
line 1. :class:`JsonLines` finds each item's line from where its ``metadata.name`` is
written (a forward search in item order), falling back to a parse that records every
object's position only when an item has no usable name.

Kubernetes API conventions, lists: https://kubernetes.io/docs/reference/using-api/api-concepts/#collections
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left

__all__ = ["json_item_lines", "JsonLines"]


def json_item_lines(text: str, doc) -> list[int]:
    """The line of each item of a kubectl List (``kubectl get nodes/pods -o json``), parsed from
    ``text`` as ``doc``: where its ``metadata.name`` is written, so that of two items with one
    name the second is cited at its own line, not at the first's.

    >>> text = '{"items": [\\n {"metadata": {"name": "n1"}},\\n {"metadata": {"name": "n1"}}]}'
    >>> json_item_lines(text, json.loads(text))
    [2, 3]
    """
    items = doc.get("items") if isinstance(doc, dict) and "items" in doc else doc
    lines = JsonLines(text, doc)
    return [lines.item_line(i) for i in range(len(items) if isinstance(items, list) else 1)]


class JsonLines:
    """Line of each node item. Fast path: the line of the item's ``"name": "..."`` found by
    searching forward in item order. Items without a usable name fall back (only for the
    message) to a slower parse that keeps the position of every object."""

    def __init__(self, text: str, doc):
        self.text = text
        self.doc = doc
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.pos = 0
        self.cache: dict[int, int] = {}
        self.slow: list[int] | None = None

    def item_line(self, index: int) -> int:
        if index not in self.cache:
            items = self.doc.get("items") if isinstance(self.doc, dict) and "items" in self.doc else self.doc
            item = items[index] if isinstance(items, list) else self.doc
            name = item.get("metadata", {}).get("name") if isinstance(item, dict) and \
                isinstance(item.get("metadata"), dict) else None
            found = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(name))).search(self.text, self.pos) \
                if isinstance(name, str) else None
            if found:
                self.pos = found.end()
                self.cache[index] = bisect_left(self.newlines, found.start()) + 1
            else:
                self.cache[index] = self._slow_lines()[index] if index < len(self._slow_lines()) else 1
        return self.cache[index]

    def _slow_lines(self) -> list[int]:
        if self.slow is None:
            line_of: dict[int, int] = {}
            decoder = json.JSONDecoder()

            def parse_object(s_and_end, *args):
                obj, end = json.decoder.JSONObject(s_and_end, *args)
                line_of[id(obj)] = bisect_left(self.newlines, s_and_end[1]) + 1
                return obj, end

            decoder.parse_object = parse_object
            decoder.scan_once = json.scanner.py_make_scanner(decoder)
            doc = decoder.decode(self.text)  # kept alive so that the ids above stay valid
            items = doc.get("items", []) if isinstance(doc, dict) and "items" in doc else doc
            items = items if isinstance(items, list) else [doc]
            self.slow = [line_of.get(id(item), 1) for item in items]
        return self.slow
