"""Traffic accounting against values computed by hand for the GPT-3 175B job."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.job.layout import ParallelLayout
from rankmap.job.spec import MODEL_PRESETS, JobSpec, ModelShape, model_params
from rankmap.job.traffic import alignment_problems, job_traffic, rail_crossings, ring_channels

# GPT-3 175B: 96 layers, h = 12288, s = 2048, V = 50257 (Brown et al. 2020)
# P = 12*96*12288^2 * (1 + 13/(12*12288) + (50257+2048)/(12*96*12288)) = 174,604,234,752
P_175B = 174_604_234_752


def test_params_from_shape():
    assert model_params(96, 12288, 50257, 2048) == P_175B
    assert MODEL_PRESETS["gpt3-175b"].params == P_175B


@pytest.fixture
def job():
    # the default example: tp=8, pp=8, dp=144, b=1, m=12, bf16 activations and params, fp32 grads
    return JobSpec(tp=8, pp=8, dp=144, num_micro_batches=12)


def test_tp(job):
    t = job_traffic(job)["tp"]
    # 4 all-reduces per layer per micro-batch, 12 layers per stage, 12 micro-batches = 576
    assert t.ops == 576
    assert t.op_bytes == 1 * 2048 * 12288 * 2 == 50_331_648
    # ring all-reduce: each rank sends 2(n-1)/n * S = 1.75 * 50,331,648 per op
    assert t.edge_bytes == pytest.approx(576 * 1.75 * 50_331_648) == 50_734_301_184


def test_pp(job):
    t = job_traffic(job)["pp"]
    # sequence parallel: each TP rank carries 1/8 of b*s*h*2 = 6,291,456 bytes, forward and backward
    assert t.op_bytes == 6_291_456
    assert t.edge_bytes == 2 * 12 * 6_291_456 == 150_994_944
    assert t.pattern == "chain" and t.group_size == 8


def test_dp_zero(job):
    t = job_traffic(job)["dp"]
    local = P_175B / 64                       # 2,728,191,168 parameters per rank
    # reduce-scatter of fp32 grads + all-gather of bf16 params, each (n-1)/n with n = 144
    assert t.edge_bytes == pytest.approx(143 / 144 * local * (4 + 2))
    assert t.edge_bytes == pytest.approx(16_255_472_376, rel=1e-9)
    assert t.group_size == 144 and t.pattern == "ring"


def test_dp_allreduce_and_size_one_groups():
    t = job_traffic(JobSpec(tp=8, pp=8, dp=4, num_micro_batches=4, data_parallel="allreduce"))
    assert t["dp"].edge_bytes == pytest.approx(2 * 3 / 4 * P_175B / 64 * 4)
    assert t["cp"].edge_bytes == 0 and t["ep"].edge_bytes == 0
    assert job_traffic(JobSpec(tp=8, pp=1, dp=4, num_micro_batches=4))["pp"].edge_bytes == 0


def test_cp_and_ep():
    from rankmap.job.spec import ModelShape
    moe = ModelShape(layers=8, hidden=1024, heads=16, seq_len=4096, experts=8, top_k=2)
    t = job_traffic(JobSpec(tp=2, pp=2, cp=2, ep=4, dp=4, model=moe, num_micro_batches=3))
    # CP: K and V of the full sequence, split by tp: 2*1*4096*512*2 bytes, AG fwd + RS bwd per layer
    assert t["cp"].op_bytes == 2 * 4096 * 512 * 2
    assert t["cp"].edge_bytes == pytest.approx(0.5 * t["cp"].op_bytes * 2 * 4 * 3)
    # EP: 4 all-to-alls per layer; per rank b*s/(cp*tp)*h*a*top_k bytes, 1/ep of it to each peer
    assert t["ep"].op_bytes == 1024 * 1024 * 2 * 2
    assert t["ep"].edge_bytes == pytest.approx(t["ep"].op_bytes / 4 * 4 * 4 * 3)
    assert t["dp"].group_size == 8  # DP x CP


def test_interleaved_pipeline_multiplies_pp_traffic(job):
    import dataclasses
    t = job_traffic(dataclasses.replace(job, virtual_stages=3))["pp"]
    # each boundary is crossed 3 times per micro-batch, the last -> first hop twice
    assert t.edge_bytes == 3 * 150_994_944 and t.wrap_bytes == 2 * 150_994_944


# -- NCCL's model of rails: rings per channel, PXN for point-to-point ----------------------------

def _hosts(world: int, gpn: int):
    ranks = np.arange(world)
    return ranks // gpn, ranks % gpn


def test_tp4_cp2_dp4_on_8_gpu_hosts_is_aligned_as_nccl_runs_it():
    # Each DP x CP ring has members on local ranks 0 and 4 of every host: NCCL runs channel 0 on rail 0
    # and channel 1 on rail 4 through all four hosts. Rank order alone (4 -> 8) would join local rank 4
    # to local rank 0 and was refused before.
    job = JobSpec(tp=4, cp=2, dp=4, num_micro_batches=2)
    lay, traffic = ParallelLayout.of(job), job_traffic(job)
    host, local = _hosts(32, 8)
    assert alignment_problems(lay, traffic, host, local) == []
    assert ring_channels(lay.groups("dp")[0], host, local) == [[0, 0, 0, 0], [4, 4, 4, 4]]
    assert rail_crossings(lay, traffic, host, local) == {"tp": (0, 0), "cp": (0, 0),    # inside hosts
                                                         "dp": (32, 0)}   # 4 rings x 2 channels x 4 hops
    # 4 NICs shared by GPU pairs (rail = local // 2): the same rings run on rails 0 and 2.
    rails = local // 2
    assert alignment_problems(lay, traffic, host, local, rank_rail=rails) == []
    assert ring_channels(lay.groups("dp")[1], host, rails) == [[0, 0, 0, 0], [2, 2, 2, 2]]


def test_ring_without_a_common_rail_is_refused_and_counted():
    # Two hosts; the group's members are on local ranks {0, 1} of host 0 and {4, 5} of host 1.
    host = np.array([0, 0, 1, 1])
    rail = np.array([0, 1, 4, 5])
    group = np.array([0, 1, 2, 3])
    assert ring_channels(group, host, rail) == [[0, 4], [1, 5]]
    job = JobSpec(tp=1, dp=4, num_micro_batches=1)
    lay, traffic = ParallelLayout.of(job), job_traffic(job)
    problems = alignment_problems(lay, traffic, host, rail)
    assert problems == ["DP group [0, 1, 2, 3] spans 2 hosts with no NIC rail common to all (host 0: rails [0, 1]; "
                        "host 1: rails [4, 5]): every NCCL channel changes rails (not rail-aligned)"]
    assert rail_crossings(lay, traffic, host, rail) == {"dp": (4, 4)}      # 2 channels x 2 hops, all change
    # One shared rail is enough: channel 0 stays on rail 1, channel 1 changes rails.
    rail2 = np.array([0, 1, 1, 5])
    assert alignment_problems(lay, traffic, host, rail2) == []
    assert ring_channels(group, host, rail2) == [[1, 1], [0, 5]]
    assert rail_crossings(lay, traffic, host, rail2) == {"dp": (4, 2)}


def test_pipeline_hops_use_pxn_relays_unless_disabled():
    # tp=2 pp=3 dp=2, order tp-pp-dp, on 4-GPU hosts: rank = tp + 2 pp + 6 dp.
    job = JobSpec(tp=2, pp=3, dp=2, num_micro_batches=3, order="tp-pp-dp",
                  model=ModelShape(layers=6, hidden=64, heads=4, seq_len=32))
    lay, traffic = ParallelLayout.of(job), job_traffic(job)
    host, local = _hosts(12, 4)
    problems = [p for p in alignment_problems(lay, traffic, host, local, limit=5) if p.startswith("PP")]
    # PP 2 -> 4: host 0 holds PP members 0 and 2 (rails 0, 2); rank 4 is on rail 0: relayed through rank 0.
    # PP 6 -> 8: host 1 holds only rank 6 of that pipeline (rail 2); rank 8 is on rail 0: refused.
    assert [p.split(",")[0] for p in problems] == ["PP edge rank 6 -> rank 8 joins local rank 2 to local rank 0 on "
                                                   "another host", "PP edge rank 7 -> rank 9 joins local rank 3 to "
                                                   "local rank 1 on another host"]
    without = alignment_problems(lay, traffic, host, local, limit=9, pxn=False)   # NCCL_PXN_DISABLE=1
    assert any(p.startswith("PP edge rank 2 -> rank 4") for p in without)


@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "auto"])
def test_plan_accepts_tp4_cp2_dp4_on_8_gpu_hosts(order):
    from rankmap.placement.plan import plan
    from rankmap.topology.spec import parse_cluster

    cluster = parse_cluster("hosts: {gpus: 8, nics: 8}\ntor_groups: [{name: t, capacity: 8, hosts: 'h[1-4]'}]")
    job = JobSpec(tp=4, cp=2, dp=4, order=order, model=MODEL_PRESETS["gpt3-1.3b"], num_micro_batches=2)
    rm = plan(cluster, job).rankmap
    assert rm.world_size == 32 and rm.job.order == "tp-cp-ep-dp-pp"


# -- the vectorised rail check against the rule written out group by group --------------------------

def _rule_by_rule(layout, traffic, rank_host, rank_local, limit, pxn):
    """The rail rules of :func:`alignment_problems`, checked one group and one edge at a time in
    plain Python: the messages and their order the vectorised check must reproduce."""
    out = []
    tp_hosts = rank_host[layout.groups("tp")]
    bad = [g for g, hosts in enumerate(tp_hosts.tolist()) if len(set(hosts)) > 1]
    if bad:
        out.append(f"TP group {layout.groups('tp')[bad[0]].tolist()} spans {len(set(tp_hosts[bad[0]].tolist()))} hosts")
    for kind, tr in traffic.items():
        if kind == "tp" or tr.group_size < 2:
            continue
        groups = layout.groups(kind)
        on = [{} for _ in groups]
        for g, group in enumerate(groups.tolist()):
            for r in group:
                on[g].setdefault(int(rank_host[r]), set()).add(int(rank_local[r]))
        found = []
        if tr.pattern == "ring":
            for g, group in enumerate(groups.tolist()):
                if len(on[g]) > 1 and not set.intersection(*on[g].values()):
                    where = "; ".join(f"host {h}: rails {sorted(r)}" for h, r in list(on[g].items())[:3])
                    found.append(f"{kind.upper()} group {group[:8]} spans {len(on[g])} hosts with no NIC rail common "
                                 f"to all ({where}): every NCCL channel changes rails (not rail-aligned)")
        else:
            group_of = {r: g for g, group in enumerate(groups.tolist()) for r in group}
            pairs = ([(a, b) for group in groups.tolist() for a, b in zip(group, group[1:])] if tr.pattern == "chain"
                     else [(a, b) for group in groups.tolist() for a in group for b in group if a != b])
            if tr.wrap_bytes:
                pairs += [(group[-1], group[0]) for group in groups.tolist()]
            for a, b in pairs:
                ha, hb = int(rank_host[a]), int(rank_host[b])
                via = on[group_of[a]][ha] if pxn else {int(rank_local[a])}
                if ha != hb and int(rank_local[b]) not in via:
                    found.append(f"{kind.upper()} edge rank {a} -> rank {b} joins local rank {rank_local[a]} to local "
                                 f"rank {rank_local[b]} on another host, and no member of the group on rank {a}'s "
                                 f"host sits on rail {int(rank_local[b])} (not rail-aligned)")
        out += found[:limit]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_vectorised_rail_check_matches_the_rule_group_by_group(seed):
    # Random jobs (CP rings, EP all-to-alls, interleaved pipelines), ranks shuffled over hosts of
    # 2, 4 or 8 GPUs: every message, in order, as the plain rule gives it; several placements break it.
    rng = np.random.default_rng(seed)
    tp, cp, ep, pp = (int(rng.choice(c)) for c in ([1, 2], [1, 2], [1, 2, 4], [1, 2, 3]))
    dp = int(rng.choice([2, 4]))
    job = JobSpec(tp=tp, cp=cp, ep=ep, pp=pp, dp=dp, num_micro_batches=4 * pp, virtual_stages=2 if pp > 1 else 1,
                  model=ModelShape(layers=12, hidden=64, heads=4, seq_len=32, experts=4 if ep > 1 else 0))
    lay, traffic = ParallelLayout.of(job), job_traffic(job)
    gpn = int(rng.choice([2, 4, 8]))
    ranks = rng.permutation(job.world_size) if seed % 3 else np.arange(job.world_size)
    host, local = ranks // gpn, ranks % gpn
    for limit, pxn in ((3, True), (50, True), (4, False)):
        assert alignment_problems(lay, traffic, host, local, limit=limit, pxn=pxn) == \
            _rule_by_rule(lay, traffic, host, local, limit, pxn)
