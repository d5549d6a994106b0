"""The rules of the published rank map schema (``docs/rankmap.schema.json``), checked by the reader.

Every command that reads ``rankmap.json`` goes through :func:`check_document` first, so a
map that breaks the schema (``"summary": "oops"``, an unknown top-level key, a metric of
the wrong type) is refused with the key path and the value found, as a JSON Schema
validator would refuse it; no schema library is needed at run time. The rank entries'
own rules (exact keys, integers >= 0, one rank per GPU) are checked where they are
decoded, in :mod:`rankmap.job.rank_map`. ``tests/job/test_rank_map_schema.py`` runs the
same broken maps through this reader and through a JSON Schema validator with the
schema file, so that the two agree.

References
----------
JSON Schema 2020-12, Validation vocabulary (required, additionalProperties, oneOf, const),
https://json-schema.org/draft/2020-12/json-schema-validation
"""

from __future__ import annotations

import re

from rankmap.errors import RankMapFileError

__all__ = ["SCHEMA", "check_document", "as_int", "job_ints"]

SCHEMA = "rankmap/v1"
_REQUIRED = ("schema", "cluster", "job", "world_size", "nproc_per_node", "num_nodes", "summary", "ranks")
_OPTIONAL = ("nprocs", "context")
_CONTEXT = ("excluded", "reserved", "failed")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PLAN = ("plan", "lower_bound_bytes", "bound_method", "solver_status", "tier_weights", "baselines")
_REPLAN = ("replaced", "moved_ranks", "cross_tor_bytes_before", "cross_tor_bytes_after")
# per tier, before and after, and the weights replacements were chosen by (maps from before they existed lack them)
_REPLAN_TIERS = {"tier_bytes_before": "n[]", "tier_bytes_after": "n[]", "weighted_bytes_before": "n",
                 "weighted_bytes_after": "n", "tier_weights": "n[]"}
# metric -> (kind, minimum): "n" a number, "i" an integer, "n[]"/"i[]" a list of them
_METRICS = {"cross_tor_bytes": ("n", 0), "weighted_bytes": ("n", 0), "tier_bytes": ("n[]", 0),
            "max_dp_spread_per_tier": ("i[]", 1), "max_pp_spread_per_tier": ("i[]", 1),
            "dp_edges_cross_tor": ("i", 0), "pp_edges_cross_tor": ("i", 0), "max_dp_spread_tor_groups": ("i", 0),
            "max_uplink_bytes": ("n", 0), "gap_to_bound": ("n", 0)}


