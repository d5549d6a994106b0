"""The plan's picture: crossings it draws are counted right, the PNG is written, sized and not blank."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np

from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec, ModelShape
from rankmap.placement.picture import group_crossings


def rankmap(*args):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def _png(path) -> np.ndarray:
    import matplotlib.image
    return matplotlib.image.imread(io.BytesIO(path.read_bytes()), format="png")


def test_crossings_count_ring_edges_and_pipeline_hops_between_groups():
    # tp=1, dp=2, pp=2 on four 1-GPU hosts: ranks 0,1 are stage 0 (dp 0,1), ranks 2,3 stage 1.
    job = JobSpec(name="j", tp=1, pp=2, dp=2, model=ModelShape(layers=2, hidden=8, heads=2, seq_len=8))
    rm = RankMap(job=job, cluster_name="c", cluster_hash="0" * 64, hosts=("a", "b", "c", "d"),
                 tor_groups=("t1", "t2", "t1", "t2"), rails=((0,),) * 4, nproc_per_node=1)
    # DP rings {0,1} and {2,3}: each a ring of two, one edge, and both cross (t1-t2).
    assert dict(group_crossings(rm, "dp")) == {("t1", "t2"): 2}
    # Pipelines 0->2 (t1->t1) and 1->3 (t2->t2): no hop leaves its group.
    assert dict(group_crossings(rm, "pp")) == {}


def test_plan_writes_a_picture_and_show_redraws_it(tmp_path):
    run = rankmap("plan", "--example", "racks", "--out", tmp_path / "p")
    assert run.returncode == 0, run.stderr
    image = _png(tmp_path / "p" / "plan.png")
    h, w = image.shape[:2]
    assert 600 <= w <= 2500 and 400 <= h <= 6000
    rgb = image[..., :3]
    ink = np.mean(np.any(rgb < 0.9, axis=-1))  # share of pixels that are not (near) white
    assert 0.02 < ink < 0.9 and float(rgb.std()) > 0.05
    show = rankmap("show", tmp_path / "p" / "rankmap.json", "--out", tmp_path / "show.png")
    assert show.returncode == 0, show.stderr
    assert _png(tmp_path / "show.png").shape[1] >= 600
    # Byte-identical for identical inputs.
    again = rankmap("show", tmp_path / "p" / "rankmap.json", "--out", tmp_path / "show2.png")
    assert again.returncode == 0 and (tmp_path / "show.png").read_bytes() == (tmp_path / "show2.png").read_bytes()


def test_show_needs_the_cluster_when_it_is_not_an_example(tmp_path):
    assert rankmap("plan", "--example", "racks", "--no-picture", "--out", tmp_path / "p").returncode == 0
    doc = json.loads((tmp_path / "p" / "rankmap.json").read_text())
    doc["cluster"]["name"] = "elsewhere"
    (tmp_path / "p" / "rankmap.json").write_text(json.dumps(doc))
    run = rankmap("show", tmp_path / "p" / "rankmap.json")
    assert run.returncode == 3 and "give --cluster" in run.stderr and not (tmp_path / "p" / "plan.png").exists()
