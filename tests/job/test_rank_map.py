"""Rank maps: write, read back, validate, and refuse what is wrong."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rankmap.errors import RankMapFileError
from rankmap.job.rank_map import read_rankmap, write_plan_files
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.placement.plan import plan
from rankmap.topology import parse_cluster

TINY = ModelShape(layers=4, hidden=64, heads=8, seq_len=32, vocab=100)


@pytest.fixture
def planned(small_cluster_text, tmp_path):
    cluster = parse_cluster(small_cluster_text, "small.yaml")
    result = plan(cluster, JobSpec(tp=8, pp=2, dp=3, model=TINY, num_micro_batches=2), time_limit_s=2)
    write_plan_files(result.rankmap, tmp_path / "out")
    return cluster, result, tmp_path / "out"


def test_round_trip(planned):
    cluster, result, out = planned
    again = read_rankmap(out / "rankmap.json")
    assert again == result.rankmap
    again.verify_cluster(cluster)
    doc = json.loads((out / "rankmap.json").read_text())
    assert doc["schema"] == "rankmap/v1" and doc["world_size"] == 48 and len(doc["ranks"]) == 48
    first = doc["ranks"][9]
    assert set(first) >= {"rank", "host", "local_rank", "node_rank", "tor_group", "rail", "tp", "pp", "dp", "cp", "ep"}
    assert (first["rank"], first["node_rank"], first["local_rank"], first["rail"]) == (9, 1, 1, 1)


def test_hostfile_order_reproduces_the_map(planned):
    _, result, out = planned
    hosts = (out / "hostfile").read_text().split()
    ranks = json.loads((out / "rankmap.json").read_text())["ranks"]
    # a launcher started with this hostfile and 8 processes per host gives rank = node*8 + local
    for rec in ranks:
        assert hosts[rec["rank"] // 8] == rec["host"] and rec["rank"] % 8 == rec["local_rank"]
    assert len(set(hosts)) == len(hosts) == 6


def edit(out, fn):
    path = out / "rankmap.json"
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["ranks"].pop(), "47 ranks listed, the job has 48"),
    (lambda d: d["ranks"][5].update(rank=4), "rank 4 is out of range or listed twice"),
    (lambda d: d["ranks"][5].update(local_rank=4), "GPU 4 of host"),           # one rank on two GPUs
    (lambda d: d["ranks"][8].update(host="zz99"), "disagree"),
    (lambda d: d["ranks"][3].update(dp=1), "the job's order 'tp-cp-ep-dp-pp' gives"),
    (lambda d: d["ranks"][3].update(host="$(id)"), "bad host '$(id)'"),
    (lambda d: d.update(schema="rankmap/v0"), "expected schema"),
    (lambda d: d["ranks"][2].pop("rail"), "exactly the keys"),
    (lambda d: d["job"]["parallel"].update(tp=3), "job"),
])
def test_bad_rank_maps_are_rejected(planned, mutate, message):
    _, _, out = planned
    with pytest.raises(RankMapFileError) as err:
        read_rankmap(edit(out, mutate))
    assert message in str(err.value)
    assert str(err.value).startswith(str(out / "rankmap.json"))


def test_map_for_another_cluster_is_rejected(planned, small_cluster_text):
    _, _, out = planned
    other = parse_cluster(small_cluster_text.replace("n[05-08]", "n[05-09]").replace("capacity: 4\n    hosts: \"n[05",
                                                                                     "capacity: 5\n    hosts: \"n[05"))
    with pytest.raises(RankMapFileError, match="was made for cluster 'small' as it was then \\(sha256 [0-9a-f]{12}"
                                               "\\.\\.\\.\\): its spec has changed since"):
        read_rankmap(out / "rankmap.json").verify_cluster(other)
    renamed = dataclasses.replace(other, name="large")
    with pytest.raises(RankMapFileError, match="made for cluster 'small' \\(sha256 [0-9a-f]{12}\\.\\.\\.\\), not for "
                                               "'large'"):
        read_rankmap(out / "rankmap.json").verify_cluster(renamed)


def test_not_json(tmp_path):
    (tmp_path / "r.json").write_text("{not json")
    with pytest.raises(RankMapFileError, match="not a JSON rank map"):
        read_rankmap(tmp_path / "r.json")


def test_framework_and_expert_tp_survive_the_rank_map_file(tmp_path):
    from rankmap.job.rank_map import RankMap, read_rankmap, write_plan_files
    from rankmap.job.spec import JobSpec, ModelShape

    moe = ModelShape(layers=4, hidden=64, heads=4, seq_len=64, experts=8)
    job = JobSpec(tp=2, cp=2, ep=4, etp=1, dp=2, model=moe, num_micro_batches=1, framework="megatron",
                  framework_version="0.12")
    rm = RankMap(job=job, cluster_name="c", cluster_hash="0" * 64, hosts=("a",), tor_groups=("t",),
                 rails=(tuple(range(8)),), nproc_per_node=8)
    write_plan_files(rm, tmp_path)
    back = read_rankmap(tmp_path / "rankmap.json")
    assert back.job == job and (back.job.etp, back.job.framework_version) == (1, "0.12")
    assert [back.entry(r)["ep"] for r in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]   # place in the folded EP group


def _entries_one_by_one(rm) -> str:
    """rankmap.json as the schema spells it: the head, then ``json.dumps`` of each rank's entry dict."""
    from rankmap.job.rank_map import ENTRY_KEYS, rankmap_json_chunks
    head = next(rankmap_json_chunks(rm))
    entries = [json.dumps({k: e[k] for k in ENTRY_KEYS}) for e in map(rm.entry, range(rm.world_size))]
    return head + ",\n".join("    " + e for e in entries) + "\n  ]\n}\n"


