"""Cluster spec files -> Cluster, and back."""

from __future__ import annotations

import pytest

from rankmap.errors import SpecError
from rankmap.topology import cluster_to_yaml, load_cluster, parse_cluster
from rankmap.topology.graph import to_networkx


def test_small_cluster_fields(small_cluster_text):
    c = parse_cluster(small_cluster_text, "small.yaml")
    assert [g.name for g in c.tor_groups] == ["a", "b"]
    assert c.tor_group("a").hosts == ("n01", "n02", "n03", "n04")
    assert c.host("n02").state == "busy"
    assert [h.name for h in c.free_hosts()] == ["n01", "n03", "n04", "n05", "n06", "n07", "n08"]
    assert c.rails == 8 and c.gpus == 64
    assert c.links.uplink_to_downlink_ratio == 2.0
    # 4 hosts x 200G down per rail ToR against 4 x 400G up: half subscribed
    assert c.oversubscription("a") == 0.5


def test_megascale_example_shape():
    c = load_cluster("examples/megascale-12k/cluster.yaml")
    assert len(c.tor_groups) == 24 and len(c.hosts) == 1536 and c.gpus == 12288
    assert {len(g.hosts) for g in c.tor_groups} == {64}
    assert len(c.free_hosts()) == 1152  # a quarter busy
    # MegaScale: 64 x 200G downlinks against 32 x 400G uplinks per rail ToR, each uplink 2x a downlink
    assert c.oversubscription("tg00") == 1.0 and c.links.uplink_to_downlink_ratio == 2.0
    # hostnames come from addresses: name order does not follow the ToR groups
    first = sorted(c.hosts, key=lambda h: h.name)[:10]
    assert len({h.tor_group for h in first}) > 3


def test_round_trip_and_hash(small_cluster_text):
    c = parse_cluster(small_cluster_text, "small.yaml")
    again = parse_cluster(cluster_to_yaml(c), "again.yaml")
    assert again == c and again.spec_hash() == c.spec_hash()
    # availability is not part of the spec hash; hosts are
    assert c.with_states({"n03": "failed"}).spec_hash() == c.spec_hash()
    other = parse_cluster(small_cluster_text.replace("n[05-08]", "n[05-07]"), "other.yaml")
    assert other.spec_hash() != c.spec_hash()


def test_heterogeneous_hosts_round_trip():
    text = "tor_groups:\n  - name: a\n    hosts: [x1, {hosts: 'y[01-02]', gpus: 4, nics: 2}]\n"
    c = parse_cluster(text)
    assert (c.host("y02").gpus, c.host("y02").nics, c.host("x1").gpus) == (4, 2, 8)
    assert c.host("y01").rail_of_gpu(3) == 1  # 4 GPUs share 2 NICs: GPUs 2, 3 use NIC 1
    assert parse_cluster(cluster_to_yaml(c)) == c


@pytest.mark.parametrize("text, where, what", [
    ("tor_groups:\n  - name: a\n    hostz: n1\n", "bad.yaml:3: tor_groups[0].hostz", "unknown key 'hostz'"),
    ("tor_groups: []\n", "bad.yaml:1: tor_groups", "at least one ToR group"),
    ("links: {nic_gbps: -5}\ntor_groups: [{hosts: n1}]\n", "bad.yaml:1: links.nic_gbps", "must be positive, got -5"),
    ("tor_groups: [{hosts: 'n[1-3'}]\n", "bad.yaml:1: tor_groups[0].hosts", "bad hostlist 'n[1-3'"),
    ("tor_groups:\n  - {name: a, hosts: n1}\n  - {name: b, hosts: 'n[1-2]'}\n", "bad.yaml:3: tor_groups[1].hosts",
     "already in ToR group 'a'"),
    ("tor_groups: [{name: a, capacity: 2, hosts: 'n[1-3]'}]\n", "bad.yaml:1: tor_groups[0].hosts", "capacity of 2"),
    ("tor_groups: [{hosts: n1}]\navailability: {busy: n9}\n", "bad.yaml:2: availability.busy", "'n9' is not in"),
    ("tor_groups: [{hosts: 'a;rm -rf ~'}]\n", "bad.yaml:1: tor_groups[0].hosts", "';' is not allowed"),
    ("hosts: {gpus: 8.5}\ntor_groups: [{hosts: n1}]\n", "bad.yaml:1: hosts.gpus", "expected an integer, got 8.5"),
    ("a: 1\na: 2\n", "bad.yaml:2", "duplicate key 'a'"),
    ("tor_groups: [\n", "bad.yaml:2", "invalid YAML"),
    ("- just\n- a list\n", "bad.yaml:1", "expected a mapping"),
])
def test_bad_specs_name_file_line_and_key(text, where, what):
    with pytest.raises(SpecError) as err:
        parse_cluster(text, "bad.yaml")
    assert str(err.value).startswith(where)
    assert what in str(err.value)


def test_unreadable_and_binary_files(tmp_path):
    with pytest.raises(SpecError, match="cannot read file"):
        load_cluster(tmp_path / "missing.yaml")
    junk = tmp_path / "junk.yaml"
    junk.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_cluster(junk)


def test_networkx_view(small_cluster_text):
    c = parse_cluster(small_cluster_text)
    g = to_networkx(c)
    hosts = [n for n, d in g.nodes(data=True) if d["kind"] == "host"]
    tors = [n for n, d in g.nodes(data=True) if d["kind"] == "tor"]
    assert len(hosts) == 8 and len(tors) == 2 * 8
    assert g.degree("n01") == 8  # one NIC per rail
    # 4 uplinks per rail ToR spread over 2 spine switches: 2 links of 400G each way
    assert g.edges[("tor", "a", 3), ("spine", 0)] == {"links": 2, "gbps": 800.0}
