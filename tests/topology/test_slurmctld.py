"""Exported topology.conf files read by a real slurmctld (Debian's slurmctld, Slurm 22.05).

A slurmctld is started in the foreground on a free loopback port, with fake nodes at
127.0.0.1 and no slurmd; ``scontrol show topology`` then prints the tree slurmctld parsed,
which must list the same switches, levels and hosts as the model. ``scontrol show
hostnames`` checks our hostlists against Slurm's own parser. Authentication is
``auth/none``: the daemon listens on loopback only and lives for a few seconds. Every
call has a timeout and the daemon is stopped (then killed) in a ``finally``.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import hostlist
import pytest

from rankmap.topology import load_cluster
from rankmap.topology.identity import stamp
from rankmap.topology.model import Cluster
from rankmap.topology.slurm import export_slurm_tree, parse_slurm_tree
from rankmap.topology.slurmconf import compress_names
from rankmap.topology.sources import ImportOptions
from rankmap.topology.tree import hosts_under, switch_levels

pytestmark = pytest.mark.skipif(
    shutil.which("slurmctld") is None or shutil.which("scontrol") is None,
    reason="slurmctld/scontrol not installed (apt-get install slurmctld slurm-client)")

CASES = Path(__file__).resolve().parents[1] / "data" / "field-cases"
START_TIMEOUT_S = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(folder: Path, cluster: Cluster) -> Path:
    state = folder / "state"
    state.mkdir()
    user = getpass.getuser()
    conf = folder / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=rankmaptest",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "AuthType=auth/none",
        "CredType=cred/none",
        f"SlurmUser={user}",
        f"StateSaveLocation={state}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        "MpiDefault=none",
        "TopologyPlugin=topology/tree",
        "SelectType=select/cons_tres",
        f"NodeName={compress_names(h.name for h in cluster.hosts)} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
        "PartitionName=all Nodes=ALL Default=YES",
    ]) + "\n")
    return conf


def _scontrol(conf: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SLURM_CONF=str(conf))
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=10, env=env)


@contextmanager
def slurmctld(folder: Path, cluster: Cluster, topology_conf: str):
    """A running slurmctld reading ``topology_conf`` (written beside slurm.conf)."""
    conf = _slurm_conf(folder, cluster)
    (folder / "topology.conf").write_text(topology_conf)
    log = open(folder / "stderr.log", "w")
    proc = subprocess.Popen(["slurmctld", "-D", "-f", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env=dict(os.environ, SLURM_CONF=str(conf)))
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"slurmctld exited with {proc.returncode}:\n{_logs(folder)}")
            if _scontrol(conf, "ping").returncode == 0:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"slurmctld did not answer within {START_TIMEOUT_S} s:\n{_logs(folder)}")
            time.sleep(0.2)
        yield conf
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _logs(folder: Path) -> str:
    return "\n".join(p.read_text()[-3000:] for p in (folder / "stderr.log", folder / "slurmctld.log") if p.exists())


def _topology(conf: Path) -> dict[str, dict[str, str]]:
    """``scontrol show topology`` as {switch: {key: value}}."""
    proc = _scontrol(conf, "show", "topology")
    assert proc.returncode == 0, proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        fields = dict(word.split("=", 1) for word in line.split())
        out[fields["SwitchName"]] = fields
    return out


def _assert_same_tree(seen: dict[str, dict[str, str]], cluster: Cluster) -> None:
    levels = switch_levels(cluster)
    assert set(seen) == set(levels)
    speeds = {g.name: g.link_speed for g in cluster.tor_groups} | {s.name: s.link_speed for s in cluster.switches}
    children = {s.name: s.children for s in cluster.switches}
    for name, fields in seen.items():
        assert int(fields["Level"]) == levels[name], name
        assert set(hostlist.expand_hostlist(fields.get("Nodes", ""))) == set(hosts_under(cluster, name)), name
        assert set(hostlist.expand_hostlist(fields.get("Switches", ""))) == set(children.get(name, ())), name
        assert int(fields["LinkSpeed"]) == (speeds[name] if speeds[name] is not None else 1), name


@pytest.mark.parametrize("case", ["slurm-tree-forward-refs.conf", "slurm-islands.conf"])
def test_slurmctld_reads_exported_field_cases(case, tmp_path):
    cluster = parse_slurm_tree((CASES / case).read_text(), case, ImportOptions()).cluster
    # As `rankmap topo export` writes it: with the cluster spec in `# rankmap-cluster-spec:` comments.
    with slurmctld(tmp_path, cluster, stamp("slurm", cluster, export_slurm_tree(cluster))) as conf:
        seen = _topology(conf)
    _assert_same_tree(seen, cluster)
    below = {c for f in seen.values() for c in hostlist.expand_hostlist(f.get("Switches", ""))}
    tops = sorted(set(seen) - below)
    if case == "slurm-islands.conf":  # no invented root: two top switches, and slurmctld says so
        assert tops == ["fabA-spine", "fabB-leaf1"]
        assert "no switch can reach all nodes" in _logs(tmp_path)
    else:
        assert tops == ["core1"]


def test_slurmctld_reads_a_12k_gpu_export_with_address_hostnames(tmp_path):
    # Hostnames from addresses compress with text after a bracket in python-hostlist
    # (ip-10-[20,25]-6-18), which slurmctld refuses; the export must avoid it.
    spec = load_cluster("examples/megascale-12k/cluster.yaml")
    text = export_slurm_tree(spec)
    cluster = parse_slurm_tree(text, "topology.conf", ImportOptions(name=spec.name)).cluster
    with slurmctld(tmp_path, cluster, text) as conf:
        seen = _topology(conf)
    _assert_same_tree(seen, cluster)
    assert len(seen) == 25 and sum(len(hosts_under(cluster, g.name)) for g in cluster.tor_groups) == 1536


def test_slurm_expands_our_hostlists_like_python_hostlist(tmp_path):
    cluster = parse_slurm_tree("SwitchName=s Nodes=n1", "t.conf", ImportOptions()).cluster
    conf = _slurm_conf(tmp_path, cluster)  # scontrol show hostnames needs a config, not a daemon
    rows = [line.split("\t") for line in (CASES / "hostlists.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    for expr, count, hosts in rows:
        if expr.startswith("COLLECT "):
            names = expr.split(" ", 1)[1].split(",")
            expr = compress_names(names)
        else:
            names = hosts.split(",")
        proc = _scontrol(conf, "show", "hostnames", expr)
        assert proc.returncode == 0, (expr, proc.stderr)
        assert sorted(proc.stdout.split()) == sorted(names) and len(names) == int(count), expr
