"""Every docstring example in the rankmap package runs (pytest's --doctest-modules would import
the repository's folders under their folder names, not as ``rankmap.*``)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import rankmap

SKIP = {"rankmap.__main__"}           # importing it runs the command line
# Subpackages installed from other folders (package-dir): walk each from its own path.
SUBPACKAGES = ["topology", "job", "placement", "simulator", "launch", "diagnose", "engine", "examples"]


def _modules() -> list[str]:
    names = ["rankmap"] + [info.name for info in pkgutil.walk_packages(rankmap.__path__, "rankmap.")]
    for sub in SUBPACKAGES:
        package = importlib.import_module(f"rankmap.{sub}")
        names.append(package.__name__)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(set(names) - SKIP)


MODULES = _modules()
HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_every_subpackage_is_walked():
    tops = {m.split(".")[1] for m in MODULES if m.count(".") >= 1}
    assert {"topology", "job", "placement", "simulator", "launch", "diagnose", "engine", "cli"} <= tops


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == "torch" and not HAS_TORCH:
            pytest.skip("needs PyTorch (pip install torch==2.13.0)")
        raise
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
