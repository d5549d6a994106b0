"""rankmap.json against its published JSON Schema (docs/rankmap.schema.json): scripts can rely on it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rankmap import api
from rankmap.examples import example_inputs
from rankmap.job.rank_map import rankmap_to_json
from rankmap.placement.constraints import PlacementConstraints
from rankmap.placement.result import metrics_row

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "rankmap.schema.json").read_text())


@pytest.fixture(scope="module")
def result():
    cluster_path, job_path = example_inputs("racks", None, None)
    cluster = api.load_cluster(cluster_path)
    return cluster, api.plan(cluster, api.load_job(job_path, {"dp": 12}),
                             constraints=PlacementConstraints(exclude=("gpu-r1-n01",)))


def test_a_plan_validates_against_the_schema(result):
    _, res = result
    doc = json.loads(rankmap_to_json(res.rankmap))
    jsonschema.validate(doc, SCHEMA)
    assert doc["context"] == {"excluded": "gpu-r1-n01"}


def test_every_metric_is_defined_once_in_the_schema(result):
    _, res = result
    row = metrics_row(res.ours, res.lower_bound_bytes)
    defined = SCHEMA["$defs"]["metrics"]["properties"]
    assert set(row) == set(defined)
    assert all(len(defined[k]["description"]) > 20 for k in row)


def test_the_schema_refuses_what_readers_refuse(result):
    _, res = result
    doc = json.loads(rankmap_to_json(res.rankmap))
    for broken in ({**doc, "schema": "rankmap/v0"}, {**doc, "cluster": {"name": "c", "sha256": "xyz"}},
                   {**doc, "ranks": [{**doc["ranks"][0], "rack": 1}] + doc["ranks"][1:]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SCHEMA)


def test_a_replanned_map_validates_against_the_schema(result):
    cluster, res = result
    first = res.rankmap.hosts[0]
    again = api.replan(cluster, res.rankmap, [first])
    doc = json.loads(rankmap_to_json(again.rankmap))
    jsonschema.validate(doc, SCHEMA)
    replaced = doc["summary"]["replan"]["replaced"]
    assert len(replaced) == 1 and replaced[0][:2] == [0, first] and doc["context"]["failed"] == first
    for broken in ({"replan": {**doc["summary"]["replan"], "moved_ranks": -1}},
                   {**doc["summary"], "plan": json.loads(rankmap_to_json(res.rankmap))["summary"]["plan"]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "summary": broken}, SCHEMA)
