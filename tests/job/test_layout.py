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
    assert lay.groups("dp_ep").tolist() == MEGATRON_2222["dp-cp"]       # expert DP: CP folds into it
    assert lay.groups("tp-pp").tolist() == MEGATRON_2222["tp-pp"]
    assert lay.groups("tp-cp").tolist() == MEGATRON_2222["tp-cp"]
    assert lay.groups("tp-dp").tolist() == MEGATRON_2222["tp-dp-cp"]
    with pytest.raises(ValueError, match="mix the dense generator's kinds with the expert one's"):
        lay.groups("dp-ep")                                             # two generators: no such group
    assert lay.ranks("tp-cp-ep-dp-pp").tolist() == [list(range(16))]


def test_expert_groups_with_ep():
    # tp=2, ep=2, dp=4 (dp digit 2), pp=1: rank = tp + 2 ep + 4 dp_digit
    lay = layout(tp=2, ep=2, dp=4)
    assert lay.groups("ep").tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert lay.groups("dp_ep").tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert lay.groups("dp").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert lay.ranks("ep-dp").tolist() == lay.groups("dp").tolist()
    assert lay.expert_ranks("tp-ep").tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


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


# -- Megatron-Core >= 0.10 expert groups ("parallel folding") ------------------------------------

def mcore_groups(world, sizes_in_order, mask):
    """generate_masked_orthogonal_rank_groups as megatron/core/parallel_state.py documents it:
    global_rank = sum(idx[i] * stride[i]) with strides the prefix products of the sizes in
    order; a group varies the masked digits (fastest first) for one value of the others."""
    strides = [int(np.prod(sizes_in_order[:i])) for i in range(len(sizes_in_order))]
    masked = [i for i, m in enumerate(mask) if m]
    unmasked = [i for i, m in enumerate(mask) if not m]

    def compose(index, dims):
        out = 0
        for i in dims:
            out += (index % sizes_in_order[i]) * strides[i]
            index //= sizes_in_order[i]
        return out

    group_size = int(np.prod([sizes_in_order[i] for i in masked])) if masked else 1
    return [[compose(r, masked) + compose(g, unmasked) for r in range(group_size)]
            for g in range(world // group_size)]


def mcore_get_ranks(tp, ep, dp, pp, cp, order, token):
    """RankGenerator(tp, ep, dp, pp, cp, order).get_ranks(token): dims missing from the order go last."""
    size = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp}
    names = order.split("-") + [d for d in size if d not in order.split("-")]
    mask = [d in token.split("-") for d in names]
    return mcore_groups(tp * ep * dp * pp * cp, [size[d] for d in names], mask)


def _random_settings(rng, count):
    """(tp, cp, ep, etp, dp, pp, order) that initialize_model_parallel accepts."""
    out = []
    while len(out) < count:
        tp, cp, ep, etp, dp, pp = (int(rng.choice(c)) for c in ([1, 2, 4], [1, 2], [1, 2, 4, 8], [1, 2, 4],
                                                                 [1, 2, 3, 4, 6], [1, 2, 3]))
        order = str(rng.choice(["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp", "tp-pp-cp-ep-dp",
                                "cp-tp-ep-dp-pp"]))
        world = tp * cp * dp * pp
        if world % (etp * ep * pp):
            continue
        edp = world // (etp * ep * pp)
        if not (order.endswith("pp") or pp == 1 or edp == dp):
            continue
        if mcore_get_ranks(tp, 1, dp, pp, cp, order, "pp") != mcore_get_ranks(etp, ep, edp, pp, 1, order, "pp"):
            continue
        out.append((tp, cp, ep, etp, dp, pp, order))
    return out


SETTINGS = _random_settings(np.random.default_rng(20251130), 20)


@pytest.mark.parametrize("tp,cp,ep,etp,dp,pp,order", SETTINGS)
def test_dense_and_expert_groups_equal_megatron_cores(tp, cp, ep, etp, dp, pp, order):
    lay = ParallelLayout({"tp": tp, "cp": cp, "ep": ep, "etp": etp, "dp": dp, "pp": pp}, order)
    assert lay.check() is None
    world = tp * cp * dp * pp
    edp = world // (etp * ep * pp)
    dense = lambda token: mcore_get_ranks(tp, 1, dp, pp, cp, order, token)       # noqa: E731
    expert = lambda token: mcore_get_ranks(etp, ep, edp, pp, 1, order, token)    # noqa: E731
    for kind, token in (("tp", "tp"), ("cp", "cp"), ("dp", "dp-cp"), ("pp", "pp"), ("tp-pp", "tp-pp")):
        assert lay.groups(kind).tolist() == sorted(map(sorted, dense(token))), kind
    assert lay.ranks("dp").tolist() == sorted(map(sorted, dense("dp")))
    for kind, token in (("ep", "ep"), ("dp_ep", "dp")):
        assert lay.groups(kind).tolist() == sorted(map(sorted, expert(token))), kind
    for token in ("tp", "tp-ep", "tp-ep-pp"):
        assert lay.expert_ranks(token).tolist() == sorted(map(sorted, expert(token))), token
    # The ep coordinate is the rank's index in its (ascending) EP group.
    for group in lay.groups("ep"):
        assert lay.column("ep")[group].tolist() == list(range(len(group)))


def test_settings_cover_the_folding_cases():
    # Among the 20: EP not dividing DP, CP > 1 with EP > 1, and expert TP != TP.
    assert any(dp % ep for _, _, ep, _, dp, _, _ in SETTINGS)
    assert any(cp > 1 and ep > 1 for _, cp, ep, _, _, _, _ in SETTINGS)
    assert any(etp != tp for tp, _, _, etp, _, _, _ in SETTINGS)


def test_folding_worked_by_hand():
    # tp=2 cp=2 dp=4 ep=4, order tp-cp-ep-dp-pp (16 ranks). Dense: rank = tp + 2 cp + 4 dp.
    # Expert: etp=2, ep=4, edp=2: rank = tp + 2 ep + 8 edp. EP groups step over what is CP in the
    # dense generator (carving EP out of DP would give [0, 4, 8, 12]).
    lay = ParallelLayout({"tp": 2, "cp": 2, "ep": 4, "dp": 4, "pp": 1}, "tp-cp-ep-dp-pp")
    assert lay.groups("ep").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    assert lay.groups("dp_ep").tolist() == [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]]
    assert lay.groups("dp").tolist() == [list(range(0, 16, 2)), list(range(1, 16, 2))]
    assert lay.groups("cp").tolist()[:2] == [[0, 2], [1, 3]]
    assert lay.coords(6) == {"tp": 0, "cp": 1, "ep": 3, "dp": 1, "pp": 0}
    # EP need not divide DP: ep=8 with dp=2 (tp=2 cp=2, etp=1): one EP group of all 8 ranks.
    wide = ParallelLayout({"tp": 2, "cp": 2, "ep": 8, "etp": 1, "dp": 2, "pp": 1}, "tp-cp-ep-dp-pp")
    assert wide.groups("ep").tolist() == [list(range(8))]
    assert wide.expert_ranks("tp").shape == (8, 1) and wide.check() is None


