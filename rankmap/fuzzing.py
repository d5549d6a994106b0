"""The fuzzing corpus: every parser rankmap has, its seed inputs, mutators and grammar-aware generators.

Used by the short hypothesis run in the test suite (``tests/fuzz``) and by the long run in
``benchmarks/fuzz.py``. A parser may return a value or raise a ``RankmapError`` (a clear
one-line message for the user); anything else -- another exception, a hang, or a value
holding a name outside its grammar (:mod:`rankmap.names`) -- is a bug. Seeds come from the
embedded examples and from a folder of field cases the caller names (the repository's
``tests/data/field-cases``).

Three kinds of input per parser:

- mutations of the seeds (:func:`mutate`) and token soup (:data:`TOKENS`);
- the seed's format with hostile names put where names go (:func:`hostile_name`: shell
  metacharacters, IPv6 zone ids, newlines, other spellings of one IPv4 address, case
  variants, over-long names) -- :func:`structured`;
- hostile numbers and shapes: integers past Python's 4,300-digit limit, values past a
  C long, ``nan``/``inf``, deep nesting, duplicate keys -- also :func:`structured`.
"""

from __future__ import annotations

import ipaddress
import json
import random
from pathlib import Path

from rankmap.examples import example_path
from rankmap.job.rank_map import RankMap, parse_rankmap, rankmap_to_json
from rankmap.job.spec_file import parse_job
from rankmap.names import host_problem, name_problem
from rankmap.topology.importers import import_text
from rankmap.topology.model import Cluster
from rankmap.topology.spec import parse_cluster

__all__ = ["TOKENS", "parsers", "mutate", "json_variants", "valid_name", "hostile_name", "structured", "names_ok"]

TOKENS = ["\n", " ", "\t", "=", ",", "[", "]", "-", ":", "{", "}", "#", '"', "'", "0", "7", "64", "-1",
          "1e999", "nan", "null", "true", "&a", "*a", "!!python/object", "<<", "\\", "\x00", "é", "$(id)", ";"]

# Pieces of hostile names: what a shell, a hostfile reader, YAML or rich would give a meaning to.
SHELL = [";", "$(id)", "`id`", "|", "&", ">", "<", "'", '"', "\\", " ", "\t", "\n", "\r", "*", "?", "~", "#",
         "!", "{a,b}", "$IFS", "${x}", "%eth0", "%25", "\u200b", "é", "[", "]", ",", "=", ":", "/", "[red]", "\x1b["]
BASES = ["n1", "gpu-r1-n01", "fe80::1", "fd00::12", "10.0.0.1", "010.0.0.1", "0xa.0.0.1", "167772161", "10.1",
         "::ffff:10.0.0.1", "FD00::12", "N1", "GPU-R1-N01", "n1.", "-n1", "n1-", "yes", "on", "true", "null",
         "1", "a" * 63, "a" * 64, "a" * 254, "tg00", "spine1", "s#1"]
NUMBERS = ["9" * 5000, "-" + "9" * 5000, "99999999999999999999", "9223372036854775808", "-1", "0", "1e999",
           "-1e999", ".nan", ".inf", "-.inf", "nan", "0x10", "1_000", "0o17", "2**31"]


def valid_name(rng: random.Random) -> str:
    """A random name, nearly always in the host grammar: RFC 1123 labels, or a canonical IPv4 or IPv6
    address (a last label of digits only, which the grammar refuses, comes up now and then)."""
    roll = rng.random()
    if roll < 0.15:
        return ".".join(str(rng.randrange(256)) for _ in range(4))
    if roll < 0.25:
        return str(ipaddress.IPv6Address(rng.getrandbits(128)))
    chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"
    labels = []
    for _ in range(rng.randint(1, 3)):
        inner = "".join(rng.choice(chars) for _ in range(rng.randint(0, 20)))
        labels.append(rng.choice(chars[:-1]) + (inner + rng.choice(chars[:-11]) if inner else ""))
    return ".".join(labels)


