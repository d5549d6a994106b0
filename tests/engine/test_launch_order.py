"""Done-when 2: real processes started from the generated torchrun lines, hosts in shuffled order.

Each line runs as written except for the emulation of hosts on one machine: ``RANKMAP_HOST``
names the host the agent stands for and the plan's master address becomes 127.0.0.1 (all
agents run here). The engine's placement report then says where every rank landed.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the engine needs PyTorch (pip install torch==2.13.0)")

from helpers import free_port, launch_cli, make_rankmap, read_log, run_lines  # noqa: E402

from rankmap.engine.config import load_config
from rankmap.engine.reference import reference_losses
from rankmap.engine.runspec import resolve_run
from rankmap.job.rank_map import read_rankmap
from rankmap.launch.torchrun import read_torchrun_commands

pytestmark = pytest.mark.slow
torch.set_num_threads(1)


def shuffled(n: int, seed: int = 0) -> list[int]:
    """A seeded permutation of range(n) that is not the identity (node 0 never starts first)."""
    order = list(range(n))
    rng = random.Random(seed)
    while order[0] == 0:
        rng.shuffle(order)
    return order


def generate(tmp_path, rankmap, config, port, backend="static"):
    run = launch_cli("--rankmap", rankmap, "--format", "torchrun", "--out", tmp_path / "launch", "--config", config,
                     "--master-port", port, "--no-resolve", "--run-dir", tmp_path / "run",
                     "--torchrun", f"{__import__('sys').executable} -m torch.distributed.run")
    assert run.returncode == 0, run.stderr
    lines = read_torchrun_commands((tmp_path / "launch" / "torchrun-commands.txt").read_text())
    rm = read_rankmap(rankmap)
    assert all(ln.options["master-addr"] == rm.hosts[0] and ln.options["rdzv-backend"] == "static" for ln in lines)
    texts = [" ".join(__import__("shlex").quote(w) for w in ln.argv) for ln in lines]
    if backend == "c10d":  # the same launch with the dynamic rendezvous, which ignores --node-rank
        texts = [t.replace("--rdzv-backend=static", f"--rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:{port}")
                 for t in texts]
    return rm, texts, {f"--master-addr={rm.hosts[0]}": "--master-addr=127.0.0.1"}


def test_static_lines_put_every_rank_where_the_map_says(tmp_path, engine_yaml):
    # Hosts whose string order (node66 < node7 < node8) differs from the plan's order.
    rankmap = make_rankmap(tmp_path / "plan", tp=2, pp=3, hosts=("node8", "node66", "node7"), layers=6)
    rm, lines, subst = generate(tmp_path, rankmap, engine_yaml("model: {layers: 6}\n"), free_port())
    order = shuffled(3)
    codes = run_lines([t.replace("--out", "--steps 0 --out") for t in lines], list(rm.hosts), order, 120,
                      gap_s=0.5, subst=subst)
    assert codes == [0, 0, 0]
    report = json.loads((tmp_path / "run" / "placement.json").read_text())
    assert report["launcher_order"] == "kept" and report["groups_verified"]
    for rec in report["ranks"]:
        want = rm.entry(rec["rank"])
        assert rec["launcher_rank"] == rec["rank"]  # torchrun itself numbered it as the map does
        assert (rec["host"], rec["local_rank"]) == (want["host"], want["local_rank"])
    assert [r["host"] for r in sorted(report["ranks"], key=lambda r: r["rank"])] == \
        ["node8", "node8", "node66", "node66", "node7", "node7"]


def test_the_same_launch_with_c10d_is_detected_and_stops(tmp_path, engine_yaml):
    rankmap = make_rankmap(tmp_path / "plan", pp=3, hosts=("node8", "node66", "node7"), layers=6)
    rm, lines, subst = generate(tmp_path, rankmap, engine_yaml("model: {layers: 6}\ntrain: {steps: 0}\n"),
                                free_port(), backend="c10d")
    codes = run_lines(lines, list(rm.hosts), [2, 1, 0], 120, gap_s=1.5, subst=subst)
    assert all(code != 0 for code in codes)
    error = (tmp_path / "run" / "error.txt").read_text()
    assert "the launcher's ranks differ from the rank map" in error and "c10d rendezvous ignores --node-rank" in error
    report = json.loads((tmp_path / "run" / "placement.json").read_text())
    assert report["launcher_order"] == "differs" and not report["groups_verified"]
    assert [r["host"] for r in report["ranks"]] != list(rm.hosts)  # arrival order, not the plan's


def test_rerank_trains_correctly_after_a_c10d_launch(tmp_path, engine_yaml):
    """launcher_order: rerank takes each rank from the map by (host, local rank); DDP + GPipe then
    trains exactly as one process does."""
    rankmap = make_rankmap(tmp_path / "plan", pp=2, dp=2, hosts=("b-host", "a-host"))
    config = engine_yaml("parallel: {launcher_order: rerank, data_parallel: ddp, schedule: gpipe}\n"
                         "train: {steps: 3}\n")
    rm, lines, subst = generate(tmp_path, rankmap, config, free_port(), backend="c10d")
    codes = run_lines(lines, list(rm.hosts), [1, 0], 120, gap_s=1.5, subst=subst)
    assert codes == [0, 0]
    report = json.loads((tmp_path / "run" / "placement.json").read_text())
    assert report["launcher_order"] == "differs" and report["groups_verified"]
    assert all((r["host"], r["local_rank"]) == (rm.entry(r["rank"])["host"], rm.entry(r["rank"])["local_rank"])
               for r in report["ranks"])
    cfg = load_config(config)
    want = reference_losses(cfg, resolve_run(cfg, rm.job), 3)
    assert np.allclose([r["loss"] for r in read_log(tmp_path / "run")], want, atol=2e-5, rtol=0)
