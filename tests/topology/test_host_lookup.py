"""Host -> ToR group index lookups and the spec hash carried to a reordered copy."""

from __future__ import annotations

import pytest

from rankmap.placement.plan import canonical_cluster
from rankmap.topology.spec import parse_cluster

SPEC = ("tor_groups: [{name: t2, hosts: 'b[1-2]'}, {name: t1, hosts: 'a[2-3],A1'}]\n"
        "switches: [{name: p1, children: [t1]}, {name: p2, children: [t2]}, {name: core, children: [p1, p2]}]")


def test_group_indices_any_case_and_unknown_hosts():
    c = parse_cluster(SPEC)
    index = {g.name: g.index for g in c.tor_groups}
    assert c.group_indices(["b2", "a2", "A1", "a1", "B1"]) == [index["t2"], index["t1"], index["t1"], index["t1"],
                                                               index["t2"]]
    assert c.group_indices([]) == []
    with pytest.raises(KeyError):
        c.group_indices(["a9"])


def test_canonical_copy_keeps_the_spec_hash():
    """The planner reorders a spec listed out of name order; the copy's hash (carried, not
    recomputed) is what hashing the copy from scratch gives."""
    c = parse_cluster(SPEC)
    want = parse_cluster(SPEC).spec_hash()
    assert c.spec_hash() == want
    canon = canonical_cluster(c)
    assert canon is not c and [g.name for g in canon.tor_groups] == ["t1", "t2"]
    assert canon.spec_hash() == want
    assert canon.__dict__.get("_spec_hash") == want     # carried over
    del canon.__dict__["_spec_hash"]
    assert canon.spec_hash() == want                    # and the same when computed


def test_block_clusters_hash_their_own_order():
    """With block sizes the order of the groups enters the hash: a reordered copy computes its own."""
    spec = ("tor_groups: [{name: t2, hosts: b1}, {name: t1, hosts: a1}]\nblock_sizes: [1, 2]")
    c = parse_cluster(spec)
    c.spec_hash()
    copy = c.reordered(tuple(reversed(c.tor_groups)), c.hosts)
    assert "_spec_hash" not in copy.__dict__
    assert copy.spec_hash() != c.spec_hash()
