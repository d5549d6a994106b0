"""Reproduce torch 2.13's gloo worker-thread race on demand, and show the engine's workaround.

    python benchmarks/gloo_worker_race.py          # needs gdb; about 20 s per case on 2 busy cores

Two ranks (gloo, 127.0.0.1) run tensor-parallel-style all-gathers through functional
collectives, one after another. Rank 0 runs under gdb: after 50 all-gathers it stops one gloo
worker thread in ``ProcessGroupGloo::runLoop`` between reading ``pgStatus_->lastCompletedWorkName``'s
buffer and storing its own (the unguarded assignment, see :mod:`rankmap.engine.gloo`) and keeps
it off the CPU for 0.3 s with ``usleep`` while the other threads run -- what the scheduler does
to a preempted thread on an overloaded machine -- and does so again at the next completions, 5
times in all (one hold corrupts the heap, but glibc does not always notice at once). Cases:

- ``torch gloo``: torch's default, two worker threads per group -> the process crashes: heap
  corruption, mostly found by glibc (SIGABRT, faulthandler's "Fatal Python error: Aborted"),
  sometimes a SIGSEGV;
- ``torch gloo, no flight recorder``: the same with ``TORCH_FR_BUFFER_SIZE=0`` -> crashes too;
- ``engine gloo``: :func:`rankmap.engine.gloo.use_one_worker_thread` -> all 400 all-gathers finish.

Prints one line per case: what rank 0 did and glibc's message, if any. The instruction offset
(``runLoop+529``) is that of the torch 2.13.0+cpu wheel; other builds print "not reached".
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

OFFSET = 529  # runLoop's store of the new buffer pointer, torch 2.13.0+cpu (x86-64 wheel)
ROUNDS = 5     # holds per run: a double free is not always caught at once (the buffer may be reused)
GDB = """set pagination off
set confirm off
handle SIGUSR2 stop print nopass
handle SIGPIPE SIGUSR1 nostop noprint pass
run
python
gdb.execute("break *%d" % (int(gdb.parse_and_eval("(long)&'c10d::ProcessGroupGloo::runLoop(int)'")) + {offset}))
end
continue
echo RACE-WINDOW-REACHED\\n
""" + """disable 1
call (int)usleep(300000)
enable 1
continue
""" * ROUNDS + """delete
continue
"""


def worker(engine_gloo: bool) -> None:
    """One rank: 400 all-gathers; rank 0 stops itself (SIGUSR2) after 50 so gdb can arm."""
    import signal

    import torch
    import torch.distributed as dist
    from torch.distributed import _functional_collectives as funcol

    if engine_gloo:
        from rankmap.engine.gloo import use_one_worker_thread
        use_one_worker_thread()
    dist.init_process_group("gloo")
    t = torch.ones(8)
    for i in range(400):
        if i == 50 and dist.get_rank() == 0:
            os.kill(os.getpid(), signal.SIGUSR2)
        funcol.all_gather_single(t, 0, dist.group.WORLD).wait()
    print(f"rank {dist.get_rank()}: 400 all-gathers done", flush=True)
    dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(engine_gloo: bool, flight_recorder: bool, folder: Path) -> str:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_port()), "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "PYTHONFAULTHANDLER": "1",
           "TORCH_FR_BUFFER_SIZE": "2000" if flight_recorder else "0"}
    argv = [sys.executable, __file__, "--worker", "engine" if engine_gloo else "torch"]
    script = folder / "race.gdb"
    script.write_text(GDB.format(offset=OFFSET))
    peer = subprocess.Popen(argv, env={**env, "RANK": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        done = subprocess.run(["gdb", "-q", "-batch", "-x", str(script), "--args", *argv], env={**env, "RANK": "0"},
                              capture_output=True, text=True, timeout=240)
        out = done.stdout + done.stderr
    finally:
        peer.kill()
        peer.wait()
    glibc = re.search(r"^(double free[^\n]*|free\(\)[^\n]*|malloc\(\)[^\n]*|corrupted[^\n]*)$", out, re.M)
    if "RACE-WINDOW-REACHED" not in out:
        return "not reached (another torch build?)"
    fatal = re.search(r"Fatal Python error: (\w[\w ]*)", out) or re.search(r"received signal (SIG(?:ABRT|SEGV|BUS))", out)
    if fatal:
        return f"CRASHED: {fatal.group(1)}" + (f" ({glibc.group(1)})" if glibc else "")
    return "finished" if "400 all-gathers done" in out else "neither finished nor aborted:\n" + out[-2000:]


def main() -> int:
    if shutil.which("gdb") is None:
        print("needs gdb (apt-get install gdb)")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for name, engine_gloo, fr in (("torch gloo", False, True), ("torch gloo, no flight recorder", False, False),
                                      ("engine gloo (one worker thread)", True, True)):
            print(f"{name:34s} {run_case(engine_gloo, fr, Path(tmp))}", flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2] == "engine")
    else:
        sys.exit(main())
