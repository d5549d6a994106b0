"""The engine's gloo groups have one worker thread each (rankmap.engine.gloo: torch 2.13's
ProcessGroupGloo::runLoop writes the group status from both of its default worker threads unguarded,
which corrupts the heap when one is preempted there; benchmarks/gloo_worker_race.py shows it).

Real gloo, one process, in a subprocess so that the patched constructor stays out of this one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ENV, REPO

pytest.importorskip("torch", reason="the engine needs PyTorch (pip install torch==2.13.0)")

PROBE = """
import os, sys, tempfile, torch, torch.distributed as dist
from rankmap.engine.gloo import use_one_worker_thread, worker_threads
store = lambda: f"file://{tempfile.mktemp(dir=sys.argv[1])}"
dist.init_process_group("gloo", init_method=store(), rank=0, world_size=1)
plain = worker_threads()
dist.destroy_process_group()
use_one_worker_thread()
dist.init_process_group("gloo", init_method=store(), rank=0, world_size=1)
group = dist.new_group([0])
t = torch.arange(4.0)
dist.all_reduce(t, group=group)
print(plain, worker_threads(), worker_threads(group), dist.get_backend(group), t.tolist())
dist.destroy_process_group()
"""


def test_every_gloo_group_of_the_engine_has_one_worker_thread(tmp_path):
    run = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True,
                         env={**ENV, "GLOO_SOCKET_IFNAME": "lo"}, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    # torch's default is 2 threads per group; after the switch the default group and a new group
    # (as init_device_mesh makes them) have 1, are still gloo, and reduce correctly
    assert run.stdout.split(maxsplit=4) == ["2", "1", "1", "gloo", "[0.0, 1.0, 2.0, 3.0]\n"]
