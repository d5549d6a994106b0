"""Outputs written piece by piece (rankmap.json of 10^6 ranks): all or nothing, as whole texts are."""

from __future__ import annotations

import pytest

from rankmap import fileio
from rankmap.errors import RankmapError


def test_pieces_are_written_in_order_and_committed_together(tmp_path):
    pieces = (f"line {i}\n" for i in range(3))
    fileio.atomic_write_files(tmp_path, {"hostfile": "h1\n", "rankmap.json": pieces, "plan.png": b"\x89PNG"})
    assert (tmp_path / "rankmap.json").read_text() == "line 0\nline 1\nline 2\n"
    assert (tmp_path / "hostfile").read_text() == "h1\n" and (tmp_path / "plan.png").read_bytes() == b"\x89PNG"


def test_a_piece_that_fails_leaves_the_old_outputs_and_no_temporaries(tmp_path):
    fileio.atomic_write_files(tmp_path, {"hostfile": "old\n", "rankmap.json": "{}\n"})

    def pieces():
        yield "{\n"
        raise RankmapError("the map could not be formatted")

    with pytest.raises(RankmapError, match="could not be formatted"):
        fileio.atomic_write_files(tmp_path, {"hostfile": "new\n", "rankmap.json": pieces()})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostfile", "rankmap.json"]
    assert (tmp_path / "hostfile").read_text() == "old\n" and (tmp_path / "rankmap.json").read_text() == "{}\n"
