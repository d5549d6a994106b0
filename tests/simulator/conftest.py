"""Fixtures for the simulator tests: synthetic uniform clusters built from spec text."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.network import Network
from rankmap.topology.spec import parse_cluster


def cluster_text(groups: int, hosts: int, *, gpus: int = 1, nics: int = 1, uplinks: int = 32, uplink_gbps: int = 400,
                 nic_gbps: int = 200, spines: int | None = None, nvlink_gbps: int = 2400) -> str:
    """Spec text of ``groups`` ToR groups of ``hosts`` identical hosts (names gNNnMMM)."""
    lines = ["name: synth", f"hosts: {{gpus: {gpus}, nics: {nics}}}",
             f"links: {{nic_gbps: {nic_gbps}, tor_downlink_gbps: {nic_gbps}, tor_uplinks: {uplinks}, "
             f"tor_uplink_gbps: {uplink_gbps}, nvlink_gbps: {nvlink_gbps}}}",
             f"spine: {{switches: {spines or uplinks}}}", "tor_groups:"]
    for g in range(groups):
        lines.append(f"  - {{name: g{g:02d}, capacity: {max(hosts, 1)}, hosts: 'g{g:02d}n[001-{hosts:03d}]'}}")
    return "\n".join(lines) + "\n"


def make_network(groups: int, hosts: int, **kw) -> Network:
    return Network(parse_cluster(cluster_text(groups, hosts, **kw)))


def place(network: Network, n_hosts: int | None = None, gpus_per_host: int = 1) -> RankPlacement:
    """Ranks on the first ``n_hosts`` hosts in cluster order."""
    hosts = [h.name for h in network.cluster.hosts[:n_hosts]]
    return RankPlacement.on_hosts(network, hosts, gpus_per_host)


@pytest.fixture(scope="session")
def synth():
    """Helpers: ``synth.network(groups, hosts, **links)``, ``synth.place(network, n_hosts, gpus_per_host)``,
    ``synth.text(...)`` (the cluster spec)."""
    return SimpleNamespace(network=make_network, place=place, text=cluster_text)


@pytest.fixture(scope="session")
def racks_plan():
    """The planned racks example (480 ranks) with its cluster: (cluster, PlanResult)."""
    from rankmap.examples import example_path
    from rankmap.job.spec_file import load_job
    from rankmap.placement.plan import plan
    from rankmap.topology.spec import load_cluster

    cluster = load_cluster(example_path("racks", "cluster.yaml"))
    return cluster, plan(cluster, load_job(example_path("racks", "job.yaml")))
