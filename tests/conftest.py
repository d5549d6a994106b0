"""Shared fixtures: small clusters and jobs written as the user would write them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> Path: a dedented file in a temp folder."""
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return _write


SMALL_CLUSTER = """\
name: small
hosts: {gpus: 8, nics: 8}
links: {nic_gbps: 200, tor_downlink_gbps: 200, tor_uplinks: 4, tor_uplink_gbps: 400}
spine: {switches: 2}
tor_groups:
  - name: a
    capacity: 4
    hosts: "n[01-04]"
  - name: b
    capacity: 4
    hosts: "n[05-08]"
availability:
  busy: "n02"
"""


@pytest.fixture
def small_cluster_text() -> str:
    return SMALL_CLUSTER


@pytest.fixture(scope="session")
def racks_plan(tmp_path_factory):
    """racks_plan(dp) -> Path of the rankmap.json that ``rankmap plan --example racks --dp DP``
    writes (a real run of the command line; 8 GPUs per host, tp*pp = 32, so 4 * dp hosts), made
    once per session and dp. Read-only: a test that writes beside the map copies it first."""
    made: dict[int, Path] = {}

    def plan(dp: int) -> Path:
        if dp not in made:
            out = tmp_path_factory.mktemp(f"racks-dp{dp}")
            run = subprocess.run([sys.executable, "-m", "rankmap", "plan", "--example", "racks", "--dp", str(dp),
                                  "--out", str(out), "--no-picture"], capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr
            made[dp] = out / "rankmap.json"
        return made[dp]
    return plan