def as_int(value):
    """``value`` as an int when it is an integer-valued JSON number (``1`` or ``1.0``), else itself.

    JSON has one number type (RFC 8259 §6), and JSON Schema's ``"integer"`` is "any number with a
    zero fractional part" (JSON Schema 2020-12 Core §4.2.1; Validation §6.1.1), so a validator
    accepts ``"rail": 1.0``: the reader reads it as 1, agreeing with the schema, while ``1.5``,
    ``true`` and ``"1"`` stay refused. A float of magnitude 2**53 or more stays a float: it no
    longer names one integer exactly (IEEE 754 binary64), and no count of a rank map comes near it,
    so it is refused as out of range, printed as written (``1e+300``), not as 301 digits.

    >>> as_int(1.0), as_int(3), as_int(1.5), as_int(True), as_int(1e300)
    (1, 3, 1.5, True, 1e+300)
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def job_ints(job):
    """The rank map's ``job`` section with the integer-valued numbers of its all-integer
    sections (``parallel``, ``model``, ``batch``, ``precision``) read as integers, as the schema's
    integers are (:func:`as_int`): ``"tp": 8.0`` is tp 8. Other sections (``hardware``'s rates)
    keep their numbers as written, and a job that is no object is returned as it is."""
    if not isinstance(job, dict):
        return job
    return {k: {n: as_int(v) for n, v in sub.items()} if k in ("parallel", "model", "batch", "precision")
            and isinstance(sub, dict) else sub for k, sub in job.items()}


class _Check:
    """Raise located errors for one document."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, message: str):
        raise RankMapFileError(message, source=self.source, key=key)

    def object(self, value, key: str, required: tuple, allowed: tuple | None = None) -> dict:
        """A JSON object with the ``required`` keys and, unless ``allowed`` is None, no others."""
        if not isinstance(value, dict):
            self.fail(key, f"expected an object, got {_show(value)}")
        if allowed is not None:
            extra = [k for k in value if k not in allowed]
            if extra:
                self.fail(_join(key, extra[0]), f"unknown key {extra[0]!r} (expected one of: {', '.join(allowed)})")
        missing = [k for k in required if k not in value]
        if missing:
            self.fail(_join(key, missing[0]), "required key is missing")
        return value

    def value(self, value, key: str, kind: str, minimum: float | None = 0, maximum: float | None = None) -> None:
        """``kind``: "n" a number, "i" an integer, "s" a string; "[]" after it: a list of them."""
        if kind.endswith("[]"):
            if not isinstance(value, list):
                self.fail(key, f"expected a list, got {_show(value)}")
            for i, item in enumerate(value):
                self.value(item, f"{key}[{i}]", kind[:-2], minimum, maximum)
            return
        if kind == "s":
            if not isinstance(value, str):
                self.fail(key, f"expected a string, got {_show(value)}")
            return
        if kind == "i":
            value = as_int(value)
        types = (int,) if kind == "i" else (int, float)
        if kind == "i" and isinstance(value, float) and value.is_integer():
            self.fail(key, f"must be below 2**53, got {_show(value)}")
        if not isinstance(value, types) or isinstance(value, bool):
            self.fail(key, f"expected {'an integer' if kind == 'i' else 'a number'}, got {_show(value)}")
        if minimum is not None and value < minimum or maximum is not None and value > maximum:
            bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            self.fail(key, f"must be {bounds}, got {value!r}")


def check_document(doc, source: str) -> None:
    """Check a parsed ``rankmap.json`` against the schema's rules.

    Raises
    ------
    RankMapFileError
        Naming the file, the key path (``summary``, ``summary.plan.gap_to_bound``) and the
        value found: not an object, another schema, an unknown or missing key, a value of
        the wrong type or range.

    Examples
    --------
    >>> check_document({"schema": "rankmap/v2"}, "m.json")
    Traceback (most recent call last):
    ...
    rankmap.errors.RankMapFileError: m.json: schema: expected schema 'rankmap/v1', got 'rankmap/v2'
    """
    c = _Check(source)
    if not isinstance(doc, dict):
        c.fail("", f"expected a JSON object (a rank map), got {_show(doc)}")
    if doc.get("schema") != SCHEMA:
        c.fail("schema", f"expected schema {SCHEMA!r}, got {_show(doc['schema']) if 'schema' in doc else 'no schema key'}")
    c.object(doc, "", _REQUIRED, _REQUIRED + _OPTIONAL)
    cluster = c.object(doc["cluster"], "cluster", ("name", "sha256"), ("name", "sha256"))
    c.value(cluster["name"], "cluster.name", "s")
    c.value(cluster["sha256"], "cluster.sha256", "s")
    if not _SHA256.match(cluster["sha256"]):
        c.fail("cluster.sha256", f"expected 64 lowercase hex digits, got {_show(cluster['sha256'])}")
    c.object(doc["job"], "job", ())
    for key in ("world_size", "nproc_per_node", "num_nodes"):
        c.value(doc[key], key, "i", 1)
    if "nprocs" in doc:
        c.value(doc["nprocs"], "nprocs", "i[]", 1)
    if "context" in doc:
        for key, value in c.object(doc["context"], "context", (), _CONTEXT).items():
            c.value(value, f"context.{key}", "s")
    _summary(c, doc["summary"])
    if not isinstance(doc["ranks"], list) or not doc["ranks"]:
        c.fail("ranks", f"expected a non-empty list of rank entries, got {_show(doc['ranks'])}")


def _summary(c: _Check, s) -> None:
    """One of: a plan's summary, a replan's, or ``{}`` (a map written without a planner)."""
    if not isinstance(s, dict):
        c.fail("summary", f"expected an object (a plan's or a replan's summary), got {_show(s)}")
    if not s:
        return
    if set(s) == {"replan"}:
        r = c.object(s["replan"], "summary.replan", _REPLAN, _REPLAN + tuple(_REPLAN_TIERS))
        if not isinstance(r["replaced"], list):
            c.fail("summary.replan.replaced", f"expected a list, got {_show(r['replaced'])}")
        for i, row in enumerate(r["replaced"]):
            key = f"summary.replan.replaced[{i}]"
            if not isinstance(row, list) or len(row) != 3:
                c.fail(key, f"expected [node rank, old host, new host], got {_show(row)}")
            c.value(row[0], f"{key}[0]", "i")
            c.value(row[1], f"{key}[1]", "s")
            c.value(row[2], f"{key}[2]", "s")
        c.value(r["moved_ranks"], "summary.replan.moved_ranks", "i")
        for key in ("cross_tor_bytes_before", "cross_tor_bytes_after"):
            c.value(r[key], f"summary.replan.{key}", "n")
        for key, kind in _REPLAN_TIERS.items():
            if key in r:
                c.value(r[key], f"summary.replan.{key}", kind, 0)
        return
    c.object(s, "summary", _PLAN)   # a plan's summary may carry more keys
    _metrics(c, s["plan"], "summary.plan")
    c.value(s["lower_bound_bytes"], "summary.lower_bound_bytes", "n")
    c.value(s["bound_method"], "summary.bound_method", "s")
    c.value(s["solver_status"], "summary.solver_status", "s")
    c.value(s["tier_weights"], "summary.tier_weights", "n[]")
    for name, row in c.object(s["baselines"], "summary.baselines", ()).items():
        _metrics(c, row, f"summary.baselines.{name}")
    if "moved_hosts" in s:
        c.value(s["moved_hosts"], "summary.moved_hosts", "i")


def _metrics(c: _Check, row, key: str) -> None:
    c.object(row, key, tuple(_METRICS), tuple(_METRICS))
    for name, (kind, minimum) in _METRICS.items():
        if name == "gap_to_bound" and row[name] is None:
            continue  # no lower bound (e.g. hosts of different GPU counts, packed): no gap
        c.value(row[name], f"{key}.{name}", kind, minimum, 1 if name == "gap_to_bound" else None)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
