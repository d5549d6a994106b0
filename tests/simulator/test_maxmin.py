"""Progressive filling and the event loop: max-min fairness checked by its definition."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from rankmap.simulator import maxmin
from rankmap.simulator.events import complete_coflows
from rankmap.simulator.maxmin import FairShare, max_min_rates


def random_instance(seed: int, links: int = 30, coflows: int = 60):
    rng = np.random.default_rng(seed)
    dense = (rng.random((links, coflows)) < 0.12) * rng.choice([0.25, 0.5, 1.0, 2.0], size=(links, coflows))
    dense[rng.integers(0, links, coflows), np.arange(coflows)] += 1.0   # every coflow crosses a link
    return sparse.csr_array(dense), rng.uniform(1.0, 10.0, links)


@pytest.mark.parametrize("seed", range(20))
def test_rates_are_feasible_and_max_min_fair(seed):
    """Feasible, and every coflow has a bottleneck: a full link on which no coflow is faster."""
    matrix, cap = random_instance(seed)
    rate = max_min_rates(matrix, cap)
    dense = matrix.toarray()
    load = dense @ rate
    assert (load <= cap * (1 + 1e-9)).all()
    full = load >= cap * (1 - 1e-9)
    for c in range(dense.shape[1]):
        on = np.flatnonzero(dense[:, c] > 0)
        assert any(full[l] and rate[c] >= rate[dense[l] > 0].max() * (1 - 1e-9) for l in on), c


def test_weights_count_flows():
    """A coflow with 2 flows on a link loads it twice; halves (queue pairs) load it half."""
    matrix = sparse.csr_array(np.array([[2.0, 1.0], [0.5, 0.0]]))
    assert max_min_rates(matrix, np.array([9.0, 1.0])).tolist() == [2.0, 5.0]


def test_active_subset_equals_submatrix():
    matrix, cap = random_instance(3)
    active = np.arange(matrix.shape[1]) % 3 != 0
    got = FairShare(matrix, cap).rates(active)
    want = max_min_rates(matrix[:, np.flatnonzero(active)], cap)
    assert np.allclose(got[active], want) and (got[~active] == 0).all()


def test_coflow_without_links_is_instant():
    matrix = sparse.csr_array(np.array([[1.0, 0.0]]))
    assert max_min_rates(matrix, np.array([4.0])).tolist() == [4.0, np.inf]


def test_components_split_independent_coflows():
    matrix = sparse.csr_array(np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]))
    comp = FairShare(matrix, np.ones(3)).components()
    assert comp[0] == comp[1] and comp[2] == comp[3] and comp[0] != comp[2]


def test_event_loop_speeds_up_survivors():
    """Link 0 (10 B/s) shared by a 10-byte and a 40-byte coflow, link 1 (2 B/s) holds the second
    and a 6-byte third: rates 8/2 then... each completion recomputes the survivors."""
    matrix = sparse.csr_array(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    finish, first, events = complete_coflows(FairShare(matrix, np.array([10.0, 2.0])), np.array([10.0, 40.0, 6.0]))
    assert first.tolist() == [9.0, 1.0, 1.0]
    # t=10/9: coflow 0 done (coflows 1, 2 have 38.89 and 4.89 left at 1 B/s each);
    # then 1 and 2 share link 1 at 1 B/s each until 2 ends at 10/9 + 4.889 = 6 s;
    # coflow 1 then runs alone at 2 B/s: 40 - 6 = 34 bytes left -> 6 + 17 = 23 s.
    assert finish.tolist() == pytest.approx([10 / 9, 23.0, 6.0])
    assert events == 3


def test_event_loop_conserves_bytes_on_random_instances():
    matrix, cap = random_instance(7)
    sizes = np.random.default_rng(1).uniform(1, 100, matrix.shape[1])
    finish, _, _ = complete_coflows(FairShare(matrix, cap), sizes)
    assert (finish > 0).all()
    # No coflow can beat its best possible time, alone on its tightest link.
    dense = matrix.toarray()
    alone = np.array([sizes[c] / (cap[dense[:, c] > 0] / dense[dense[:, c] > 0, c]).min() for c in range(sizes.size)])
    assert (finish >= alone * (1 - 1e-9)).all()


def test_classic_three_links_by_hand():
    """Links 0, 1, 2 of 10, 8, 6 B/s; flow a crosses all three, b link 0, c link 1, d links
    1 and 2. Equal shares: link 0 (a, b) 5, link 1 (a, c, d) 8/3, link 2 (a, d) 3. Link 1
    saturates first at 8/3 and freezes a, c, d; b takes the rest of link 0, 10 - 8/3."""
    matrix = sparse.csr_array(np.array([[1.0, 1.0, 0.0, 0.0],
                                        [1.0, 0.0, 1.0, 1.0],
                                        [1.0, 0.0, 0.0, 1.0]]))
    rate = max_min_rates(matrix, np.array([10.0, 8.0, 6.0]))
    assert rate.tolist() == pytest.approx([8 / 3, 22 / 3, 8 / 3, 8 / 3], rel=1e-12)


def test_kept_rates_resume_filling_by_hand():
    """Three coflows on a 12 B/s link, the third also on a 2 B/s link: 5, 5, 2. Given the
    third's rate (the level filling froze first), filling the other two gives 5 and 5."""
    matrix = sparse.csr_array(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]]))
    fair = FairShare(matrix, np.array([12.0, 2.0]))
    kept = np.array([False, False, True])
    got = fair.rates(None, kept, np.array([0.0, 0.0, 2.0]))
    assert got.tolist() == [5.0, 5.0, 2.0] == fair.rates().tolist()


