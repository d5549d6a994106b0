"""SimAI/AICB workload files: parsing, errors that name the line, simulation of the traffic."""

from __future__ import annotations

import pytest

from rankmap.errors import SpecError
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import simulate_iteration
from rankmap.simulator.network import Network
from rankmap.simulator.workload import looks_like_aicb, parse_aicb_workload, read_aicb_workload

HEADER = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 4 vpp: 1 ga: 8 all_gpus: 480 "
          "checkpoints: 2 3 7 checkpoint_initiates: 0 pp_comm: 2631680.0")
LAYERS = """\
grad_gather\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLGATHER\t809558031\t100
grad_param_comm\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tREDUCESCATTER\t1619116062\t100
embedding_layer\t-1\t622731\tALLREDUCE\t21053440\t1\tNONE\t0\t15091072\tNONE\t0\t100
attention_column\t-1\t1750840\tALLGATHER\t21053440\t875420\tREDUCESCATTER\t21053440\t875420\tNONE\t0\t100
attention_row\t-1\t1750840\tREDUCESCATTER\t21053440\t875420\tALLGATHER\t21053440\t875420\tNONE\t0\t100
mlp_moelayer\t-1\t1\tALLTOALL_EP\t1024\t1\tALLTOALL_EP\t0\t1\tNONE\t0\t100
moe_grad_norm\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLGATHER_DP_EP\t4096\t100
attention_row\t-1\t1750840\tREDUCESCATTER\t21053440\t875420\tALLGATHER\t21053440\t875420\tNONE\t0\t100
"""


def text(header: str = HEADER, layers: str = LAYERS, count: int | None = None) -> str:
    n = count if count is not None else len(layers.splitlines())
    return f"{header}\n{n}\n{layers}"


def test_parse_groups_phases_and_counts():
    w = parse_aicb_workload(text(), "w.txt")
    assert (w.tp, w.pp, w.ep, w.ga, w.all_gpus, w.layers) == (8, 4, 1, 8, 480, 8)
    ops = {(o.kind, o.op, o.size_bytes, o.phase): o.count for o in w.ops}
    assert ops == {
        ("dp", "allgather", 809558031.0, "dp-gather"): 1,
        ("dp", "reducescatter", 1619116062.0, "dp-reduce"): 1,
        ("tp", "allreduce", 21053440.0, "pipeline"): 1,
        ("tp", "allgather", 21053440.0, "pipeline"): 3,          # column forward, row input-gradient x 2
        ("tp", "reducescatter", 21053440.0, "pipeline"): 3,
        ("ep", "alltoall", 1024.0, "pipeline"): 1,                # the 0-byte ig entry is skipped
        ("dp_ep", "allgather", 4096.0, "dp-gather"): 1,
        ("pp", "p2p", 2631680.0, "pipeline"): 16,                 # 2 x ga messages per stage boundary
    }
    assert looks_like_aicb(text()) and not looks_like_aicb("name: job\nparallel: {tp: 8}\n")


@pytest.mark.parametrize("content, where, message", [
    (text(header="DATA model_parallel_NPU_group: 8"), "w.txt:1: policy:", "unsupported parallelism policy 'DATA'"),
    (text(header="HYBRID_TRANSFORMER pp: 2 all_gpus: 16"), "w.txt:1: model_parallel_NPU_group:", "header lacks"),
    (text(header="HYBRID_TRANSFORMER model_parallel_NPU_group: eight pp: 1 all_gpus: 8"),
     "w.txt:1: model_parallel_NPU_group:", "expected a number, got 'eight'"),
    (text(count=3), "w.txt:2: layers:", "line 2 announces 3 layer lines, the file has 8"),
    (text(layers="l1 -1 1 NONE 0 1 NONE 0 1 NONE\n"), "w.txt:3: l1:", "expected 12 fields"),
    (text(layers="l1 -1 1 BROADCAST 8 1 NONE 0 1 NONE 0 1\n"), "w.txt:3: fwd_comm:",
     "unsupported collective 'BROADCAST'"),
    (text(layers="l1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE -5 1\n"), "w.txt:3: wg_bytes:", "expected a number >= 0"),
])
def test_errors_name_file_line_and_field(content, where, message):
    with pytest.raises(SpecError) as err:
        parse_aicb_workload(content, "w.txt")
    assert str(err.value).startswith(where) and message in str(err.value)


def test_read_missing_file(tmp_path):
    with pytest.raises(SpecError, match="nope.txt: cannot read file"):
        read_aicb_workload(tmp_path / "nope.txt")


def test_workload_drives_the_simulation(racks_plan):
    """The racks plan (tp 8, pp 4, 480 GPUs) fed with the workload's traffic: the DP phases carry
    the workload's sizes, the TP collectives all its forward and backward entries."""
    cluster, result = racks_plan
    w = parse_aicb_workload(text(), "w.txt")
    w.check_job(result.job)
    net = Network(cluster)
    rm = result.rankmap
    it = simulate_iteration(net, RankPlacement.from_rankmap(rm, net), rm.layout, w.ops,
                            routing=EcmpConfig(mode="spray"))
    reduce = it.phase("dp-reduce")
    assert reduce.time_s == pytest.approx(14 / 15 * 1619116062 / (0.8 * 50e9) + 14 * 5e-6, rel=1e-9)   # 0.8: the cap
    assert [q.label for q in it.phase("pipeline").parts] == ["tp allreduce", "tp allgather", "tp reducescatter",
                                                            "pp p2p"]   # ep = 1: EP groups of one rank
    assert [q.label for q in it.phase("dp-gather").parts] == ["dp allgather", "dp_ep allgather"]


def test_check_job_rejects_another_shape(racks_plan):
    _, result = racks_plan
    w = parse_aicb_workload(text(header=HEADER.replace("pp: 4", "pp: 2")), "w.txt")
    with pytest.raises(SpecError, match="w.txt:1: pp: workload says pp 2, the rank map's job has 4"):
        w.check_job(result.job)
