"""The rank map reader enforces docs/rankmap.schema.json: the same broken maps are refused by the
reader (naming the key and the value found) and by a JSON Schema validator with the schema file."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rankmap.errors import RankMapFileError
from rankmap.job.rank_map import parse_rankmap, rankmap_to_json
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.placement.plan import plan
from rankmap.topology import parse_cluster

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "rankmap.schema.json").read_text())
CLUSTER = """\
name: small
hosts: {gpus: 8, nics: 8}
tor_groups:
  - {name: a, capacity: 4, hosts: "n[01-04]"}
  - {name: b, capacity: 4, hosts: "n[05-08]"}
"""


@pytest.fixture(scope="module")
def doc():
    job = JobSpec(tp=8, pp=2, dp=2, model=ModelShape(layers=4, hidden=64, heads=8, seq_len=32, vocab=100),
                  num_micro_batches=2)
    return json.loads(rankmap_to_json(plan(parse_cluster(CLUSTER, "c.yaml"), job, time_limit_s=2).rankmap))


def validator():
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(SCHEMA)


def changed(doc, path: str, value):
    """A deep copy of ``doc`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return out


BROKEN = [  # (path, value, what the reader says)
    ("summary", "oops", "summary: expected an object (a plan's or a replan's summary), got 'oops'"),
    ("surplus", 1, "surplus: unknown key 'surplus'"),
    ("schema", "rankmap/v2", "schema: expected schema 'rankmap/v1', got 'rankmap/v2'"),
    ("cluster.sha256", "xyz", "cluster.sha256: expected 64 lowercase hex digits, got 'xyz'"),
    ("cluster.rack", "r1", "cluster.rack: unknown key 'rack'"),
    ("num_nodes", 0, "num_nodes: must be >= 1, got 0"),
    ("world_size", "32", "world_size: expected an integer, got '32'"),
    ("nprocs", [8, 0, 8, 8], "nprocs[1]: must be >= 1, got 0"),
    ("context", {"excluded": "n01", "why": "x"}, "context.why: unknown key 'why'"),
    ("summary.plan.gap_to_bound", 1.5, "summary.plan.gap_to_bound: must be in [0, 1], got 1.5"),
    ("summary.plan.tier_bytes", [1.0, -2.0], "summary.plan.tier_bytes[1]: must be >= 0, got -2.0"),
    ("summary.plan.colour", 1, "summary.plan.colour: unknown key 'colour'"),
    ("summary.lower_bound_bytes", ..., "summary.lower_bound_bytes: required key is missing"),
    ("summary.solver_status", True, "summary.solver_status: expected a string, got True"),
    ("ranks", [], "ranks: expected a non-empty list of rank entries, got []"),
    # integers: a number with a fractional part, a boolean or a string is none, in either
    ("world_size", 32.5, "world_size: expected an integer, got 32.5"),
    ("nprocs", [8, 8.5, 8, 8], "nprocs[1]: expected an integer, got 8.5"),
    ("summary.plan.dp_edges_cross_tor", 0.5, "summary.plan.dp_edges_cross_tor: expected an integer, got 0.5"),
    ("ranks.3.rail", 3.5, "ranks[3].rail: must be an integer >= 0 (as rank, node_rank, local_rank, rail and coordinates all are), got 3.5"),
    ("ranks.3.rail", True, "ranks[3].rail: must be an integer >= 0 (as rank, node_rank, local_rank, rail and coordinates all are), got true"),
    ("ranks.3.rail", "3", "ranks[3].rail: must be an integer >= 0 (as rank, node_rank, local_rank, rail and coordinates all are), got \"3\""),
    ("ranks.3.rail", -1.0, "ranks[3].rail: must be an integer >= 0 (as rank, node_rank, local_rank, rail and coordinates all are), got -1"),
]


@pytest.mark.parametrize("path,value,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_reader_and_schema_refuse_the_same_maps(doc, path, value, message):
    bad = changed(doc, path, value)
    with pytest.raises(RankMapFileError) as err:
        parse_rankmap(json.dumps(bad), "m.json")
    where = "m.json:1" if message.startswith("ranks[") else "m.json"   # an entry's error names its line
    assert str(err.value).startswith(f"{where}: {message}")
    assert not validator().is_valid(bad)


REPLAN = {"replan": {"replaced": [[0, "n01", "n05"]], "moved_ranks": 8, "cross_tor_bytes_before": 0.0,
                     "cross_tor_bytes_after": 1e9}}


@pytest.mark.parametrize("summary,message", [
    ({**REPLAN, "note": 1}, "summary.plan: required key is missing"),   # a replan's summary has one key
    ({"replan": {**REPLAN["replan"], "moved_ranks": -1}}, "summary.replan.moved_ranks: must be >= 0, got -1"),
    ({"replan": {**REPLAN["replan"], "replaced": [[0, "n01"]]}},
     "summary.replan.replaced[0]: expected [node rank, old host, new host], got [0, 'n01']"),
])
def test_replan_summaries_too(doc, summary, message):
    bad = changed(doc, "summary", summary)
    with pytest.raises(RankMapFileError) as err:
        parse_rankmap(json.dumps(bad), "m.json")
    assert str(err.value).startswith(f"m.json: {message}")
    assert not validator().is_valid(bad)


@pytest.mark.parametrize("summary", ["plan", REPLAN, {}])
def test_reader_and_schema_accept_the_same_maps(doc, summary):
    good = doc if summary == "plan" else changed(doc, "summary", summary)
    assert parse_rankmap(json.dumps(good), "m.json").world_size == 32
    validator().validate(good)


def test_a_plan_without_a_bound_has_a_null_gap_in_reader_and_schema(doc):
    good = changed(doc, "summary.plan.gap_to_bound", None)
    assert parse_rankmap(json.dumps(good), "m.json").world_size == 32
    validator().validate(good)
    bad = changed(doc, "summary.plan.gap_to_bound", "none")
    with pytest.raises(RankMapFileError):
        parse_rankmap(json.dumps(bad), "m.json")
    assert not validator().is_valid(bad)


@pytest.mark.parametrize("path", ["world_size", "nproc_per_node", "num_nodes", "ranks.3.rail", "ranks.3.rank",
                                  "ranks.9.node_rank", "ranks.9.local_rank", "ranks.31.dp", "ranks.31.pp",
                                  "summary.plan.dp_edges_cross_tor", "summary.moved_hosts", "job.parallel.tp",
                                  "job.model.layers", "job.batch.micro_batch_size", "job.precision.param_bytes"])
def test_an_integer_written_as_a_float_is_that_integer_in_reader_and_schema(doc, path):
    """JSON has one number type, and JSON Schema 2020-12's "integer" is a number with a zero
    fractional part: the validator accepts ``"rail": 3.0``, so the reader reads it as rail 3."""
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    good = changed(doc, path, float(node.get(last, 2)))
    validator().validate(good)
    text = json.dumps(good)
    assert f'"{last}": {float(node.get(last, 2))!r}' in text
    assert parse_rankmap(text, "m.json") == parse_rankmap(json.dumps(doc), "m.json") or path.startswith("summary")
    assert parse_rankmap(text, "m.json").world_size == 32


def test_a_map_with_nprocs_as_floats_reads_as_integers(doc):
    good = changed(doc, "nprocs", [8.0, 8.0, 8.0, 8.0])
    validator().validate(good)
    assert parse_rankmap(json.dumps(good), "m.json").nprocs == (8, 8, 8, 8)


@pytest.mark.parametrize("path, message", [
    ("world_size", "m.json: world_size: must be below 2**53, got 1e+300"),
    ("ranks.1.rank", "m.json:1: ranks[1].rank: must be an integer >= 0 (as rank, node_rank, local_rank, rail and coordinates all are), got 1e+300"),
])
def test_a_huge_float_is_refused_as_written_not_as_301_digits(doc, path, message):
    """1e300 has a zero fractional part, but past 2**53 a float names no one integer exactly."""
    with pytest.raises(RankMapFileError) as err:
        parse_rankmap(json.dumps(changed(doc, path, 1e300)), "m.json")
    assert str(err.value) == message