def test_megatron_assertions_refuse_what_it_refuses():
    assert "does not divide the 8 ranks" in ParallelLayout(
        {"tp": 2, "cp": 1, "ep": 3, "dp": 4, "pp": 1}, "tp-cp-ep-dp-pp").check()
    # pp not last: expert DP must equal dense DP (tp=2 dp=2 pp=2, etp=1 ep=2 -> edp 2 ok; ep=1 -> edp 4 refused)
    bad = ParallelLayout({"tp": 2, "cp": 1, "ep": 1, "etp": 1, "dp": 2, "pp": 2}, "tp-cp-ep-pp-dp")
    assert "expert data-parallel size (4) must equal the dense one (2)" in bad.check()
    skew = ParallelLayout({"tp": 2, "cp": 1, "ep": 2, "etp": 1, "dp": 2, "pp": 2}, "tp-pp-cp-ep-dp")
    assert "pipeline groups differ" in skew.check()


def test_megatron_before_0_10_carves_ep_out_of_dp():
    # Megatron-Core < 0.10: one RankGenerator; expert groups use the order with ep and dp / ep
    # (get_ranks(token, independent_ep=True)), CP kept. tp=2 cp=2 ep=2 dp=4 (32 ranks):
    # expert rank = tp + 2 cp + 4 ep + 8 (dp/ep) + 16 pp... here pp=1.
    from rankmap.job.spec import JobSpec

    def job(version):
        return JobSpec(tp=2, cp=2, ep=2, dp=4, num_micro_batches=1, framework="megatron", framework_version=version)

    old, new = ParallelLayout.of(job("0.9")), ParallelLayout.of(job("0.12"))
    assert old.groups("ep").tolist()[:2] == [[0, 4], [1, 5]]
    assert old.groups("ep").tolist() == mcore_get_ranks(2, 2, 2, 1, 2, "tp-cp-ep-dp-pp", "ep")  # dp digit = dp/ep
    assert new.groups("ep").tolist()[:2] == [[0, 2], [1, 3]]                                   # folded over CP
    assert old.groups("dp").tolist() == new.groups("dp").tolist()                              # dense: the same
    assert old.groups("dp_ep").tolist()[0] == [0, 8]


def test_megatron_before_0_10_needs_ep_to_divide_dp():
    from rankmap.errors import SpecError
    from rankmap.job.spec import JobSpec, ModelShape

    moe = ModelShape(layers=4, hidden=64, heads=4, seq_len=32, experts=8)
    ok = JobSpec(tp=2, ep=4, etp=1, dp=2, model=moe, num_micro_batches=1).resolved(32)  # 0.10+: EP need not divide DP
    assert ParallelLayout.of(ok).groups("ep").tolist() == [[0, 1, 2, 3]]
    with pytest.raises(SpecError, match="ep=4 must divide dp=2 \\(Megatron-Core before 0.10 carves EP out of DP\\)"):
        JobSpec(tp=2, ep=4, dp=2, model=moe, num_micro_batches=1, framework="megatron",
                framework_version="0.9").resolved(32)
