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


# Two pods of two ToR groups (p1: t0 t1, p2: t2 t3) under a core, 8-GPU hosts. The job (tp=8,
# dp=2, pp=2) runs stage 0 on b1 b2 (t1, pod p1) and stage 1 on d1 d2 (t3, pod p2). d2 fails; its
# DP partner is d1 (t3), its PP partner b2 (t1); t3 has no spare. Per rank pair, a DP ring edge
# carries dp bytes and a PP hop pp bytes, dp > pp (8 pairs a host pair, tp=8):
#   b3 (t1, beside its PP partner): the DP edge crosses ToR groups and the core, the PP edge neither
#   c1 (t2, pod p2): the DP edge crosses ToR groups; the PP edge still crosses both: +dp +pp at ToR
#   a1 (t0, pod p1): both edges cross both tiers, the worst
# By cross-ToR bytes alone b3 wins; with the core weighing w, c1 wins once w (dp - pp) > pp.
PODS = """
hosts: {gpus: 8, nics: 8}
tor_groups:
  - {name: t0, hosts: 'a1'}
  - {name: t1, hosts: 'b[1-3]'}
  - {name: t2, hosts: 'c1'}
  - {name: t3, hosts: 'd[1-2]'}
switches:
  - {name: p1, children: [t0, t1]}
  - {name: p2, children: [t2, t3]}
  - {name: core, children: [p1, p2]}
"""


def _pod_map(weights=None):
    from rankmap.job.rank_map import RankMap
    from rankmap.topology import parse_cluster

    cluster = parse_cluster(PODS, "pods.yaml")
    summary = {"tier_weights": list(weights)} if weights is not None else None
    # node ranks 0, 1: stage 0 (dp 0, 1); 2, 3: stage 1
    return cluster, RankMap.from_hosts(job(pp=2, dp=2), cluster, ["b1", "b2", "d1", "d2"], 8, summary)


@pytest.mark.parametrize("recorded, weights, new", [
    ([1.0, 3.0], (1.0, 3.0), "c1"),     # the oversubscribed core: stay in pod p2
    ([1.0, 1.0], (1.0, 1.0), "c1"),     # a byte leaving the pod crosses two tiers
    (None, (1.0, 1.0), "c1"),           # no recorded weights: the cluster's defaults (1:1 here)
    ([1.0, 0.0], (1.0, 0.0), "b3"),     # planned with core=0: only ToR crossings count
])
def test_a_replacement_is_chosen_by_the_tier_weighted_cost_the_map_was_planned_with(recorded, weights, new):
    cluster, previous = _pod_map(recorded)
    result = replan(cluster, previous, ["d2"])
    assert result.replaced == ((3, "d2", new),) and result.weights == weights
    dp, pp = _dp_pp_bytes(previous)
    assert dp > pp
    before = (16 * pp, 16 * pp)   # the 16 PP rank pairs b1-d1 and b2-d2 cross ToR groups and pods
    after = (16 * pp + 16 * dp, 16 * pp) if new == "c1" else (16 * dp + 8 * pp,) * 2
    assert result.before.tier_bytes == before and result.after.tier_bytes == after
    w = weights[1]
    assert result.after.weighted_bytes == after[0] + w * after[1]
    summary = result.rankmap.summary
    assert summary["replan"]["tier_weights"] == list(weights)
    assert summary["replan"]["tier_bytes_before"] == list(before)
    assert summary["replan"]["tier_bytes_after"] == list(after)
    assert summary["replan"]["weighted_bytes_before"] == before[0] + w * before[1]
    assert summary["replan"]["weighted_bytes_after"] == after[0] + w * after[1]


def _dp_pp_bytes(rm) -> tuple:
    """Bytes per iteration on one rank-to-rank edge of a DP ring and of a PP hop."""
    from rankmap.job.traffic import job_traffic

    traffic = job_traffic(rm.job)
    return traffic["dp"].edge_bytes, traffic["pp"].edge_bytes


def test_the_replan_command_reports_every_tier_before_and_after(tmp_path):
    import dataclasses
    import json
    import subprocess
    import sys

    from rankmap.job.rank_map import write_plan_files
    from rankmap.placement.tier_weights import crossed_tiers

    cluster, previous = _pod_map([1.0, 3.0])
    # the weights as an earlier replan records them: a chain of replans keeps the plan's weights
    earlier = {"replaced": [], "moved_ranks": 0, "cross_tor_bytes_before": 0.0, "cross_tor_bytes_after": 0.0,
               "tier_weights": [1.0, 3.0]}
    previous = dataclasses.replace(previous, summary={"replan": earlier})
    (tmp_path / "pods.yaml").write_text(PODS)
    write_plan_files(previous, tmp_path / "p")
    args = [sys.executable, "-m", "rankmap", "replan", "--rankmap", tmp_path / "p" / "rankmap.json", "--cluster",
            tmp_path / "pods.yaml", "--failed", "d2", "--out", tmp_path / "r"]
    run = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    dp, pp = _dp_pp_bytes(previous)
    before, after = 16 * pp, 16 * pp + 16 * dp
    low, top = crossed_tiers(cluster)   # the spec declares no tiers: "tier 1", "tier 2"
    assert run.stdout.splitlines()[:2] == [
        "node rank 3: d2 -> c1",
        f"1 hosts replaced, 8 ranks moved; bytes per iteration crossing {low} {before / 1e3:.2f} kB -> "
        f"{after / 1e3:.2f} kB (+{16 * dp / 1e3:.2f} kB), {top} {before / 1e3:.2f} kB -> {before / 1e3:.2f} kB (+0 B); "
        f"weighted ({low}=1, {top}=3) {4 * before / 1e3:.2f} kB -> {(after + 3 * before) / 1e3:.2f} kB "
        f"(+{16 * dp / 1e3:.2f} kB)"]
    run = subprocess.run(list(map(str, args + ["--json", "--out", tmp_path / "r2"])), capture_output=True, text=True,
                         timeout=120)
    doc = json.loads(run.stdout)
    assert (doc["tiers"], doc["tier_weights"]) == ([low, top], [1.0, 3.0])
    assert (doc["tier_bytes_before"], doc["tier_bytes_after"]) == ([before, before], [after, before])
    assert (doc["weighted_bytes_before"], doc["weighted_bytes_after"]) == (4 * before, after + 3 * before)
