"""Rank maps read from the writer's rank lines straight into columns: the same map, the same errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rankmap.errors import RankMapFileError
from rankmap.job.rank_map import RankMap, parse_rankmap, rankmap_to_json, read_rankmap
from rankmap.job.rank_map_text import rank_columns, split_written
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.topology import parse_cluster

TINY = ModelShape(layers=4, hidden=64, heads=8, seq_len=32, vocab=100)


@pytest.fixture
def written(small_cluster_text):
    cluster = parse_cluster(small_cluster_text, "small.yaml")
    hosts = [h.name for h in cluster.hosts][:6]
    rm = RankMap.from_hosts(JobSpec(tp=8, pp=2, dp=3, model=TINY, num_micro_batches=2), cluster, hosts, 8)
    return rm, rankmap_to_json(rm)


def columns(text):
    found = split_written(text)
    return None if found is None else rank_columns(text, *found[1:])


def whole(text):
    """The same document in another layout (one line): read by the full JSON parse."""
    return json.dumps(json.loads(text))


def test_written_lines_become_columns(written):
    rm, text = written
    cols = columns(text)
    assert cols is not None
    assert cols["rank"].tolist() == list(range(48))
    assert cols["node_rank"].tolist() == [r // 8 for r in range(48)]
    assert cols["local_rank"].tolist() == cols["rail"].tolist() == [r % 8 for r in range(48)]
    assert cols["tp"].tolist() == [r % 8 for r in range(48)]          # order tp-cp-ep-dp-pp: tp fastest
    distinct, code = cols["host"]
    assert [distinct[c] for c in code.tolist()] == [rm.hosts[r // 8] for r in range(48)]
    assert code.dtype == np.int64 and len(distinct) == 6
    assert parse_rankmap(text) == parse_rankmap(whole(text)) == rm


def test_pieces_join_at_line_ends(written, monkeypatch):
    _, text = written
    monkeypatch.setattr("rankmap.job.rank_map_text._PIECE_CHARS", 500)   # ~4 lines a piece
    cols = columns(text)
    assert cols["rank"].tolist() == list(range(48)) and len(cols["host"][0]) == 6


@pytest.mark.parametrize("old, new", [
    ('{"rank": 5, ', '{"rank": 4, '),                                   # rank 4 twice
    ('"local_rank": 5, ', '"local_rank": 4, '),                         # GPU 4 given two ranks
    ('"rank": 9, "host": "', '"rank": 9, "host": "x'),                  # host disagrees with its node
    ('"rank": 3, "host": "', '"rank": 3, "host": "bad host '),            # not a hostname
    ('"tp": 3, "cp": 0', '"tp": 2, "cp": 0'),                           # coordinates not the job's
    ('}\n  ]\n}', '},\n  ]\n}'),                                         # invalid JSON: a trailing comma
    ('"rail": 6', '"rail": 06'),                                        # invalid JSON: a leading zero
])
def test_broken_lines_give_the_full_parse_error(written, old, new):
    _, text = written
    assert old in text
    bad = text.replace(old, new, 1)
    with pytest.raises(RankMapFileError) as fast:
        parse_rankmap(bad, "m.json")
    if "invalid JSON" in str(fast.value):     # a syntax error names its line in this layout
        line = bad[:bad.index(new)].count("\n") + 1
        assert fast.value.line in (line, line + 1)    # the edited line, or the "]" after a trailing comma
        return
    with pytest.raises(RankMapFileError) as full:
        parse_rankmap(whole(bad), "m.json")
    assert (fast.value.message, fast.value.key) == (full.value.message, full.value.key)
    # each names the entry's line: the edited line here, line 1 in the one-line layout
    assert (fast.value.line, full.value.line) == (text[:text.index(old)].count("\n") + 1, 1)


@pytest.mark.parametrize("old, new", [
    ('"rail": 1, ', '"rail": 1.0, '),                                   # 1.0 is 1, as for the schema
    ('"host": "', '"host": "\\u00'),                                    # an escape (spelled out below)
    ('"tp": 0, "cp": 0', '"cp": 0, "tp": 0'),                           # keys in another order
])
def test_other_spellings_of_valid_lines_are_read_whole(written, old, new):
    rm, text = written
    if new.endswith("\\u00"):
        host = rm.hosts[0]
        old, new = f'"host": "{host}"', '"host": "' + "".join(f"\\u{ord(ch):04x}" for ch in host) + '"'
    other = text.replace(old, new, 1)
    assert other != text and columns(other) is None
    assert parse_rankmap(other) == rm


def test_a_written_map_is_never_parsed_whole(written, monkeypatch):
    rm, text = written
    import rankmap.job.rank_map_read as rank_map

    parsed = []
    real = rank_map.parse_json
    monkeypatch.setattr(rank_map, "parse_json", lambda t, source: parsed.append(t) or real(t, source))
    assert parse_rankmap(text) == rm
    assert len(parsed) == 1 and '"rank"' not in parsed[0] and parsed[0].endswith('"ranks": []\n}\n')
    parsed.clear()
    parse_rankmap(whole(text))                       # another layout: parsed whole
    assert len(parsed) == 1 and parsed[0].count('"rank"') == 48


def test_a_file_read_from_bytes_gives_the_map_and_the_decoding_error(written, tmp_path):
    rm, text = written
    path = tmp_path / "rankmap.json"
    path.write_text(text)
    assert read_rankmap(path) == rm
    data = text.encode()
    at = data.index(b'"rank": 20, "host": "') + len(b'"rank": 20, "host": "')
    path.write_bytes(data[:at] + b"\xff" + data[at:])            # not UTF-8, inside the rank lines
    with pytest.raises(RankMapFileError) as exc:
        read_rankmap(path)
    assert exc.value.line == data[:at].count(b"\n") + 1 and "not UTF-8 text" in str(exc.value)
