"""``--objective`` and ``--tier-weights`` values the planner cannot honour are usage errors
(exit 2, one line naming the flag and value): a weight on ``top-first`` (once exit 70, a
TypeError), bytes summed with counts (``moved=10,tiers=1`` once ranked as ``tiers`` alone),
weights that overflow the sum (``1e308``)."""

from __future__ import annotations

import pytest
from helpers import usage_error

from rankmap.cli import main


@pytest.mark.parametrize("flags, message", [
    (("--objective", "top-first=1"), "argument --objective: top-first=1: top-first is lexicographic"),
    (("--objective", "tiers=1,top-first=1"), "argument --objective: top-first=1: top-first is lexicographic"),
    (("--objective", "moved=10,tiers=1"), "argument --objective: moved=10 (a count of hosts) and tiers=1 (bytes "
                                          "per iteration) do not add up"),
    (("--objective", "fragmentation=1e308,tiers=1e308"), "argument --objective: bad term 'fragmentation=1e308' "
                                                         "(want NAME=WEIGHT with a finite weight >= 0 and <= 1e+12)"),
    (("--objective", "tiers=2e12"), "argument --objective: bad term 'tiers=2e12' (want NAME=WEIGHT with a finite "
                                    "weight >= 0 and <= 1e+12)"),
    (("--tier-weights", "core=1e300"), "argument --tier-weights: bad tier weight 'core=1e300' (want NAME=WEIGHT "
                                       "with a finite weight >= 0 and <= 1e+12)"),
])
def test_objective_weights_that_do_not_add_up_are_refused(capsys, tmp_path, flags, message):
    err = usage_error(capsys, "plan", "--example", "racks", "--out", tmp_path / "p", "--no-picture", *flags)
    assert message in err, err
    assert not (tmp_path / "p").exists()


def test_weights_of_one_unit_and_lexicographic_mixes_plan(capsys, tmp_path):
    """What the refusals point to works: counts summed (spread=1,fragmentation=2), bytes and counts
    ordered (top-first,fragmentation), the largest weight."""
    for i, goal in enumerate(("spread=1,fragmentation=2", "top-first,fragmentation", "tiers=1e12,uplink=1")):
        assert main(["plan", "--example", "racks", "--objective", goal, "--out", str(tmp_path / f"p{i}"),
                     "--no-picture", "--time-limit", "2"]) == 0
        assert (tmp_path / f"p{i}" / "rankmap.json").is_file()
