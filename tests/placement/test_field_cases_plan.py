"""The planner's side of the field cases (../shared/field-cases, copied under tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankmap.errors import InfeasibleError
from rankmap.job.rank_map import hostfile_text, read_rankmap, write_plan_files
from rankmap.job.spec import MODEL_PRESETS, JobSpec
from rankmap.placement.plan import plan
from rankmap.topology.importers import import_file

DATA = Path(__file__).resolve().parents[1] / "data" / "field-cases"


def load(name: str, fmt: str):
    return import_file(fmt, DATA / name).cluster


def small_job(**kw):
    return JobSpec(**{"model": MODEL_PRESETS["gpt3-1.3b"], "num_micro_batches": 1, "source": "job.yaml", **kw})


def test_heterogeneous_hostfile_tp8_cannot_be_placed():
    cluster = load("hostfile-heterogeneous-slots.txt", "hostfile")
    with pytest.raises(InfeasibleError) as err:
        plan(cluster, small_job(tp=8, pp=1, dp=2))
    text = str(err.value)
    assert "a TP group must sit inside one host" in text
    for host, slots in (("worker-a", 8), ("worker-c", 4), ("worker-b", 2), ("worker-d", 1)):
        assert f"{host} ({slots})" in text


def test_heterogeneous_hostfile_tp2_dp7_fits_without_straddling(tmp_path):
    cluster = load("hostfile-heterogeneous-slots.txt", "hostfile")
    result = plan(cluster, small_job(tp=2, pp=1, dp=7))
    rm = result.rankmap
    assert rm.world_size == 14 and sorted(rm.nprocs) == [2, 4, 8]
    for group in rm.layout.groups("tp"):
        assert len({rm.entry(int(r))["host"] for r in group}) == 1   # TP pairs never straddle hosts
    write_plan_files(rm, tmp_path)
    assert read_rankmap(tmp_path / "rankmap.json") == rm
    assert hostfile_text(rm) == "worker-a slots=8\nworker-c slots=4\nworker-b slots=2\n"


def test_islands_job_never_spans_them():
    cluster = load("slurm-islands.conf", "slurm")
    with pytest.raises(InfeasibleError) as err:
        plan(cluster, small_job(tp=8, pp=1, dp=10))
    assert "no island has them" in str(err.value)
    assert "(8 usable hosts" in str(err.value) and "(4 usable hosts" in str(err.value)
    result = plan(cluster, small_job(tp=8, pp=1, dp=8))
    island_a = set(cluster.islands()[0])
    assert set(result.rankmap.tor_groups) <= island_a and len(result.rankmap.hosts) == 8


def test_hetero_gpus_rank_mod_puts_the_8_gpu_host_first():
    """Field case hetero-gpus-rank-mod: three 4-GPU hosts and one 8-GPU host, tp=4 dp=5.
    Every order costs the same (the ring leaves each ToR group once either way); the plan
    takes the one where each host's first rank is a multiple of its GPU count, so that
    ``rank % gpus_per_node`` is the local rank."""
    from rankmap.job.spec_file import load_job
    from rankmap.topology.spec import load_cluster

    case = Path(__file__).resolve().parent / "data" / "hetero-gpus-rank-mod"
    result = plan(load_cluster(case / "cluster.yaml"), load_job(case / "job.yaml"))
    rm = result.rankmap
    assert rm.hosts == ("gpu-b1", "gpu-a1", "gpu-a2", "gpu-a3") and rm.nprocs == (8, 4, 4, 4)
    starts = [rm.offsets[i] for i in range(len(rm.hosts))]
    assert starts == [0, 8, 12, 16]
    assert all(s % g == 0 for s, g in zip(starts, (8, 4, 4, 4)))
    assert result.ours.metrics.cost == min(b.metrics.cost for b in result.baselines)
    assert not any("multiple of its GPU count" in n for n in result.notes)


def test_hetero_gpus_rank_mod_says_when_no_order_aligns():
    """A 6-GPU and a 4-GPU host (tp=2, dp=5): 6 % 4 and 4 % 6 are not 0, so no order starts
    both hosts at a multiple of their GPU count; the plan says which host is off."""
    from rankmap.topology import parse_cluster

    cluster = parse_cluster("hosts: {gpus: 8, nics: 8}\ntor_groups:\n"
                            "  - {name: t0, hosts: [{hosts: h6, gpus: 6, nics: 6}, {hosts: h4, gpus: 4, nics: 4}]}\n",
                            "tiny.yaml")
    result = plan(cluster, small_job(tp=2, pp=1, dp=5))
    assert result.rankmap.world_size == 10
    notes = [n for n in result.notes if "multiple of its GPU count" in n]
    assert len(notes) == 1
    second = result.rankmap.hosts[1]
    first_gpus = 6 if result.rankmap.hosts[0] == "h6" else 4
    assert f"{second} starts at rank {first_gpus}" in notes[0] and "LOCAL_RANK" in notes[0]