def hostile_name(rng: random.Random) -> str:
    """A name built from a base (valid host names, other spellings of one IPv4 address, case
    variants, IPv6 with zone ids, YAML booleans, random names of the grammar) with zero to three
    hostile pieces inserted."""
    name = rng.choice(BASES) if rng.random() < 0.6 else valid_name(rng)
    roll = rng.random()
    if roll < 0.2:
        return name  # the base alone: valid and invalid spellings both
    if roll < 0.3:
        return name + rng.choice(["%eth0", "%eth0;id", "%$(id)", "%e th0", "\n", "\r\n", "%0\nid"])
    for _ in range(rng.randint(1, 3)):
        pos = rng.randint(0, len(name))
        name = name[:pos] + rng.choice(SHELL) + name[pos:]
    return name


def _seed_rankmap() -> str:
    from rankmap.job.spec_file import load_job
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


def _volcano_seed(name: str = "s0", node: str = "n1", pattern: str = "n[2-3]") -> str:
    return (f"apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {{name: {json.dumps(name)}}}\n"
            f"spec:\n  tier: 1\n  members:\n  - type: Node\n    selector:\n      exactMatch: {{name: {json.dumps(node)}}}\n"
            f"  - type: Node\n    selector:\n      regexMatch: {{pattern: {json.dumps(pattern)}}}\n")


