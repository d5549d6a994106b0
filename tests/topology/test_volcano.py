"""Volcano HyperNodes: tiers, exact and regex members, one parent, no cycles."""

from __future__ import annotations

import textwrap

import pytest

from rankmap.errors import SpecError
from rankmap.topology.sources import ImportOptions
from rankmap.topology.tree import roots, switch_levels
from rankmap.topology.volcano import parse_hypernodes


def hypernode(name: str, tier: int, *members: str) -> str:
    """members: 'Node:name', 'Node~pattern' or 'HyperNode:name'."""
    lines = []
    for m in members:
        if "~" in m:
            kind, pattern = m.split("~")
            lines.append(f"  - type: {kind}\n    selector:\n      regexMatch:\n        pattern: \"{pattern}\"")
        else:
            kind, member = m.split(":")
            lines.append(f"  - type: {kind}\n    selector:\n      exactMatch:\n        name: {member}")
    return (f"apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata:\n  name: {name}\n"
            f"spec:\n  tier: {tier}\n  members:\n" + "\n".join(lines) + "\n")


def parse(*docs: str, **options):
    return parse_hypernodes("---\n".join(docs), "hypernodes.yaml", ImportOptions(**options))


def test_three_tiers_with_exact_and_regex_members():
    r = parse(hypernode("s0", 1, "Node:node-0", "Node:node-1"),
              hypernode("s1", 1, "Node~^node-[23]$"),
              hypernode("s2", 1, "Node:node-4"),
              hypernode("s3", 2, "HyperNode:s0", "HyperNode:s1"),
              hypernode("s4", 2, "HyperNode:s2"),
              hypernode("s5", 3, "HyperNode:s3", "HyperNode:s4"),
              hosts=tuple(f"node-{i}" for i in range(5)))
    c = r.cluster
    assert [(g.name, g.hosts) for g in c.tor_groups] == [
        ("s0", ("node-0", "node-1")), ("s1", ("node-2", "node-3")), ("s2", ("node-4",))]
    assert switch_levels(c)["s5"] == 2 and roots(c) == ("s5",) and len(c.islands()) == 1
    assert r.warnings == ()


def test_list_kind_and_two_islands():
    text = textwrap.dedent("""\
        apiVersion: v1
        kind: List
        items:
        - kind: HyperNode
          metadata: {name: a}
          spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}]}
        - kind: HyperNode
          metadata: {name: b}
          spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n2}}}]}
        """)
    r = parse_hypernodes(text, "hn.yaml")
    # HyperNode tiers describe locality: two top HyperNodes are joined under an implied root
    assert r.cluster.islands() == (("a", "b"),) and "2 top HyperNodes joined under an implied root 'root'" in r.notes[0]
    assert [t.name for t in r.cluster.tiers] == ["root"]  # a and b are leaves: the root is the one tier
    r = parse_hypernodes(text, "hn.yaml", ImportOptions(separate_tops=True))
    assert r.cluster.islands() == (("a",), ("b",)) and "2 top HyperNodes: kept as separate islands" in r.notes[0]


@pytest.mark.parametrize("docs,message", [
    ([hypernode("s0", 1, "Node:n1"), hypernode("s0", 1, "Node:n2")],
     "hypernodes.yaml:16: s0: HyperNode s0 is defined twice (first on line 4)"),
    ([hypernode("s0", 1, "Node:n1"), hypernode("s1", 2, "HyperNode:s9")],
     "hypernodes.yaml:22: s9: HyperNode s1 has invalid member (s9): no HyperNode has that name"),
    ([hypernode("s0", 1, "Node:n1"), hypernode("s1", 1, "HyperNode:s0")],
     "hypernodes.yaml:22: s0: HyperNode s1 (tier 1) has member s0 of tier 1: members sit on a lower tier"),
    ([hypernode("s0", 1, "Node:n1"), hypernode("a", 2, "HyperNode:s0"), hypernode("b", 2, "HyperNode:s0")],
     "hypernodes.yaml:34: s0: HyperNode s0 has two parents (a and b)"),
    ([hypernode("s0", 1, "Node:n1"), hypernode("s1", 1, "Node:n1")],
     "hypernodes.yaml:16: n1: node n1 is a member of HyperNodes s0 and s1"),
    ([hypernode("s0", 1, "Node:n1", "HyperNode:s1"), hypernode("s1", 1, "Node:n2")],
     "hypernodes.yaml:4: s0: HyperNode s0 has both Node and HyperNode members"),
    ([hypernode("s0", 1, "Node~n[")], "hypernodes.yaml:10: s0.members[0].selector.regexMatch: bad regular expression"),
    ([hypernode("s0", 1, "Node~^n")], "hypernodes.yaml:10: ^n: regexMatch '^n' matches node names, which the file "
                                      "does not list: pass --hosts"),
    ([hypernode("s0", 0, "Node:n1")], "hypernodes.yaml:6: spec.tier: must be >= 1, got 0"),
    ([hypernode("s0", 1, "Rack:n1")], "hypernodes.yaml:8: s0.members[0].type: expected one of Node, HyperNode"),
    (["kind: HyperNode\nmetadata: {name: s}\nspec: {tier: 1, members: []}\n"], "hypernodes.yaml:3: spec.members: HyperNode s has no members"),
    (["kind: Pod\nmetadata: {name: s}\n"], "hypernodes.yaml:1: kind: expected kind: HyperNode, got 'Pod'"),
    (["kind: HyperNode\nmetadata: {name: s}\nspec: {tier: 1, members: [{type: Node, selector: "
      "{labelMatch: {matchLabels: {a: b}}}}]}\n"], "hypernodes.yaml:3: s.members[0].selector.labelMatch: labelMatch needs node labels"),
    (["kind: HyperNode\nmetadata: {name: s\n"], "hypernodes.yaml:2: invalid YAML"),
])
def test_errors(docs, message):
    with pytest.raises(SpecError) as err:
        parse(*docs)
    assert str(err.value).startswith(message)


def test_regex_that_matches_nothing_is_a_warning():
    r = parse(hypernode("s0", 1, "Node:n1", "Node~^gpu"), hosts=("n1",))
    assert [str(w) for w in r.warnings] == ["hypernodes.yaml:14: ^gpu: regexMatch '^gpu' matches no host in --hosts"]