@pytest.mark.parametrize("chunk", [1, 3, 16, 1000])
def test_streamed_json_is_the_entries_one_by_one(chunk):
    # Hosts of 4 and 2 GPUs (nprocs listed), rails shared by GPU pairs, CP and EP coordinates that vary
    # across hosts; the rank lines formatted from columns, in pieces of `chunk` ranks, read byte for byte
    # as json.dumps of each entry.
    from rankmap.job.rank_map import RankMap, rankmap_json_chunks, rankmap_to_json
    job = JobSpec(tp=2, cp=2, ep=2, dp=2, pp=2, num_micro_batches=2,
                  model=ModelShape(layers=4, hidden=64, heads=8, seq_len=32, vocab=100, experts=4))
    nprocs = [4, 2, 4, 2, 4]
    rm = RankMap(job=job, cluster_name="c", cluster_hash="0" * 64, hosts=("h-1", "h-2", "H3", "h-4", "h5"),
                 tor_groups=("t1", "t1", "t2", "t2", "t\u00e93"),
                 rails=tuple(tuple(lr // 2 for lr in range(n)) for n in nprocs), nproc_per_node=4,
                 summary={"b": 1, "a": [0.5]}, context={"excluded": "x[1-2]"})
    want = _entries_one_by_one(rm)
    # rank 15 = tp 1 + 2 cp 1 + 4 dp 1 + 8 pp 1; expert order tp-ep-dp-pp: 15 = 1 + 2 ep 1 + 4 edp 1 + 8 pp 1
    assert want.endswith('{"rank": 15, "host": "h5", "node_rank": 4, "local_rank": 3, "tor_group": "t\\u00e93", '
                         '"rail": 1, "tp": 1, "cp": 1, "ep": 1, "dp": 1, "pp": 1}\n  ]\n}\n')
    assert "".join(rankmap_json_chunks(rm, ranks_per_chunk=chunk)) == want == rankmap_to_json(rm)
    assert json.loads(want)["ranks"][13] == rm.entry(13)


@pytest.mark.parametrize("shuffle", [False, True])
def test_columns_read_the_map_the_entry_by_entry_check_reads(planned, monkeypatch, shuffle):
    # Valid maps (entries in rank order, and shuffled, with a rail given as 1.0 in the shuffled one):
    # the column check and the entry-by-entry check (forced by making the column check give up)
    # read the same map; the float sends even the first read down the entry-by-entry path.
    import random

    import rankmap.job.rank_map_read as rank_map_module
    from rankmap.job.rank_map import parse_rankmap
    _, result, out = planned
    doc = json.loads((out / "rankmap.json").read_text())
    if shuffle:
        random.Random(7).shuffle(doc["ranks"])
        doc["ranks"][0]["rail"] = float(doc["ranks"][0]["rail"])
    text = json.dumps(doc)
    by_columns = parse_rankmap(text, "m.json")
    monkeypatch.setattr(rank_map_module, "columns_of_entries", lambda *args: None)
    one_by_one = parse_rankmap(text, "m.json")
    assert by_columns == one_by_one == result.rankmap and by_columns.rails == one_by_one.rails


def _upper_host_of_node_1(doc):
    for rec in doc["ranks"]:
        if rec["node_rank"] == 1:
            rec["host"] = doc["ranks"][0]["host"].upper()        # node 0's host in capitals


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["ranks"][9].update(rail=True), "ranks[9].rail: must be an integer >= 0"),
    (lambda d: d["ranks"][4].update(rail=-1), "ranks[4].rail: must be an integer >= 0"),
    (_upper_host_of_node_1, "disagree with earlier entries"),
    (lambda d: d["ranks"][9].update(tor_group="other"), "name ToR groups"),
    (lambda d: d["ranks"][7].update(tp=2 ** 70), "the job's order 'tp-cp-ep-dp-pp' gives"),
    (lambda d: d["ranks"][7].update(node_rank=6), "must be the ranks before its node plus its local_rank"),
])
def test_what_the_columns_refuse_the_entries_name(planned, mutate, message):
    # Faults the column check must not let through; the entry-by-entry check names each (and is
    # what reports it either way).
    import rankmap.job.rank_map_read as rank_map_module
    from rankmap.job.rank_map_columns import columns_of_entries
    _, result, out = planned
    doc = json.loads((out / "rankmap.json").read_text())
    mutate(doc)
    nprocs = [8] * (result.rankmap.world_size // 8)
    assert columns_of_entries(doc["ranks"], nprocs, result.rankmap.layout, rank_map_module.ENTRY_KEYS) is None
    with pytest.raises(RankMapFileError) as err:
        rank_map_module.parse_rankmap(json.dumps(doc), "m.json")
    assert message in str(err.value)


def test_a_map_plan_wrote_is_read_back_past_the_input_limit(planned, monkeypatch):
    # The input limit (64 MiB) is below what plan writes for 100,000 hosts (130 MB): a rank map
    # may take 4 KiB per host the cluster may hold. Shrunk here: limit 100 bytes, 6 hosts of
    # allowance (24 KiB) hold this 48-rank map; 1 host's (4 KiB) does not; the environment
    # variable, when set, is the limit.
    from rankmap import names
    from rankmap.job import rank_map_read as rank_map

    _, result, out = planned
    size = (out / "rankmap.json").stat().st_size
    assert 4096 < size < 6 * 4096
    monkeypatch.setattr(rank_map, "MAX_INPUT_BYTES", 100)
    monkeypatch.delenv("RANKMAP_MAX_INPUT_BYTES", raising=False)
    monkeypatch.setattr(names, "MAX_HOSTS", 6)
    assert read_rankmap(out / "rankmap.json") == result.rankmap
    monkeypatch.setattr(names, "MAX_HOSTS", 1)
    with pytest.raises(RankMapFileError, match=f"file is {size} bytes, over the limit of 4096"):
        read_rankmap(out / "rankmap.json")
    monkeypatch.setattr(names, "MAX_HOSTS", 6)
    monkeypatch.setenv("RANKMAP_MAX_INPUT_BYTES", "100")
    with pytest.raises(RankMapFileError, match="over the limit of 100 "):
        read_rankmap(out / "rankmap.json")


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize("old, new, message", [
    ('"rank": 20, ', '"rank": 20.5, ', "ranks[20].rank: must be an integer >= 0"),
    ('"rank": 20, ', '"rank": 2e1, ', None),                 # integer-valued, as JSON Schema reads it: rank 20
    ('"rank": 20, ', '"rank": 20.000000000000000001, ', "number 20.000000000000000001 reads as 20 (binary64 "
                                                           "rounds it) but is not that integer"),
    ('"rank": 0, ', '"rank": 1e-400, ', "number 1e-400 reads as 0 (binary64 rounds it) but is not that integer"),
    ('"rank": 20, ', '"rank": true, ', "ranks[20].rank: must be an integer >= 0"),
    ('"rank": 20, ', '"rank": 19, ', "ranks[20].rank: rank 19 is out of range or listed twice"),
])
def test_every_rank_line_error_names_its_line(planned, old, new, message):
    """The writer's layout (one rank a line) edited by hand: the full parse names the line."""
    _, _, out = planned
    path = out / "rankmap.json"
    text = path.read_text()
    line = _line_of(text, old)
    path.write_text(text.replace(old, new, 1))
    if message is None:
        assert read_rankmap(path).hosts == read_rankmap(out / "rankmap.json").hosts
        return
    with pytest.raises(RankMapFileError) as err:
        read_rankmap(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and message in str(err.value), str(err.value)


def test_entry_errors_name_the_line_in_any_layout(planned):
    _, _, out = planned
    doc = json.loads((out / "rankmap.json").read_text())
    doc["ranks"][30]["rank"] = 0.5
    for indent in (None, 2):
        path = out / f"bad-{indent}.json"
        text = json.dumps(doc, indent=indent)
        path.write_text(text)
        want = 1 if indent is None else _line_of(text, '"rank": 0.5') - 1   # the entry's "{" line
        with pytest.raises(RankMapFileError, match=f"^{path}:{want}: ranks\\[30\\].rank: must be an integer"):
            read_rankmap(path)