def structured(parser: str, rng: random.Random, seed: str = "") -> str:
    """One grammar-aware input for ``parser``: the format's own syntax, with a hostile name,
    number or shape where a name, number or nesting goes."""
    h, g, n = hostile_name(rng), hostile_name(rng), rng.choice(NUMBERS)
    q = json.dumps  # a JSON string is a valid YAML double-quoted scalar: the hostile text arrives as is
    depth = rng.choice([50, 101, 1000, 100_000])
    if parser == "cluster-yaml":
        return rng.choice([
            f"name: {q(g)}\ntor_groups:\n  - name: {q(g)}\n    hosts: [{q(h)}, n2]\n",
            f"tor_groups:\n  - name: tg\n    hosts: [n1, {q(h)}]\n",
            f"tor_groups:\n  - name: tg\n    hosts: {q('n[1-2],' + h)}\nhosts: {{gpus: {n}}}\n",
            f"tor_groups:\n  - {{name: a, hosts: n1}}\n  - {{name: b, hosts: n2}}\nswitches:\n  - name: {q(g)}\n"
            f"    children: [a, b]\n",
            f"links: {{nic_gbps: {n}}}\ntor_groups: [{{name: a, hosts: 'n[1-2]', capacity: {n}}}]\n",
            "tor_groups:\n" + "".join(f"  - {{name: g{i}, hosts: 'n{i}x[0000000-0099999]'}}\n" for i in range(30)),
            "a: " + "[" * depth + "]" * depth + "\n",
            "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
                                                       for p, c in zip("abcdefgh", "bcdefghi")),
            f"tor_groups:\n  - name: tg\n    hosts: [{q(h)}, {q(h.upper())}]\n",
        ])
    if parser == "job-yaml":
        key = rng.choice(["tp", "pp", "dp", "cp", "ep", "vpp"])
        return rng.choice([
            f"name: {q(g)}\nparallel: {{tp: 8, pp: 2, dp: 2}}\nmodel: {{preset: gpt3-1.3b}}\n"
            f"batch: {{num_micro_batches: 4}}\n",
            f"parallel: {{{key}: {n}}}\nmodel: {{preset: gpt3-1.3b}}\nbatch: {{num_micro_batches: 4}}\n",
            f"parallel: {{tp: 8}}\nmodel: {{layers: {n}, hidden: {n}, heads: 8, seq_len: 2048}}\n"
            f"batch: {{num_micro_batches: 4}}\n",
            f"parallel: {{tp: 8}}\nmodel: {{preset: gpt3-1.3b}}\nbatch: {{micro_batch_size: {n}, "
            f"num_micro_batches: {n}}}\nhardware: {{optimizer_step_s: {n}}}\n",
            "model: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
        ])
    if parser == "slurm-tree":
        return rng.choice([f"SwitchName={g} Nodes={h}\n", f"SwitchName=s1 Nodes=n1,{h}\nSwitchName=top Switches=s1\n",
                           f"SwitchName=s1 Nodes=n1 LinkSpeed={n}\n", f"SwitchName=s1 Nodes=n[1-2]\nSwitchName={g} "
                           f"Switches=s1\n", "".join(f"SwitchName=s{i} Nodes=x{i}n[0000000-0099999]\n"
                                                     for i in range(30))])
    if parser == "slurm-block":
        return rng.choice([f"BlockName={g} Nodes={h}\n", f"BlockName=b1 Nodes=n1,{h}\nBlockSizes={n}\n",
                           f"BlockName=b1 Nodes=n[1-2]\nBlockSizes=2,{n}\n"])
    if parser == "hostfile":
        return rng.choice([f"{h} slots=8\n", f"n1 slots=8\n{h} slots=8\n", f"n1 slots={n}\n",
                           "n1 slots=8\nN1 slots=8\n", f"{h}\n", f"n1 slots=8 max_slots={n}\n"])
    if parser == "k8s-labels":
        node = lambda name, label: {"metadata": {"name": name, "labels": {
            "topology.k8s.aws/network-node-layer-1": label}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}
        doc = {"kind": "List", "items": [node("n1", "a"), node(h, g)]}
        return rng.choice([json.dumps(doc), json.dumps(doc).replace('"8"', n, 1),
                           '{"kind": "List", "items": [' + "[" * depth + "]" * depth + "]}",
                           '{"kind": "List", "kind": "List", "items": []}'])
    if parser == "volcano":
        bad = rng.choice(["(a+)+$", "(a|aa)+b", "(.*a){20}", "n[0-9]+", "([a-z]+)*x", h])
        return rng.choice([_volcano_seed(g, h), _volcano_seed("s0", "n1", bad), _volcano_seed(g, "n1", "n[2-3]")])
    if parser == "rankmap-json":
        return _hostile_rankmap(seed, rng, h, g, n)
    raise KeyError(parser)


def _hostile_rankmap(seed: str, rng: random.Random, h: str, g: str, n: str) -> str:
    if not seed:
        return "{}"
    doc = json.loads(seed)
    choice = rng.randrange(5)
    if choice == 0:  # one host renamed everywhere it appears: the map stays consistent
        old = doc["ranks"][0]["host"]
        for rec in doc["ranks"]:
            if rec["host"] == old:
                rec["host"] = h
    elif choice == 1:
        for rec in doc["ranks"]:
            rec["tor_group"] = g
    elif choice == 2:  # the same host in another case on another node
        other = doc["ranks"][-1]["host"]
        for rec in doc["ranks"]:
            if rec["host"] == other:
                rec["host"] = doc["ranks"][0]["host"].upper()
    elif choice == 3:
        text = json.dumps(doc)
        return text.replace('"world_size": ', f'"world_size": {n}, "world_size": ', 1)
    else:
        return json.dumps(doc).replace('"rank": 1,', f'"rank": {n},', 1)
    return json.dumps(doc)


def names_ok(value) -> str | None:
    """Why a parser's result holds a name outside its grammar, or None (the invariant every
    accepted input must keep, so that no generated file ever holds such a name)."""
    cluster = getattr(value, "cluster", value)
    if isinstance(cluster, Cluster):
        for host in cluster.hosts:
            if host_problem(host.name):
                return f"host {host.name!r}: {host_problem(host.name)}"
        for item in (*cluster.tor_groups, *(cluster.switches or ()), cluster):
            if name_problem(item.name):
                return f"name {item.name!r}: {name_problem(item.name)}"
    if isinstance(value, RankMap):
        for host in value.hosts:
            if host_problem(host):
                return f"host {host!r}: {host_problem(host)}"
        if len({h.lower() for h in value.hosts}) != len(value.hosts):
            return "two hosts differ only in case"
    job = getattr(value, "job", value)
    name = getattr(job, "name", None)
    if isinstance(name, str) and hasattr(job, "tp") and name_problem(name, "job name"):
        return f"job name {name!r}: {name_problem(name, 'job name')}"
    return None


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
