"""The house rules of the code base, checked on the source: one namespace, layers, no cycles, no torch.

The layer order, lowest first. A module may import modules of its own subpackage and of
lower layers only; two subpackages on one layer do not import each other.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]

# Folder in the repository -> subpackage it installs as (pyproject.toml, [tool.setuptools.package-dir]).
FOLDERS = {"rankmap": "rankmap", "topology": "rankmap.topology", "job": "rankmap.job",
           "placement": "rankmap.placement", "simulator": "rankmap.simulator", "launch": "rankmap.launch",
           "diagnose": "rankmap.diagnose", "engine": "rankmap.engine", "examples": "rankmap.examples"}

LAYERS = [
    ["rankmap.errors"],                                                 # plumbing, nothing domain-specific:
    ["rankmap.names"],                                                  #   the name grammars,
    ["rankmap.fileio"],                                                 #   exceptions, file reading and atomic
    ["rankmap.yamlio"],                                                 #   writes, line-aware YAML
    ["rankmap.topology"],                                               # the fabric
    ["rankmap.examples"],                                               # embedded example files
    ["rankmap.job"],                                                    # what is placed
    ["rankmap.placement"],                                              # the solver
    ["rankmap.simulator"],                                              # traffic over the fabric
    ["rankmap.launch", "rankmap.diagnose"],                             # torch-free run tooling
    ["rankmap.engine"],                                                 # the trainer
    ["rankmap.api", "rankmap.fuzzing"],                                 # one function per command
    ["rankmap.cli"],                                                    # argv
    ["rankmap.__main__", "rankmap"],                                    # entry points (``rankmap`` itself only
]                                                                       #   lazily re-exports rankmap.api)


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("").parts
            parts = package.split(".") + [p for p in rel if p != "__init__"]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _unit(module: str) -> tuple[int, str]:
    """(layer, unit) of a module: the longest entry of LAYERS it falls under."""
    best = None
    for level, names in enumerate(LAYERS):
        for name in names:
            inside = module == name or (name != "rankmap" and module.startswith(name + "."))
            if inside and (best is None or len(name) > len(best[1])):
                best = (level, name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def _imports(module: str, path: Path) -> set[str]:
    """rankmap modules that ``module`` imports, anywhere in the file (lazy imports count; those
    under ``if TYPE_CHECKING:`` do not, as they never run)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name.split(".")[0] == "rankmap" and name != module:
                found.add(name)
    return found


GRAPH = nx.DiGraph([(m, d) for m, p in MODULES.items() for d in _imports(m, p)])


def test_every_import_is_absolute_under_the_rankmap_namespace():
    bare = {"topology", "job", "placement", "simulator", "launch", "diagnose", "engine", "examples"}
    offenders = []
    for folder in list(FOLDERS) + ["tests", "benchmarks"]:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    tops = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    tops = [(node.module or "").split(".")[0]]
                else:
                    continue
                offenders += [f"{path.relative_to(REPO)}:{node.lineno}: {t}" for t in tops if t in bare]
    assert offenders == []


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(GRAPH))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c + [c[0]]) for c in cycles[:5])


def test_layers_import_downward_only():
    wrong = []
    for a, b in GRAPH.edges:
        (la, ua), (lb, ub) = _unit(a), _unit(b)
        if lb > la or (lb == la and ua != ub):
            wrong.append(f"{a} (layer {la}) imports {b} (layer {lb})")
    assert wrong == []


def test_the_layer_check_sees_a_bad_import(tmp_path):
    """The checks above can fail: an upward import, relative or absolute, lazy or not, is found."""
    probe = tmp_path / "model.py"
    probe.write_text("def f():\n    from ..placement.plan import plan\n    from rankmap.job import spec\n")
    found = _imports("rankmap.topology.model", probe)
    assert found == {"rankmap.placement.plan", "rankmap.job.spec"}
    assert all(_unit(m)[0] > _unit("rankmap.topology.model")[0] for m in found)


@pytest.mark.parametrize("modules", [
    "rankmap, rankmap.placement, rankmap.launch, rankmap.diagnose",
    "rankmap.api, rankmap.cli, rankmap.placement.plan, rankmap.simulator.simulate, rankmap.launch.formats, "
    "rankmap.launch.common, rankmap.launch.torchrun, rankmap.launch.slurm, rankmap.launch.mpi, "
    "rankmap.launch.deepspeed, rankmap.launch.local, rankmap.diagnose.analysis, rankmap.diagnose.records, "
    "rankmap.diagnose.heatmap, rankmap.diagnose.trace",
])
def test_planning_launching_and_diagnosing_never_import_torch(modules):
    code = f"import sys, {modules}\nprint('torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr


def test_one_top_level_package():
    """Only ``rankmap`` is installed at the top level (pyproject's packages all live under it)."""
    tomllib = pytest.importorskip("tomllib")
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {p.split(".")[0] for p in cfg["packages"]} == {"rankmap"}
    assert {v: k for k, v in cfg["package-dir"].items()} == {f: p for f, p in FOLDERS.items()}


def test_the_wheel_installs_only_rankmap(tmp_path):
    """``pip install .`` puts one import package on sys.path: the built wheel holds ``rankmap/`` only."""
    import importlib.util
    import shutil
    import zipfile

    import setuptools
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if major < 68:   # pyproject.toml's [build-system] requires >= 68
        pytest.skip(f"setuptools {setuptools.__version__} here; the build needs >= 68")
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.skip(f"setuptools {setuptools.__version__} builds wheels only with the 'wheel' package")
    src = tmp_path / "src"   # build a copy: setuptools leaves build/ in the tree it builds
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__",
                                                              ".hypothesis", ".pytest_cache", "rankmap-out"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    (wheel,) = tmp_path.glob("rankmap-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"rankmap"}
    for sub in ("topology", "job", "placement", "simulator", "launch", "diagnose", "engine", "cli", "examples"):
        assert f"rankmap/{sub}/__init__.py" in names
    assert "rankmap/examples/megascale-12k/cluster.yaml" in names
