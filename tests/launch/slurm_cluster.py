"""A real Slurm cluster of four nodes (n1..n4) on this machine, for tests.

munged, slurmctld and four slurmd daemons (``slurmd -N n1`` ...: Debian builds Slurm with
multiple-slurmd support) run from a temporary folder with unused ports; every path they write
is inside it, munge included (its own key and socket, ``AuthInfo=socket=``). n1..n4 are mapped
in /etc/hosts to this machine's non-loopback address (torchrun refuses a loopback master of a
multi-host job), and every daemon is stopped by its pid afterwards.

The /etc/hosts line is shared by every run on this machine (several test sessions may run at
once): it is added only when absent, and removed, once the last run using it ends, only if a
run added it (a line that was there before is left). The runs using it are counted by pid in
``USERS``, under an exclusive ``flock`` (``fcntl.flock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

NODES = ("n1", "n2", "n3", "n4")
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "scontrol")
HOSTS_FILE = Path("/etc/hosts")
MARK = "# rankmap-test-slurm"
#: {"pids": [runs using the line], "added": whether a run added it}; its ".lock" serialises the edits
USERS = Path("/tmp/rankmap-test-slurm-hosts.json")


def missing() -> str | None:
    """Why a local Slurm cannot run here, or None."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    absent = [d for d in DAEMONS if shutil.which(d, path=path) is None]
    if absent:
        return (f"Slurm/munge binaries missing: {', '.join(absent)} (apt-get install slurmd slurmctld slurm-client "
                f"munge)")
    if os.geteuid() != 0:
        return "a local Slurm needs root (slurmd runs as root and /etc/hosts maps n1..n4)"
    if not _own_address():
        return "no non-loopback address to map n1..n4 to"
    return None


@dataclass
class Slurm:
    """A running local cluster: its folder, config and the environment for sbatch/srun."""

    folder: Path
    conf: Path
    env: dict
    address: str

    def run(self, *argv, timeout=60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, **kw)

    def sbatch_wait(self, script: Path, cwd: Path, timeout: float = 240, env: dict | None = None) -> tuple[int, str]:
        """Submit ``script`` with ``sbatch --wait`` from ``cwd``; (exit code, job output)."""
        out = cwd / "slurm-%j.out"
        run = subprocess.run(["sbatch", "--wait", f"--output={out}", str(script)], cwd=cwd,
                             env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout)
        job_id = run.stdout.strip().split()[-1] if run.stdout.strip() else "?"
        log = cwd / f"slurm-{job_id}.out"
        text = log.read_text() if log.is_file() else run.stdout + run.stderr
        return run.returncode, text


def _own_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _config(folder: Path, ports: list[int]) -> str:
    host = socket.gethostname().split(".")[0]
    nodes = "".join(f"NodeName={n} NodeHostname={host} Port={p} CPUs={os.cpu_count()} State=UNKNOWN\n"
                    for n, p in zip(NODES, ports[2:]))
    return (f"ClusterName=t\nSlurmctldHost={host}\nSlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\n"
            f"AuthInfo=socket={folder}/munge/munge.sock\nCredType=cred/munge\n"
            f"StateSaveLocation={folder}/state\nSlurmdSpoolDir={folder}/spool/%n\nSlurmctldPidFile={folder}/ctld.pid\n"
            f"SlurmdPidFile={folder}/d-%n.pid\nSlurmctldLogFile={folder}/log/ctld.log\n"
            f"SlurmdLogFile={folder}/log/d-%n.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            f"JobAcctGatherType=jobacct_gather/none\nSelectType=select/cons_tres\nSchedulerType=sched/builtin\n"
            f"ReturnToService=2\nMpiDefault=none\nSlurmctldPort={ports[0]}\nSlurmdPort={ports[1]}\n{nodes}"
            f"PartitionName=p Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n")


