"""The real-Slurm harness's /etc/hosts line (slurm_cluster.py), on a stand-in hosts file: runs that
overlap share one line, the last one out removes it, and a line that was there before stays."""

from __future__ import annotations

import slurm_cluster

LINE = "192.0.2.9 n1 n2 n3 n4  # rankmap-test-slurm\n"


def test_overlapping_runs_share_one_line_and_the_last_removes_only_what_was_added(tmp_path, monkeypatch):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    monkeypatch.setattr(slurm_cluster, "HOSTS_FILE", hosts)
    monkeypatch.setattr(slurm_cluster, "USERS", tmp_path / "users.json")
    slurm_cluster._map_hosts("192.0.2.9")
    slurm_cluster._map_hosts("192.0.2.9")     # a second run while the first one is on
    assert hosts.read_text() == "127.0.0.1 localhost\n" + LINE
    slurm_cluster._unmap_hosts("192.0.2.9")
    assert hosts.read_text() == "127.0.0.1 localhost\n" + LINE   # the other run still needs it
    hosts.write_text(hosts.read_text() + "10.0.0.1 other\n")     # edited meanwhile: kept
    slurm_cluster._unmap_hosts("192.0.2.9")
    assert hosts.read_text() == "127.0.0.1 localhost\n10.0.0.1 other\n"


def test_a_line_that_was_there_before_is_left(tmp_path, monkeypatch):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + LINE)
    monkeypatch.setattr(slurm_cluster, "HOSTS_FILE", hosts)
    monkeypatch.setattr(slurm_cluster, "USERS", tmp_path / "users.json")
    slurm_cluster._map_hosts("192.0.2.9")
    slurm_cluster._unmap_hosts("192.0.2.9")
    assert hosts.read_text() == "127.0.0.1 localhost\n" + LINE
