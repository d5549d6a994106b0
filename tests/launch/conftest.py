"""Launch test fixtures: a real four-node Slurm on this machine (see slurm_cluster.py)."""

from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A running Slurm with nodes n1..n4 (skipped, saying why, where it cannot run)."""
    import slurm_cluster

    why = slurm_cluster.missing()
    if why:
        pytest.skip(why)
    t0 = time.perf_counter()
    with slurm_cluster.local_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        print(f"\nlocal Slurm up in {time.perf_counter() - t0:.1f} s")
        yield cluster
