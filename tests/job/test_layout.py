"""Rank <-> coordinates and groups for Megatron order strings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankmap.job.layout import COORD, ParallelLayout


def layout(order="tp-cp-ep-dp-pp", **sizes):
    full = {"tp": 1, "cp": 1, "ep": 1, "dp": 1, "pp": 1, **sizes}
    return ParallelLayout(full, order)


def test_megatron_default_order_groups():
    # Megatron-Core with 16 ranks, tp=2 pp=2 dp=4, order tp-cp-ep-dp-pp
    lay = layout(tp=2, pp=2, dp=4)
    assert lay.group_of("dp", 0).tolist() == [0, 2, 4, 6]
    assert lay.group_of("pp", 0).tolist() == [0, 8]
    assert lay.group_of("tp", 0).tolist() == [0, 1]
    assert lay.groups("dp").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    assert lay.groups("pp").tolist() == [[r, r + 8] for r in range(8)]
    assert lay.coords(13) == {"tp": 1, "cp": 0, "ep": 0, "dp": 2, "pp": 1}


def test_pipeline_inner_order():
    # "tp-pp-dp": consecutive tp pairs, then stages, then replicas
    lay = layout("tp-pp-dp", tp=2, pp=2, dp=4)
    assert lay.group_of("pp", 0).tolist() == [0, 2]
    assert lay.group_of("dp", 0).tolist() == [0, 4, 8, 12]


def test_expert_parallel_is_carved_out_of_dp():
    lay = layout(tp=2, ep=2, dp=4, pp=1)
    assert lay.world_size == 8
    assert lay.group_of("ep", 0).tolist() == [0, 2]
    assert lay.group_of("dp", 0).tolist() == [0, 2, 4, 6]
    assert lay.coords(6) == {"tp": 0, "cp": 0, "ep": 1, "dp": 3, "pp": 0}


def test_dp_group_includes_cp_ranks():
    lay = layout(tp=2, cp=2, dp=2)
    assert lay.group_of("cp", 0).tolist() == [0, 2]
    assert lay.group_of("dp", 0).tolist() == [0, 2, 4, 6]  # gradients reduced over DP x CP


@pytest.mark.parametrize("order", ["-".join(p) for p in itertools.permutations(["tp", "cp", "dp", "pp"])])
def test_every_order_is_a_bijection_with_partitioning_groups(order):
    lay = layout(order, tp=2, cp=3, dp=2, pp=2)
    table = lay.coord_table
    assert len({tuple(row) for row in table.tolist()}) == lay.world_size == 24
    for kind in ("tp", "cp", "pp"):
        dim = COORD[kind]
        groups = lay.groups(kind)
        assert sorted(groups.ravel().tolist()) == list(range(24))
        for g in groups:
            coords = table[g]
            # members differ only in their own dimension, which runs over 0..size-1
            others = np.delete(coords, dim, axis=1)
            assert (others == others[0]).all()
            assert sorted(coords[:, dim].tolist()) == list(range(len(g)))
