"""Re-planning after failures moves only the ranks of failed hosts."""

from __future__ import annotations

import pytest
from helpers import cluster_with_free, job

from rankmap.errors import InfeasibleError, SpecError
from rankmap.placement.plan import plan
from rankmap.placement.replan import replan


def test_one_failed_host_moves_only_its_ranks():
    cluster = cluster_with_free((7, 7, 7), gpus=8)
    first = plan(cluster, job(pp=2, dp=6))
    victim = first.rankmap.hosts[4]
    result = replan(cluster, first.rankmap, [victim])
    new = result.rankmap
    assert [i for i, (a, b) in enumerate(zip(first.rankmap.hosts, new.hosts)) if a != b] == [4]
    assert result.moved_ranks == 8
    assert new.tor_groups[4] == first.rankmap.tor_groups[4]   # a spare in the same ToR group
    assert result.after.cross_tor_bytes == result.before.cross_tor_bytes


def test_failed_host_without_spare_in_its_group_goes_to_the_cheapest_group():
    cluster = cluster_with_free((4, 4, 1), gpus=8)
    first = plan(cluster, job(pp=1, dp=8))
    assert sorted(set(first.rankmap.tor_groups)) == ["t0", "t1"]
    result = replan(cluster, first.rankmap, [first.rankmap.hosts[0]])
    assert result.rankmap.tor_groups[0] == "t2" and result.moved_ranks == 8
    assert result.after.cross_tor_bytes > result.before.cross_tor_bytes


def test_too_few_spares():
    cluster = cluster_with_free((2, 2), gpus=8)
    first = plan(cluster, job(pp=1, dp=4))
    with pytest.raises(InfeasibleError, match="1 hosts of the plan are down, only 0 usable spare hosts"):
        replan(cluster, first.rankmap, [first.rankmap.hosts[1]])


def test_a_replan_with_nothing_failed_is_refused_and_names_the_flag():
    cluster = cluster_with_free((4, 4), gpus=8)
    first = plan(cluster, job(pp=1, dp=3))
    with pytest.raises(SpecError, match="--failed: no host of the map is failed: nothing to replace"):
        replan(cluster, first.rankmap, [])
