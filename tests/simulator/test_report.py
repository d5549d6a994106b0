"""The result document, the figure, and their atomic write."""

from __future__ import annotations

import json

import pytest

from rankmap.errors import RankmapError
from rankmap.fileio import atomic_write_files as write_outputs
from rankmap.simulator.collectives import CollectiveConfig
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import job_comm_ops
from rankmap.simulator.network import Network
from rankmap.simulator.plot import render_png
from rankmap.simulator.report import document_json, placement_summary, round_floats, simulation_document
from rankmap.simulator.stats import sweep_iteration


@pytest.fixture(scope="module")
def swept(racks_plan):
    cluster, result = racks_plan
    net = Network(cluster)
    rm = result.rankmap
    pl = RankPlacement.from_rankmap(rm, net)
    ops = job_comm_ops(result.job)
    return net, result, pl, ops, sweep_iteration(net, pl, rm.layout, ops, [0, 1])


def test_document_is_rounded_ordered_and_complete(swept):
    net, result, pl, ops, sweep = swept
    entry = placement_summary(net, "rankmap plan", pl, sweep)
    doc = simulation_document(net, result.job, "racks", ops, CollectiveConfig(), EcmpConfig(), [entry])
    text = document_json(doc)
    assert text == document_json(simulation_document(net, result.job, "racks", ops, CollectiveConfig(), EcmpConfig(),
                                                     [placement_summary(net, "rankmap plan", pl, sweep)]))
    back = json.loads(text)
    assert list(back) == ["schema", "cluster", "job", "traffic", "config", "placements"]
    assert back["traffic"]["collectives"][0] == {"kind": "tp", "op": "allreduce", "size_bytes": 20971520,
                                                 "count": 320, "phase": "pipeline"}
    p = back["placements"][0]
    assert p["comm_time_s"]["mean"] == float(f"{sweep.comm_time_s.mean():.6g}")
    assert [q["name"] for q in p["phases"]] == ["dp-gather", "pipeline", "dp-reduce"]
    slow = p["slowest_group"]          # the plan's longest phase is the pipeline: TP on NVLink
    assert (slow["phase"], slow["collective"], slow["size"], slow["hosts"]) == ("pipeline", "tp allreduce", 8, 1)
    assert len(slow["tor_groups"]) == 1
    assert sum(p["uplink_bytes_per_tor_group"].values()) == pytest.approx(
        float(sweep.first.uplink_bytes(net).sum()), rel=1e-5)


def test_collectives_carry_nccl_tests_algbw_and_busbw(swept):
    net, result, pl, ops, sweep = swept
    doc = simulation_document(net, result.job, "racks", ops, CollectiveConfig(), EcmpConfig(),
                              [placement_summary(net, "rankmap plan", pl, sweep)])
    parts = {c["collective"]: c for ph in doc["placements"][0]["phases"] for c in ph["collectives"]}
    tp = parts["tp allreduce"]                         # 320 all-reduces of 20 MiB in 8-rank groups
    per_op_s = tp["group_time_s"]["max"] / 320
    assert (tp["size_bytes"], tp["count"]) == (20971520, 320)
    assert tp["algbw_gbps"] == pytest.approx(20971520 / per_op_s / 1e9, rel=1e-5)
    assert tp["busbw_gbps"] == pytest.approx(tp["algbw_gbps"] * 2 * 7 / 8, rel=1e-5)   # 2(n-1)/n
    gather = parts["dp allgather"]
    n = gather["group_size"]
    assert gather["busbw_gbps"] == pytest.approx(gather["algbw_gbps"] * (n - 1) / n, rel=1e-5)
    assert "algbw_gbps" not in parts.get("pp p2p", {})                                 # sends are no collective


def test_round_floats():
    assert round_floats([1 / 3, {"x": 2.0e-7 / 3}]) == [0.333333, {"x": 6.66667e-08}]


def test_png_is_deterministic_and_has_no_software_tag(swept):
    net, result, pl, ops, sweep = swept
    one = render_png(net, [("plan", sweep), ("again", sweep)], "racks")
    two = render_png(net, [("plan", sweep), ("again", sweep)], "racks")
    assert one == two and one[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"Software" not in one and b"matplotlib" not in one


def test_write_outputs_is_all_or_nothing(tmp_path):
    out = tmp_path / "out"
    write_outputs(out, {"a.json": b"1", "b.png": b"2"})
    with pytest.raises(RankmapError, match="bad output file name"):
        write_outputs(out, {"a.json": b"new", "../b.png": b"x"})
    assert (out / "a.json").read_bytes() == b"1" and sorted(p.name for p in out.iterdir()) == ["a.json", "b.png"]
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(RankmapError, match="file: is a file, not a folder"):
        write_outputs(blocked / "sub", {"a.json": b"1"})