@pytest.mark.parametrize("seed", range(10))
def test_kept_rates_equal_a_cold_fill(seed):
    """Keeping the coflows below any max-min level and refilling the rest is a cold fill."""
    matrix, cap = random_instance(seed)
    fair = FairShare(matrix, cap)
    cold = fair.rates()
    for level in np.unique(cold)[::7]:
        kept = cold < level
        assert np.allclose(fair.rates(None, kept, cold), cold, rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", range(10))
def test_warm_event_loop_equals_cold(seed):
    """Warm starts (survivors slower than the finished coflow keep their rates) change
    nothing but rounding: same events, finish times within 1e-12."""
    matrix, cap = random_instance(seed, links=40, coflows=80)
    sizes = np.random.default_rng(seed).uniform(1, 100, matrix.shape[1])
    fair_warm, fair_cold = FairShare(matrix, cap), FairShare(matrix, cap)
    warm = complete_coflows(fair_warm, sizes, warm=True)
    cold = complete_coflows(fair_cold, sizes, warm=False)
    assert warm[2] == cold[2] and fair_warm.rounds < fair_cold.rounds
    assert np.allclose(warm[0], cold[0], rtol=1e-12, atol=0) and (warm[1] == cold[1]).all()


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("gather_share", [0, 10**9])
def test_fast_paths_equal_the_exact_fill_bitwise(seed, gather_share, monkeypatch):
    """The speed-ups change no float: filling the whole matrix (no column selection) equals
    filling the selected columns, and one sparse product per round equals gathering rows,
    bit for bit (gather_share 0 always gathers, 10**9 always multiplies)."""
    matrix, cap = random_instance(seed, links=40, coflows=80)
    reference = FairShare(matrix, cap).rates()                    # default: whole matrix, mixed branches
    monkeypatch.setattr(maxmin, "_GATHER_SHARE", gather_share)
    padded = sparse.hstack([matrix, sparse.csr_array(np.ones((40, 1)))], format="csr")
    active = np.arange(81) < 80                                   # an idle extra column forces the selection
    selected = FairShare(padded, cap).rates(active)[:80]
    whole = FairShare(matrix, cap).rates()
    assert (selected == reference).all() and (whole == reference).all()
    sizes = np.random.default_rng(seed).uniform(1, 100, 80)
    assert (complete_coflows(FairShare(matrix, cap), sizes)[0] == complete_coflows(FairShare(padded, cap),
            np.append(sizes, 0.0))[0][:80]).all()


@pytest.mark.parametrize("seed", range(6))
def test_canonical_csr_and_other_formats_fill_alike_bitwise(seed):
    """A canonical CSR matrix is filled as given (its transpose built only when read);
    any other format is converted first. Rates of every coflow and of a subset, the
    components and the event loop's finish times are the same floats either way, and a
    transpose that was never read was never built."""
    matrix, cap = random_instance(seed, links=40, coflows=80)
    as_csr, as_coo = FairShare(matrix, cap), FairShare(sparse.coo_array(matrix), cap)
    assert (as_csr.rates() == as_coo.rates()).all()
    active = np.random.default_rng(seed).random(80) < 0.5
    assert (as_csr.rates(active) == as_coo.rates(active)).all()
    assert (as_csr.components() == as_coo.components()).all()
    assert (as_csr.has_links == as_coo.has_links).all()
    sizes = np.random.default_rng(seed).uniform(1, 100, 80)
    got = complete_coflows(FairShare(matrix, cap), sizes)
    want = complete_coflows(FairShare(sparse.coo_array(matrix), cap), sizes)
    assert (got[0] == want[0]).all() and got[2] == want[2]
    nine = sparse.csr_array(np.ones((9, 3)))                       # link 0 holds a ninth of the entries
    fair = FairShare(nine, np.array([9.0] + [100.0] * 8))           # and freezes every coflow in round 1
    assert fair.rates().tolist() == [3.0, 3.0, 3.0] and fair._whole[1]._transpose is None
