"""The fuzzing corpus: every parser rankmap has, its seed inputs, and a mutator.

Used by the short hypothesis run in the test suite (``tests/fuzz``) and by the long run in
``benchmarks/fuzz.py``. A parser may return a value or raise a ``RankmapError`` (a clear
message for the user); anything else -- another exception, a hang -- is a bug. Seeds come
from the embedded examples and from a folder of field cases the caller names (the
repository's ``tests/data/field-cases``).
"""

from __future__ import annotations

import json
from pathlib import Path

from rankmap.examples import example_path
from rankmap.job.rank_map import parse_rankmap, rankmap_to_json
from rankmap.job.spec import parse_job
from rankmap.topology.importers import import_text
from rankmap.topology.spec import parse_cluster

TOKENS = ["\n", " ", "\t", "=", ",", "[", "]", "-", ":", "{", "}", "#", '"', "'", "0", "7", "64", "-1",
          "1e999", "nan", "null", "true", "&a", "*a", "!!python/object", "<<", "\\", "\x00", "é", "$(id)", ";"]


def _seed_rankmap() -> str:
    from rankmap.job.spec import load_job
    from rankmap.placement.plan import plan
    from rankmap.topology.spec import load_cluster
    cluster = load_cluster(example_path("racks", "cluster.yaml"))
    job = load_job(example_path("racks", "job.yaml"), {"tp": 8, "pp": 2, "dp": 2, "model": "gpt3-1.3b"})
    return rankmap_to_json(plan(cluster, job, time_limit_s=1).rankmap)


def parsers(cases: str | Path) -> dict:
    """``{name: (parse(text), [seed texts])}`` for every input format rankmap reads.

    ``cases`` is a folder holding the field-case seed files (slurm-tree-forward-refs.conf,
    slurm-islands.conf, slurm-block.conf, hostfile-heterogeneous-slots.txt,
    k8s-nodes-aws-layers.json).
    """
    read = lambda name: (Path(cases) / name).read_text()
    return {
        "cluster-yaml": (lambda t: parse_cluster(t, "fuzz.yaml"),
                         [example_path("racks", "cluster.yaml").read_text()]),
        "job-yaml": (lambda t: parse_job(t, "fuzz.yaml"),
                     [example_path("megascale-12k", "job.yaml").read_text()]),
        "slurm-tree": (lambda t: import_text("slurm", t, "fuzz.conf"),
                       [read("slurm-tree-forward-refs.conf"), read("slurm-islands.conf")]),
        "slurm-block": (lambda t: import_text("slurm-block", t, "fuzz.conf"), [read("slurm-block.conf")]),
        "hostfile": (lambda t: import_text("hostfile", t, "fuzz.txt"), [read("hostfile-heterogeneous-slots.txt")]),
        "k8s-labels": (lambda t: import_text("k8s-labels", t, "fuzz.json"), [read("k8s-nodes-aws-layers.json")]),
        "volcano": (lambda t: import_text("volcano", t, "fuzz.yaml"), [_volcano_seed()]),
        "rankmap-json": (lambda t: parse_rankmap(t, "fuzz.json"), [_seed_rankmap()]),
    }


def _volcano_seed() -> str:
    return ("apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: s0}\n"
            "spec:\n  tier: 1\n  members:\n  - type: Node\n    selector:\n      exactMatch: {name: n1}\n"
            "  - type: Node\n    selector:\n      regexMatch: {pattern: 'n[2-3]'}\n")


def mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply edits ``(kind, position, token)``: 0 delete a char, 1 insert a token, 2 replace
    a char, 3 truncate, 4 duplicate a line."""
    for kind, pos, token in edits:
        if not text:
            text = token
            continue
        pos %= len(text)
        if kind == 0:
            text = text[:pos] + text[pos + 1:]
        elif kind == 1:
            text = text[:pos] + token + text[pos:]
        elif kind == 2:
            text = text[:pos] + token + text[pos + 1:]
        elif kind == 3:
            text = text[:pos]
        else:
            lines = text.split("\n")
            i = pos % len(lines)
            text = "\n".join(lines[:i + 1] + lines[i:])
    return text


def json_variants(text: str) -> list[str]:
    """Structured JSON mutations: keys dropped, values swapped for odd types."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return []
    out = []
    if isinstance(doc, dict):
        for key in list(doc)[:6]:
            for odd in (None, -1, "x", [], {}, 1e308, True):
                changed = dict(doc)
                changed[key] = odd
                out.append(json.dumps(changed))
    return out
