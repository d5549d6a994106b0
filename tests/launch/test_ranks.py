"""Which rank a process is: launcher variables, host identity, the claim check (no torch)."""

from __future__ import annotations

import socket

import pytest

from rankmap.errors import PlacementMismatch
from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec
from rankmap.launch.ranks import Claim, LaunchEnv, check_claims, find_host, launcher_message

# The field case: the plan orders hosts 10.0.0.30, 10.0.0.12, 10.0.0.20 (pp=3 across hosts).
FIELD = RankMap(job=JobSpec(tp=2, pp=3, dp=1, num_micro_batches=3), cluster_name="c", cluster_hash="x",
                hosts=("10.0.0.30", "10.0.0.12", "10.0.0.20"), tor_groups=("t",) * 3, rails=((0, 1),) * 3,
                nproc_per_node=2)


def claim(rank, host, local):
    return Claim(launcher_rank=rank, local_rank=local, host=host, machine=str(host), pid=100 + rank)


def test_launcher_variables_of_torchrun_mpirun_and_srun():
    assert LaunchEnv.from_environ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}).launcher == "torchrun"
    ompi = LaunchEnv.from_environ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                                   "OMPI_COMM_WORLD_SIZE": "6"})
    assert (ompi.rank, ompi.local_rank, ompi.world_size, ompi.launcher) == (5, 1, 6, "mpirun")
    srun = LaunchEnv.from_environ({"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NTASKS": "3", "SLURM_NODEID": "2"})
    assert (srun.rank, srun.node_rank, srun.launcher) == (2, 2, "srun")
    with pytest.raises(PlacementMismatch, match="no launcher variables"):
        LaunchEnv.from_environ({})
    with pytest.raises(PlacementMismatch, match="whole numbers"):
        LaunchEnv.from_environ({"RANK": "x", "LOCAL_RANK": "0", "WORLD_SIZE": "1"})


def test_host_identity_from_rankmap_host_or_the_machine():
    assert find_host(FIELD.hosts, {"RANKMAP_HOST": "10.0.0.12"}) == "10.0.0.12"
    assert find_host(FIELD.hosts, {"RANKMAP_HOST": "10.9.9.9"}) is None
    # This machine's own name matches; loopback addresses identify no machine.
    me = socket.gethostname()
    assert find_host(("other", me), {}) == me
    assert find_host(("127.0.0.1", "other"), {}) is None


def test_claims_in_launch_order_map_to_map_ranks():
    # Launcher ranks follow arrival (10.0.0.12 first); the map's ranks follow the plan's order.
    claims = [claim(0, "10.0.0.12", 0), claim(1, "10.0.0.12", 1), claim(2, "10.0.0.20", 0),
              claim(3, "10.0.0.20", 1), claim(4, "10.0.0.30", 0), claim(5, "10.0.0.30", 1)]
    ranks = check_claims(FIELD, claims)
    assert ranks == [2, 3, 4, 5, 0, 1]
    message = launcher_message(FIELD, claims, ranks)
    assert message.startswith("the launcher's ranks differ from the rank map for 6 of 6 processes: launcher rank 0 "
                              "runs on host 10.0.0.12 local rank 0, which the map makes rank 2")
    assert "c10d rendezvous ignores --node-rank" in message
    kept = [claim(r, FIELD.hosts[r // 2], r % 2) for r in range(6)]
    assert check_claims(FIELD, kept) == list(range(6)) and launcher_message(FIELD, kept, list(range(6))) is None


@pytest.mark.parametrize("claims, message", [
    ([claim(r, "10.0.0.30" if r < 2 else "10.0.0.12", r % 2) for r in range(4)], "started 4 processes; the rank map has 6"),
    ([claim(0, None, 0)] + [claim(r, FIELD.hosts[r // 2], r % 2) for r in range(1, 6)],
     "launcher rank 0 (machine None, local rank 0) runs on no host of the rank map"),
    ([claim(r, FIELD.hosts[r // 2], r % 2 + (r == 5) * 2) for r in range(6)],
     "host 10.0.0.20 runs 2 ranks in the map, local ranks 0..1"),
    ([claim(r, FIELD.hosts[min(r // 2, 1)], r % 2) for r in range(6)],
     "launcher rank 4 (machine 10.0.0.12, local rank 0) and launcher rank 2 both claim host 10.0.0.12 local rank 0"),
])
def test_claims_that_do_not_fit_the_map_stop_every_rank(claims, message):
    with pytest.raises(PlacementMismatch) as err:
        check_claims(FIELD, claims)
    assert message in str(err.value)


# -- field case turn2/fqdn-same-first-label ---------------------------------------------------------

def test_field_case_exact_name_wins_over_the_short_name():
    # README: hosts differing only after the first dot; on each machine the check finds its own exact name.
    from pathlib import Path

    from rankmap.topology.hostfile import parse_hostfile

    path = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2" / "fqdn-same-first-label" / "hostfile"
    hosts = tuple(h.name for h in parse_hostfile(path.read_text(), str(path)).cluster.hosts)
    assert hosts == ("mpi-worker.1.fabric.test", "mpi-worker.2.fabric.test")
    for own in hosts:  # the machine's hostname, its FQDN, and the short form both share
        assert find_host(hosts, {}, {own, "mpi-worker"}) == own
        assert find_host(hosts, {}, {own.upper()}) == own  # names compare case-insensitively
    # Only the shared short name: both match equally, and the check says so instead of guessing.
    with pytest.raises(PlacementMismatch, match="matches hosts mpi-worker.1.fabric.test, mpi-worker.2.fabric.test "
                                                "of the rank map equally well"):
        find_host(hosts, {}, {"mpi-worker"})


def test_short_name_matches_only_without_an_exact_one():
    assert find_host(("gpu7", "gpu8"), {}, {"gpu7.cluster.local"}) == "gpu7"          # map has short names
    assert find_host(("gpu7.cluster.local", "gpu8.cluster.local"), {}, {"gpu7"}) == "gpu7.cluster.local"
    assert find_host(("gpu7.a", "gpu7"), {}, {"gpu7"}) == "gpu7"
    # On this machine, for real: its own hostname wins over a map host sharing its first label.
    me = socket.gethostname()
    assert find_host((f"{me.split('.')[0]}.1.fabric.test", me), {}) == me
