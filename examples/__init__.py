"""Example clusters and jobs, installed as ``rankmap.examples`` (the embedded default is megascale-3tier).

``python examples/generate.py`` regenerates them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rankmap.errors import SpecError

__all__ = ["DEFAULT_EXAMPLE", "example_names", "example_path", "example_inputs"]

DEFAULT_EXAMPLE = "megascale-3tier"


def example_names() -> list[str]:
    """Names of the embedded examples, sorted (folders holding a cluster.yaml)."""
    root = resources.files("rankmap.examples")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.joinpath("cluster.yaml").is_file())


def example_path(example: str, name: str) -> Path:
    """Path of an embedded example file (``rankmap.examples/<example>/<name>``); the file may not exist."""
    return Path(str(resources.files("rankmap.examples").joinpath(example, name)))


def example_inputs(example: str | None = None, cluster: Path | None = None,
                   job: Path | None = None) -> tuple[Path, Path]:
    """The cluster and job spec paths to use: the given ones, the rest from ``example``.

    Parameters
    ----------
    example : str, optional
        Embedded example for missing inputs (default :data:`DEFAULT_EXAMPLE`).
    cluster, job : Path, optional
        Files the user gave; they win over the example's.

    Returns
    -------
    (Path, Path)
        Cluster spec and job spec paths.

    Raises
    ------
    SpecError
        ``example`` names no embedded example (key ``--example``).
    """
    name = example or DEFAULT_EXAMPLE
    if example is not None and not example_path(name, "cluster.yaml").is_file():
        raise SpecError(f"no embedded example {name!r} (try {', '.join(example_names())})", key="--example")
    return cluster or example_path(name, "cluster.yaml"), job or example_path(name, "job.yaml")
