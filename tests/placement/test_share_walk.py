"""The sub-band share programme over reachable totals: same walks as a dense scan, known optima."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rankmap.placement.band_pods import group_subsets
from rankmap.placement.share_walk import share_walk


def _dense_scan(sizes, totals, target, frac, rows, ragged):
    """The programme as it ran before (a dense table over every total 0..target, the options
    scanned in listing order, strict improvements only): the reference walks must match."""
    best = np.full(target + 1, np.inf)
    best[0] = 0.0
    choice = []
    for pod_sizes, total in zip(sizes, totals):
        new, arg = np.full(target + 1, np.inf), np.full(target + 1, -1)
        for k, size in enumerate(pod_sizes):
            if size > target:
                continue
            steps = (size % rows[0] != 0) + (rows[1] > 0 and (total - size) % rows[1] != 0)
            cand = best[:target + 1 - size] + abs(size - frac * total) / rows[0] + ragged * steps
            better = cand < new[size:]
            new[size:][better] = cand[better]
            arg[size:][better] = k
        best = new
        choice.append(arg)
    t = reached = int(np.nonzero(np.isfinite(best))[0].max())
    picks = []
    for pod_sizes, arg in zip(reversed(sizes), reversed(choice)):
        picks.append(int(arg[t]))
        t -= pod_sizes[picks[-1]]
    return reached, tuple(reversed(picks))


def _random_case(rng):
    pods = [[int(rng.choice([64, 64, 64, 40, 17, 8])) for _ in range(rng.integers(1, 7))]
            for _ in range(rng.integers(1, 8))]
    sizes = [[sum(p[i] for i in o) for o in group_subsets([(g, n) for g, n in enumerate(p)])] for p in pods]
    totals = [sum(p) for p in pods]
    target = int(rng.integers(1, sum(totals) + 1))
    rows = (int(rng.integers(1, 5)), int(rng.choice([0, 1, 2, 3])))
    return sizes, totals, target, float(rng.choice([0.25, 1 / 3, 0.5])), rows, float(rng.choice([0.0, 2.0]))


def test_two_pods_half_each():
    # pod 0 gives 4 of its 8 (miss 0), pod 1 its group of 2 (miss 1 against 3 of 6): cost 1;
    # 0 + 6 would cost 4 + 3.
    assert share_walk([[0, 4, 4, 8], [0, 4, 2, 6]], [8, 6], 6, 0.5, (1, 0), 0.0) == (6, (1, 2))


def test_ties_keep_the_first_option_listed():
    # options 1 and 2 both give 4 hosts: the first listed wins, in every pod
    assert share_walk([[0, 4, 4, 8], [0, 4, 4, 8]], [8, 8], 8, 0.5, (1, 0), 0.0) == (8, (1, 1))


def test_no_exact_total_reaches_the_largest_below():
    # groups of 64: 100 hosts cannot be met; 64 is the most below it
    assert share_walk([[0, 64, 64, 128]], [128], 100, 0.5, (1, 0), 0.0) == (64, (1,))


@pytest.mark.parametrize("seed", range(6))
def test_same_walk_as_the_dense_scan(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        case = _random_case(rng)
        assert share_walk(*case) == _dense_scan(*case)


def test_least_cost_among_every_choice():
    rng = np.random.default_rng(7)
    checked = 0
    while checked < 30:
        sizes, totals, target, frac, rows, ragged = _random_case(rng)
        if math.prod(len(s) for s in sizes) > 20_000:
            continue  # every choice is enumerated below: keep the brute force small
        checked += 1
        reached, picks = share_walk(sizes, totals, target, frac, rows, ragged)

        def cost(choice):
            return sum(abs(s[k] - frac * t) / rows[0]
                       + ragged * ((s[k] % rows[0] != 0) + (rows[1] > 0 and (t - s[k]) % rows[1] != 0))
                       for s, t, k in zip(sizes, totals, choice))

        every = list(itertools.product(*(range(len(s)) for s in sizes)))
        reachable = {sum(s[k] for s, k in zip(sizes, c)) for c in every}
        assert reached == max(t for t in reachable if t <= target)
        assert sum(s[k] for s, k in zip(sizes, picks)) == reached
        least = min(cost(c) for c in every if sum(s[k] for s, k in zip(sizes, c)) == reached)
        assert cost(picks) == pytest.approx(least, abs=1e-9)
