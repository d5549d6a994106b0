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


# Megatron-Core, tp=2 cp=2 dp=2 pp=2, order tp-cp-ep-dp-pp: rank = tp + 2 cp + 4 dp + 8 pp.
# RankGenerator.get_ranks(token) (megatron/core/parallel_state.py), worked out by hand.
MEGATRON_2222 = {
    "tp": [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]],
    "cp": [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]],
    "dp": [[0, 4], [1, 5], [2, 6], [3, 7], [8, 12], [9, 13], [10, 14], [11, 15]],
    "pp": [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]],
    "dp-cp": [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]],
    "tp-cp": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]],
    "tp-pp": [[0, 1, 8, 9], [2, 3, 10, 11], [4, 5, 12, 13], [6, 7, 14, 15]],
    "tp-dp-cp": [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]],
    "tp-cp-pp": [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]],
}


@pytest.mark.parametrize("token", list(MEGATRON_2222))
def test_ranks_match_megatron_core(token):
    lay = layout(tp=2, cp=2, dp=2, pp=2)
    assert lay.ranks(token).tolist() == MEGATRON_2222[token]
    # the parts may come in any order
    assert lay.ranks("-".join(reversed(token.split("-")))).tolist() == MEGATRON_2222[token]


def test_group_kinds_and_composites_in_megatron_terms():
    lay = layout(tp=2, cp=2, dp=2, pp=2)
    assert lay.groups("dp").tolist() == MEGATRON_2222["dp-cp"]          # gradients: DP x CP
    assert lay.groups("dp_ep").tolist() == MEGATRON_2222["dp"]          # ep = 1: the dense dp digit
    assert lay.groups("tp-pp").tolist() == MEGATRON_2222["tp-pp"]
    assert lay.groups("tp-cp").tolist() == MEGATRON_2222["tp-cp"]
    assert lay.groups("tp-dp").tolist() == MEGATRON_2222["tp-dp-cp"]
    assert lay.groups("dp-ep").tolist() == lay.groups("dp").tolist()   # EP lives inside DP
    assert lay.groups("tp-cp-ep-dp-pp").tolist() == [list(range(16))]


def test_expert_groups_with_ep():
    # tp=2, ep=2, dp=4 (dp digit 2), pp=1: rank = tp + 2 ep + 4 dp_digit
    lay = layout(tp=2, ep=2, dp=4)
    assert lay.groups("ep").tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert lay.groups("dp_ep").tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert lay.groups("dp").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert lay.ranks("ep-dp").tolist() == lay.groups("dp").tolist()
    assert lay.groups("tp-ep").tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_dp_ep_groups_hold_ranks_equal_in_every_other_dim():
    lay = layout("tp-dp-ep-pp", tp=2, ep=4, dp=8, pp=2)
    table = lay.groups("dp_ep")
    assert table.shape == (16, 2)
    coords = lay.coord_table[table]                                     # (groups, members, 5)
    for dim in ("tp", "cp", "ep", "pp"):
        assert (coords[:, :, COORD[dim]] == coords[:, :1, COORD[dim]]).all(), dim
    assert sorted(table.ravel().tolist()) == list(range(32))


def test_named_columns():
    lay = layout(tp=2, cp=2, dp=2, pp=2)
    assert list(COORD) == ["tp", "cp", "ep", "dp", "pp"]
    assert lay.column("pp").tolist() == [0] * 8 + [1] * 8
    assert lay.column("cp").tolist() == [0, 0, 1, 1] * 4
    assert lay.column("dp").tolist() == ([0] * 4 + [1] * 4) * 2
    assert lay.coords(13) == {d: int(lay.column(d)[13]) for d in COORD} == {"tp": 1, "cp": 0, "ep": 0, "dp": 1,
                                                                              "pp": 1}


def test_unknown_kind_or_digit_is_an_error():
    lay = layout(tp=2, dp=2)
    with pytest.raises(ValueError, match="group kind 'xp'"):
        lay.groups("tp-xp")
    with pytest.raises(ValueError, match="rank digit 'dp_ep'"):
        lay.ranks("dp_ep")
    with pytest.raises(KeyError):
        lay.column("mp")
