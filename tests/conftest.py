"""Shared fixtures: small clusters and jobs written as the user would write them."""

from __future__ import annotations

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
