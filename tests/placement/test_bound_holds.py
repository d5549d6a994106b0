"""The lower bound holds for every job shape: hosts with several TP (and DP) groups, fabrics
with no switch above the leaves. Checked against every host order of tiny instances."""

from __future__ import annotations

import itertools

import pytest
from helpers import job

from rankmap.job.layout import ParallelLayout
from rankmap.job.traffic import job_traffic
from rankmap.placement.metrics import measure_order
from rankmap.placement.plan import plan
from rankmap.topology import parse_cluster

# Two pods of two ToR groups (3, 2, 2, 2 hosts): small enough to try every host order.
TWO_TIER = """hosts: {gpus: 8, nics: 8}
tor_groups:
  - {name: l0, hosts: 'a[1-3]'}
  - {name: l1, hosts: 'b[1-2]'}
  - {name: l2, hosts: 'c[1-2]'}
  - {name: l3, hosts: 'd[1-2]'}
switches:
  - {name: p1, children: [l0, l1]}
  - {name: p2, children: [l2, l3]}
  - {name: core, children: [p1, p2]}
"""

# Shapes whose hosts hold several TP groups (tp < 8), hence several members of each DP group:
# a ring crossing between two hosts carries 8 / m DP edges, not 8.
SHAPES = [dict(tp=4, pp=1, dp=8), dict(tp=2, pp=2, dp=8), dict(tp=4, pp=2, dp=4), dict(tp=1, pp=1, dp=32),
          dict(tp=4, pp=4, dp=2, order="tp-pp-dp"), dict(tp=2, cp=2, pp=2, dp=4, order="tp-cp-dp-pp"),
          dict(tp=8, pp=2, dp=2), dict(tp=8, pp=4, dp=1)]  # the last two: stages that fit in one ToR group


def _optimum(cluster, spec, hosts_needed: int) -> float:
    """Least cost over every order of every choice of hosts (independent of the planner's model)."""
    layout, traffic = ParallelLayout.of(spec), job_traffic(spec)
    names = [h.name for h in cluster.free_hosts()]
    return min(measure_order(cluster, layout, traffic, list(order), 8).cost
               for order in itertools.permutations(names, hosts_needed))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_bound_never_exceeds_any_placement_when_hosts_hold_several_tp_groups(shape):
    cluster = parse_cluster(TWO_TIER, "c.yaml")
    spec = job(**shape)
    result = plan(cluster, spec, time_limit_s=2)
    cost = result.ours.metrics.cost
    best = _optimum(cluster, result.job, len(result.rankmap.hosts))
    assert best > 0  # every shape here must cross a ToR group: the check is not vacuous
    assert result.lower_bound_bytes <= best * (1 + 1e-9)
    assert cost == pytest.approx(best)  # and the plan is the optimum
    assert all(result.lower_bound_bytes <= b.metrics.cost * (1 + 1e-9) for b in result.baselines)
    if result.solver_status == "OPTIMAL":
        assert result.lower_bound_bytes == pytest.approx(cost)


@pytest.mark.parametrize("text, island", [
    ("hosts: {gpus: 8, nics: 8}\ntor_groups:\n  - {name: s1, hosts: 'g[01-04]'}\nswitches: []\n", "s1"),
    ("hosts: {gpus: 8, nics: 8}\ntor_groups:\n  - {name: s1, hosts: 'g[01-04]'}\n"
     "  - {name: s2, hosts: 'g[05-08]'}\n", "s1"),
], ids=["one-leaf", "two-leaves-no-spine"])
def test_fabric_without_switches_above_the_leaves_plans_inside_one_island(text, island):
    cluster = parse_cluster(text, "c.yaml")
    result = plan(cluster, job(tp=8, pp=1, dp=4), time_limit_s=1)
    assert {cluster.host(h).tor_group for h in result.rankmap.hosts} == {island}
    assert result.ours.metrics.cost == 0 and result.lower_bound_bytes == 0
