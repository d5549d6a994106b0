"""The engine's docstring examples run (pytest's --doctest-modules covers only its testpaths)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util

import pytest

TORCH_FREE = ["engine.config", "engine.ranks", "engine.runspec", "engine.data", "engine.launch", "engine.launchfiles"]
WITH_TORCH = ["engine.mesh", "engine.optim"]


@pytest.mark.parametrize("name", TORCH_FREE + WITH_TORCH)
def test_docstring_examples(name):
    if name in WITH_TORCH and importlib.util.find_spec("torch") is None:
        pytest.skip("needs PyTorch")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
