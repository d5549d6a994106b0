"""Shipping a rank map to pods as examples/kubernetes/jobset.yaml says: gzip-compressed it fits a
ConfigMap (1 MiB) far past the size where the plain file does not, and the container's own script,
run by bash, unpacks it and hands torchrun this node's flags."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rankmap.job.rank_map import RankMap, rankmap_to_json
from rankmap.job.spec import JobSpec

REPO = Path(__file__).resolve().parents[2]
CONFIGMAP_BYTES = 1 << 20   # Kubernetes ConfigMap data limit (1 MiB); binaryData is stored base64


def rank_map(tp: int, pp: int, dp: int, gpn: int = 8) -> RankMap:
    hosts = tuple(f"gpu-{i:05d}" for i in range(tp * pp * dp // gpn))
    return RankMap(job=JobSpec(tp=tp, pp=pp, dp=dp, num_micro_batches=pp), cluster_name="c", cluster_hash="0" * 64,
                   hosts=hosts, tor_groups=tuple(f"tg{i // 64:03d}" for i in range(len(hosts))),
                   rails=(tuple(range(gpn)),) * len(hosts), nproc_per_node=gpn)


def test_a_9216_rank_map_fits_a_configmap_only_compressed():
    text = rankmap_to_json(rank_map(tp=8, pp=8, dp=144)).encode()
    packed = gzip.compress(text, compresslevel=9, mtime=0)
    assert len(text) > CONFIGMAP_BYTES                       # the plain file is refused by the API server
    assert 4 * -(-len(packed) // 3) < CONFIGMAP_BYTES // 10  # base64 of the gzip: under a tenth of the limit
    assert len(text) / len(packed) > 15


def test_the_container_script_unpacks_the_map_and_starts_torchrun(tmp_path):
    doc = yaml.safe_load((REPO / "examples" / "kubernetes" / "jobset.yaml").read_text())
    container = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PLAN_DIR"] == "/plan" and env["RANKMAP_FILE"] == "/tmp/rankmap.json"
    plan = tmp_path / "plan"
    plan.mkdir()
    rm = rank_map(tp=2, pp=1, dp=2, gpn=2)
    (plan / "rankmap.json.gz").write_bytes(gzip.compress(rankmap_to_json(rm).encode()))
    bin_dir = tmp_path / "bin"                       # a torchrun that prints what it was given
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text('#!/bin/sh\necho "torchrun $*"\n')
    (bin_dir / "torchrun").chmod(0o755)
    run_env = {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin", "PLAN_DIR": str(plan),
               "RANKMAP_FILE": str(tmp_path / "rankmap.json"), "NODE_NAME": rm.hosts[1], "HOME": str(tmp_path)}
    run = subprocess.run([*container["command"], container["args"][0]], capture_output=True, text=True,
                         env={**run_env, **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == (
        "torchrun --nnodes=2 --nproc-per-node=2 --node-rank=1 --rdzv-backend=static --master-addr=gpu-00000 "
        "--master-port=29500 --max-restarts=0 train.py --lr 3e-4")
    assert (tmp_path / "rankmap.json").read_text() == rankmap_to_json(rm)


def test_strict_json_reader_refuses_what_it_refused_before(tmp_path):
    # The reader checks integers one by one only where a long run of digits exists, and nesting
    # on the parsed document: the same refusals, each naming the file.
    from rankmap.errors import SpecError
    from rankmap.fileio import parse_json
    cases = [('{"a": 1, "b": {"c": 2, "c": 3}}', "m.json:1: duplicate key 'c'"),
             ("[" * 101 + "]" * 101, "m.json: invalid JSON: nested deeper than 100 levels"),
             ("[" * 50_000 + "]" * 50_000, "m.json: invalid JSON: nested deeper than 100 levels"),
             ('{"x": -' + "7" * 41 + "}", "m.json: integer of 42 digits (at most 40)"),
             ('{"x": [Infinity]}', "m.json: Infinity is not a JSON number")]
    for text, message in cases:
        with pytest.raises(SpecError) as err:
            parse_json(text, "m.json")
        assert str(err.value) == message
    # 41 digits inside a string are text, and 100 levels are allowed
    assert parse_json('{"host": "n' + "1" * 41 + '", "n": [1]}', "m.json") == {"host": "n" + "1" * 41, "n": [1]}
    deep: list = []
    for _ in range(99):
        deep = [deep]
    assert parse_json("[" * 100 + "]" * 100, "m.json") == deep


def test_a_duplicate_key_is_located_at_its_repeat():
    # Tester 6: a rank entry with "rank" twice was reported without a line
    from rankmap.errors import SpecError
    from rankmap.fileio import parse_json
    text = '{"ranks": [\n {"rank": 0, "host": "a"},\n {"rank": 1, "host": "a", "rank": 5}\n]}'
    with pytest.raises(SpecError) as err:
        parse_json(text, "m.json")
    assert str(err.value) == "m.json:3: duplicate key 'rank'"
    nested = '{"a": {"b": 1},\n "c": [{"b": 2,\n "b": 3}]}'   # "b" in different objects is no duplicate
    with pytest.raises(SpecError) as err:
        parse_json(nested, "m.json")
    assert str(err.value) == "m.json:3: duplicate key 'b'"
