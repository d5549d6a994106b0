"""``rankmap launch --local``: real training runs on this machine, compared with one process.

Each run starts one torchrun agent per host of the map on 127.0.0.1 (gloo, one thread per
process). The single-process reference runs here, in the test process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the engine needs PyTorch (pip install torch==2.13.0)")

from helpers import launch_cli, make_rankmap, read_log  # noqa: E402

from rankmap.engine.config import load_config
from rankmap.engine.reference import reference_losses
from rankmap.engine.runspec import resolve_run
from rankmap.job.rank_map import read_rankmap

pytestmark = pytest.mark.slow
torch.set_num_threads(1)


def reference(rankmap, config, steps):
    cfg = load_config(config)
    return reference_losses(cfg, resolve_run(cfg, read_rankmap(rankmap).job), steps)


def failure_report(run, folder) -> str:
    """What a failed run says: the launcher's error line (the worker that failed first and its
    stderr file, see rankmap.launch.local.describe_failure) with the last 6,000 characters of that
    file, every fatal-error report (faulthandler: a worker killed by a signal, e.g. SIGABRT), then
    the tails of stdout and stderr; the whole stderr is kept in ``folder/launch-stderr.txt``."""
    (folder / "launch-stderr.txt").write_text(run.stderr)
    parts = [line for line in run.stderr.splitlines() if line.startswith("rankmap: error:")]
    for log in re.findall(r"its output: (\S+?)(?:;|$)", "\n".join(parts), re.M):
        text = Path(log).read_text(errors="replace") if Path(log).is_file() else "(missing)"
        parts.append(f"--- {log} (end) ---\n{text[-6000:]}")
    parts += re.findall(r"(?:[^\n]*terminate called[^\n]*\n)?[^\n]*Fatal Python error:.*?\n(?:[^\n]*\n)*?[^\n]*Extension "
                        r"modules", run.stderr)
    return "\n".join(parts) + f"\n--- stdout ---\n{run.stdout[-2000:]}\n--- stderr (all of it in " \
        f"{folder / 'launch-stderr.txt'}) ---\n{run.stderr[-8000:]}"


def test_local_3d_run_trains_20_steps_and_starts_where_one_process_does(tmp_path):
    """Done-when 1: 2 hosts x 4 processes, tp=2 pp=2 dp=2 (FSDP2, sequence parallel, 1F1B)."""
    rankmap = make_rankmap(tmp_path / "plan", tp=2, pp=2, dp=2, hosts=("h1", "h2"))
    run_dir = tmp_path / "run"
    run = launch_cli("--rankmap", rankmap, "--local", "--steps", 20, "--out", run_dir, "--timeout", 160)
    assert run.returncode == 0, failure_report(run, tmp_path)
    log = read_log(run_dir)
    losses = [r["loss"] for r in log]
    assert [r["step"] for r in log] == list(range(1, 21))
    assert all(r["tokens"] == 8 * 64 and r["tokens_per_s"] > 0 for r in log)
    ref = reference(rankmap, None, 2)
    assert abs(losses[0] - ref[0]) < 1e-5  # same weights, same tokens: the forward pass agrees
    assert abs(losses[1] - ref[1]) < 1e-4  # and so did the gradients, their clipping and AdamW
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5 and losses[-1] < losses[0] - 1.0
    placement = json.loads((run_dir / "placement.json").read_text())
    assert placement["launcher_order"] == "kept" and placement["groups_verified"]
    assert [(r["rank"], r["host"], r["local_rank"]) for r in placement["ranks"]] == \
        [(r, "h1" if r < 4 else "h2", r % 4) for r in range(8)]
    assert "20 steps, loss" in run.stdout


def test_interleaved_1f1b_with_fsdp_resumes_from_a_checkpoint_exactly(tmp_path, engine_yaml):
    """pp=2 with 2 virtual stages each, dp=2: stop after 2 steps, resume to 4, match one process."""
    rankmap = make_rankmap(tmp_path / "plan", pp=2, dp=2, vpp=2, hosts=("solo",))
    ckpt = tmp_path / "ckpt"
    config = engine_yaml(f"checkpoint: {{dir: {json.dumps(str(ckpt))}}}\ntrain: {{lr: 0.01}}\n")
    run_dir = tmp_path / "run"
    first = launch_cli("--rankmap", rankmap, "--local", "--config", config, "--steps", 2, "--out", run_dir,
                       "--timeout", 80, timeout=100)
    assert first.returncode == 0, failure_report(first, tmp_path)
    assert (ckpt / "latest").read_text() == "step-00000002\n" and (ckpt / "step-00000002" / "meta.json").is_file()
    second = launch_cli("--rankmap", rankmap, "--local", "--config", config, "--steps", 4, "--out", run_dir,
                        "--timeout", 80, timeout=100)
    assert second.returncode == 0, failure_report(second, tmp_path)
    losses = [r["loss"] for r in read_log(run_dir)]
    assert len(losses) == 4 and (ckpt / "latest").read_text() == "step-00000004\n"
    assert not list(ckpt.glob(".*.tmp"))  # nothing half-written left behind
    assert np.allclose(losses, reference(rankmap, config, 4), atol=2e-5, rtol=0)