@contextlib.contextmanager
def _users():
    """The shared record of runs using the /etc/hosts line (living pids only), locked while open;
    written back on leaving."""
    with open(USERS.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            doc = json.loads(USERS.read_text())
        except (OSError, ValueError):
            doc = {"pids": [], "added": False}
        doc["pids"] = [p for p in doc.get("pids", []) if Path(f"/proc/{p}").exists()]
        yield doc
        USERS.write_text(json.dumps(doc))


def _hosts_line(address: str) -> str:
    return f"{address} {' '.join(NODES)}  {MARK}"


def _map_hosts(address: str) -> None:
    """Map n1..n4 to ``address`` in /etc/hosts unless that line is there already; count this run."""
    with _users() as doc:
        text = HOSTS_FILE.read_text()
        if _hosts_line(address) not in text.splitlines():
            HOSTS_FILE.write_text(text + ("\n" if text and not text.endswith("\n") else "") + _hosts_line(address) + "\n")
            doc["added"] = True
        doc["pids"].append(os.getpid())


def _unmap_hosts(address: str) -> None:
    """This run is done with the line: the last run removes it, and only if a run added it."""
    with _users() as doc:
        if os.getpid() in doc["pids"]:
            doc["pids"].remove(os.getpid())
        if doc["pids"] or not doc["added"]:
            return
        lines = HOSTS_FILE.read_text().splitlines(keepends=True)
        mine = [i for i, line in enumerate(lines) if line.rstrip("\n") == _hosts_line(address)]
        if mine:
            HOSTS_FILE.write_text("".join(lines[:mine[0]] + lines[mine[0] + 1:]))
        doc["added"] = False


def _start(folder: Path, env: dict) -> None:
    munge = folder / "munge"
    munge.mkdir(mode=0o700)
    subprocess.run(["mungekey", "--create", f"--keyfile={munge}/munge.key"], check=True, capture_output=True)
    subprocess.run(["munged", "--force", f"--socket={munge}/munge.sock", f"--key-file={munge}/munge.key",
                    f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
                    f"--seed-file={munge}/munged.seed"], check=True, capture_output=True, env=env)
    for sub in ("state", "log", *(f"spool/{n}" for n in NODES)):
        (folder / sub).mkdir(parents=True)
    conf = str(folder / "slurm.conf")
    subprocess.run(["slurmctld", "-c", "-f", conf], check=True, capture_output=True, env=env)
    for n in NODES:
        subprocess.run(["slurmd", "-f", conf, "-N", n], check=True, capture_output=True, env=env)


def _wait_idle(env: dict, folder: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    out = ""
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True, text=True).stdout
        if sorted(line.split()[1] for line in out.splitlines() if line.strip()) == ["idle"] * 4:
            return
        time.sleep(0.5)
    logs = "\n".join(p.read_text()[-1500:] for p in sorted((folder / "log").glob("*.log")))
    raise RuntimeError(f"Slurm nodes not idle after {timeout_s} s: {out!r}\n{logs}")


def _stop(folder: Path, env: dict) -> None:
    subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True)
    pid_files = [folder / f"d-{n}.pid" for n in NODES] + [folder / "ctld.pid", folder / "munge" / "munged.pid"]
    pids = []
    for path in pid_files:
        with contextlib.suppress(OSError, ValueError):
            pid = int(path.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
    deadline = time.monotonic() + 15
    for pid in pids:
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def local_slurm(folder: Path):
    """Start the cluster in ``folder``; yield a :class:`Slurm`; stop it and release the /etc/hosts line."""
    folder = Path(folder)
    ports = _free_ports(2 + len(NODES))
    (folder / "slurm.conf").write_text(_config(folder, ports))
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"),
           "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}
    address = _own_address()
    _map_hosts(address)
    try:
        _start(folder, env)
        _wait_idle(env, folder)
        yield Slurm(folder=folder, conf=folder / "slurm.conf", env=env, address=address)
    finally:
        _stop(folder, env)
        _unmap_hosts(address)
