"""A plan belongs to the cluster spec as the user wrote it, whatever order the spec lists hosts in."""

from __future__ import annotations

from rankmap.api import load_cluster, load_job, plan, verify, write_plan_files
from rankmap.examples import example_path


def test_a_plan_verifies_against_its_own_spec_when_hosts_are_listed_out_of_order(tmp_path):
    cluster = load_cluster(example_path("megascale-12k", "cluster.yaml"))   # hosts not in natural order
    names = [h.name for h in cluster.hosts]
    assert names != sorted(names)
    result = plan(cluster, load_job(example_path("megascale-12k", "job.yaml"), {"dp": 4, "pp": 2}), time_limit_s=2)
    assert result.rankmap.cluster_hash == cluster.spec_hash()
    write_plan_files(result.rankmap, tmp_path)
    assert verify(tmp_path / "rankmap.json", cluster).world_size == 64
