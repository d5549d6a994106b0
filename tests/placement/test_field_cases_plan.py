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
