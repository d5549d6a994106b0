"""Replay every input that ever failed (tests/data/fuzz-corpus/): each is accepted with every name
in its grammar, or refused with one line; none crashes or hangs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rankmap.errors import RankmapError
from rankmap.fuzzing import names_ok, parsers

DATA = Path(__file__).resolve().parents[1] / "data"
PARSERS = parsers(DATA / "field-cases")
CORPUS = sorted(p for p in (DATA / "fuzz-corpus").iterdir() if "--" in p.name)


def test_corpus_covers_every_parser():
    assert {p.name.split("--")[0] for p in CORPUS} == set(PARSERS)


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_input_is_refused_in_one_line_or_accepted_in_grammar(path):
    parse = PARSERS[path.name.split("--")[0]][0]
    t0 = time.perf_counter()
    try:
        assert names_ok(parse(path.read_text())) is None
    except RankmapError as exc:
        message = str(exc)
        assert message.strip() and "\n" not in message, message
    assert time.perf_counter() - t0 < 30  # a hang guard, not a speed target (benchmarks/limits.py)
