"""The simulator's interleaved 1F1B order is torch.distributed.pipelining's, micro-batch counts
that are not a multiple of pp included (10 micro-batches on pp=4: two rounds of five)."""

from __future__ import annotations

import pytest

from rankmap.simulator.schedule import stage_order

schedules = pytest.importorskip("torch.distributed.pipelining.schedules",
                                reason="needs PyTorch (pip install torch==2.13.0) to read torch's own order")


def torch_order(rank: int, p: int, m: int, v: int) -> list[tuple[bool, int, int]]:
    """``(is_forward, micro_batch, chunk)`` of one rank, from torch's own schedule builder
    (the helpers ``ScheduleInterleaved1F1B._calculate_single_rank_operations`` calls)."""
    per_round = m // max(1, m // p)
    warm = schedules._get_warmup_ops(rank, v, per_round, p, m, multiply_factor=2)
    fwd_bwd = v * m - warm
    ops = schedules._get_1f1b_rank_ops(
        v, p, warm, fwd_bwd, warm, rank,
        lambda step: ((step // per_round) % v) * p + rank,
        lambda step: (v - 1 - ((step - warm) // per_round) % v) * p + rank)
    out = []
    for op in ops:
        if op is None:
            continue
        forward = op.computation_type == schedules._ComputationType.FORWARD
        out.append((forward, op.microbatch_index, op.stage_index // p))
    return out


@pytest.mark.parametrize("p, m, v", [(4, 10, 2), (4, 8, 2), (2, 3, 2), (4, 6, 3), (3, 8, 2), (4, 2, 2), (8, 24, 4)])
def test_interleaved_order_matches_torch(p, m, v):
    for rank in range(p):
        assert stage_order(rank, p, m, v) == torch_order(rank, p, m, v), rank


def test_micro_batches_torch_refuses_are_refused():
    with pytest.raises(ValueError, match="rounds"):
        stage_order(0, 4, 9, 2)   # 2 rounds cannot split 9 micro-batches
