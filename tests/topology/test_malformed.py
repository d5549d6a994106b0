"""The malformed-file corpus: every file gives one line of error naming FILE:LINE, exit 3,
no traceback, and ``topo import`` writes nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rankmap.cli import main as rankmap_main

CORPUS = Path(__file__).resolve().parents[1] / "data" / "malformed"
REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    return rankmap_main(["topo", *argv])


def _cases():
    rows = []
    for line in (CORPUS / "cases.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            name, fmt, number, fragment = line.split("\t")
            rows.append(pytest.param(name, fmt, int(number), fragment, id=name))
    return rows


CASES = _cases()


def test_corpus_is_large_and_complete():
    listed = {p.values[0] for p in CASES}
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != "cases.tsv"}
    assert listed == on_disk and len(listed) >= 30
    kinds = " ".join(listed)
    for kind in ("truncated", "bracket", "unknown-key", "cycle", "duplicate", "empty", "binary-garbage"):
        assert kind in kinds


@pytest.mark.parametrize("name,fmt,line,fragment", CASES)
def test_malformed_file_gives_one_located_line(name, fmt, line, fragment, tmp_path, capsys):
    path = CORPUS / name
    out = tmp_path / "cluster.yaml"
    fmt, _, version = fmt.partition("@")  # "slurm-block@24.11": the Slurm release the file targets
    argv = ["show", str(path), "--from", fmt] if fmt == "cluster" else \
        ["import", "--from", fmt, str(path), "--out", str(out)] + (["--slurm-version", version] if version else [])
    assert main(argv) == 3
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert len(err) == 1, captured.err
    assert err[0].startswith(f"rankmap: error: {path}:{line}: "), err[0]
    assert fragment in err[0]
    assert "Traceback" not in captured.err + captured.out
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name,fmt", [("tree-binary-garbage.conf", "slurm"), ("k8s-truncated.json", "k8s-labels"),
                                      ("volcano-cycle.yaml", "volcano")])
def test_real_command_line_never_shows_a_traceback(name, fmt, tmp_path):
    out = tmp_path / "cluster.yaml"
    proc = subprocess.run([sys.executable, "-m", "rankmap", "topo", "import", "--from", fmt,
                           str(CORPUS / name), "--out", str(out)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 3 and proc.stdout == ""
    assert re.fullmatch(rf"rankmap: error: {re.escape(str(CORPUS / name))}:\d+: .+\n", proc.stderr), proc.stderr
    assert not out.exists()
