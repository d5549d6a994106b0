"""A few hundred fuzzed inputs per parser: a parser returns or raises RankmapError, nothing else.

The long run (10,000+ inputs per parser) is ``python benchmarks/fuzz.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankmap.errors import RankmapError
from rankmap.fuzzing import TOKENS, json_variants, mutate, names_ok, parsers, structured

PARSERS = parsers(Path(__file__).resolve().parents[1] / "data" / "field-cases")
EDITS = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10**6), st.sampled_from(TOKENS)), max_size=8)


def check(parse, text: str) -> None:
    try:
        parse(text)
    except RankmapError as exc:
        assert str(exc).strip() and "\n" not in str(exc).strip(), repr(str(exc))


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(data=st.data())
def test_mutated_inputs(name, data):
    parse, seeds = PARSERS[name]
    seed = data.draw(st.sampled_from(seeds))
    check(parse, mutate(seed, data.draw(EDITS)))


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=30, deadline=2000, derandomize=True)
@given(tokens=st.lists(st.sampled_from(TOKENS + ["SwitchName", "Nodes", "node", "slots", "a", "b"]), max_size=80))
def test_token_soup(name, tokens):
    check(PARSERS[name][0], "".join(tokens))


@pytest.mark.parametrize("name", ["k8s-labels", "rankmap-json"])
def test_structured_json_variants(name):
    parse, seeds = PARSERS[name]
    for variant in json_variants(seeds[0]):
        check(parse, variant)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_grammar_aware_inputs(name, seed):
    """Hostile names, numbers and shapes in the format's own syntax (rankmap.fuzzing.structured):
    refused in one line, or accepted with every name in its grammar."""
    parse, seeds = PARSERS[name]
    text = structured(name, random.Random(seed), seeds[0])
    try:
        assert names_ok(parse(text)) is None
    except RankmapError as exc:
        assert str(exc).strip() and "\n" not in str(exc), repr(str(exc))
