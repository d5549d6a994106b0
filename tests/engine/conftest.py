"""Engine test fixtures (the plain helpers -- small rank maps, the launch command as a user runs it,
torchrun lines run by hand with each host emulated on 127.0.0.1 -- are in tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts real multi-process torch jobs (seconds to a minute each)")


@pytest.fixture
def engine_yaml(tmp_path):
    """engine_yaml(text) -> Path of an engine config file."""
    def _write(text: str, name: str = "engine.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return _write
