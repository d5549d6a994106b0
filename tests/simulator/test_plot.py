"""The simulation figure: every panel drawn, every seed shown, spraying labelled as such."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from matplotlib.image import imread

from rankmap.job.rank_map import RankMap
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import job_comm_ops
from rankmap.simulator.network import Network
from rankmap.simulator.plot import figure
from rankmap.simulator.simulate import simulate_placements
from rankmap.simulator.stats import cables_by_load, sweep_iteration


@pytest.fixture(scope="module")
def sims(racks_plan):
    """The racks plan and hostname order under 2 ECMP seeds, and under packet spraying."""
    cluster, result = racks_plan
    hostname = next(b for b in result.baselines if b.name == "hostname order")
    maps = [("rankmap plan", result.rankmap),
            ("hostname order", RankMap.from_hosts(result.job, cluster, list(hostname.hosts),
                                                  result.rankmap.nproc_per_node))]
    ecmp = simulate_placements(cluster, result.job, maps, seeds=range(0, 2))
    spray = simulate_placements(cluster, result.job, maps, seeds=range(0, 2), routing=EcmpConfig(mode="spray"))
    return cluster, result, maps, ecmp, spray


def _pixels(png: bytes) -> np.ndarray:
    return imread(io.BytesIO(png), format="png")                   # (H, W, 4) floats in [0, 1]


@pytest.mark.parametrize("mode", ["ecmp", "spray"])
def test_png_has_its_size_and_every_panel_is_drawn(sims, mode):
    """1800 x (420 + 340 * 2) pixels; each of the 3 x 3 panel cells holds ink (not blank)."""
    png = sims[3 if mode == "ecmp" else 4].png
    img = _pixels(png)
    assert img.shape == (1100, 1800, 4) and png[:8] == b"\x89PNG\r\n\x1a\n"
    ink = img[:, :, :3].min(axis=2) < 0.9                            # (H, W) not near-white
    rows = np.array_split(np.arange(img.shape[0] - 420), 2)
    cells = [(slice(0, 420), slice(0, 600))] + [(slice(420 + r[0], 420 + r[-1] + 1), slice(c * 600, c * 600 + 600))
                                                  for r in rows for c in range(3)]
    for y, x in cells:
        assert ink[y, x].mean() > 0.02, (y, x)


def test_every_seed_is_a_dot_and_spraying_is_not_a_seed(sims):
    """The seed panel has one dot per seed per placement plus a spraying diamond each; a
    sprayed run is one diamond per placement labelled "spray", no "seed" anywhere in it."""
    cluster, result, maps, ecmp, spray = sims
    network = Network(cluster)
    sweeps = [(name, sweep) for name, sweep in ecmp.sweeps]
    fig = figure(network, sweeps, "t")
    seeds_ax = fig.axes[0]
    dots, ideal = seeds_ax.collections[1], seeds_ax.collections[2]   # vlines, then dots and diamonds of placement 0
    assert dots.get_offsets().shape == (2, 2) and ideal.get_offsets().shape == (1, 2)
    assert np.allclose(dots.get_offsets()[:, 1], ecmp.sweeps[0][1].comm_time_s)
    labels = [t.get_text() for t in seeds_ax.get_legend().get_texts()]
    assert labels == ["ECMP, one dot per seed (2)", "packet spraying (ideal)"]
    sprayed = figure(network, list(spray.sweeps), "t", spray=True)
    labels = [t.get_text() for t in sprayed.axes[0].get_legend().get_texts()]
    assert labels == ["spray"] and len(spray.seeds) == 1
    titles = " ".join(ax.get_title() for ax in sprayed.axes)
    assert "seed" not in titles and "Gb/s" in titles
    with_timelines = figure(network, list(spray.sweeps), "t", list(spray.timelines), spray=True,
                            iterations=[p["iteration"] for p in spray.document["placements"]])
    words = [ax.get_title() for ax in with_timelines.axes]
    words += [t.get_text() for ax in with_timelines.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert not any("seed" in w for w in words) and sum("(packet spraying)" in w for w in words) == 2


def test_group_band_spans_the_seeds(sims):
    """The completion-time band runs from the fastest to the slowest seed of each rank."""
    cluster, result, maps, ecmp, _ = sims
    sweep = ecmp.sweeps[1][1]
    phase, part, _ = sweep.first.slowest()
    times = np.array([np.sort(next(p for p in r.phase(phase.name).parts if p.label == part.label).group_times_s)[::-1]
                      for r in sweep.runs])
    fig = figure(Network(cluster), list(ecmp.sweeps), "t")
    band = fig.axes[1].collections[1].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(times.min()) and band.max() == pytest.approx(times.max())


def test_cables_by_load_closed_forms():
    """Sums to k cables per switch; the mean load per cable is m / k; three flows on two
    uplinks put all on one cable with probability 2 * (1/2)^3 = 1/4."""
    m = np.array([3, 10, 0])
    got = cables_by_load(m, 2, 10)
    assert got.sum() == pytest.approx(6) and (got * np.arange(11)).sum() == pytest.approx(13)
    assert cables_by_load(np.array([3]), 2, 3).tolist() == pytest.approx([0.25, 0.75, 0.75, 0.25])


def test_histogram_follows_balls_into_bins(racks_plan):
    """Hostname order on the racks example: over 8 seeds, cables carrying 0, 1, 2 queue pairs
    are within 15% of the balls-into-bins expectation (uniform independent hashing)."""
    cluster, result = racks_plan
    network = Network(cluster)
    hostname = next(b for b in result.baselines if b.name == "hostname order")
    rm = RankMap.from_hosts(result.job, cluster, list(hostname.hosts), result.rankmap.nproc_per_node)
    sweep = sweep_iteration(network, RankPlacement.from_rankmap(rm, network), rm.layout, job_comm_ops(result.job),
                            range(8))
    phase = sweep.first.slowest()[0].name
    per_seed = [r.uplink_qps(network, phase).reshape(-1, network.uplinks) for r in sweep.runs]
    sending = per_seed[0].sum(axis=1) > 0
    observed = np.mean([np.bincount(q[sending].ravel(), minlength=3)[:3] for q in per_seed], axis=0)
    expected = cables_by_load(per_seed[0][sending].sum(axis=1), network.uplinks, 2)
    assert np.allclose(observed, expected, rtol=0.15), (observed, expected)


def test_timeline_rows_add_up_to_the_iteration(sims):
    """Compute + exposed comm + bubble + rest = iteration time on every stage."""
    cluster, result, maps, ecmp, _ = sims
    from rankmap.simulator.timing import comm_times, configs_of, iteration_timing

    compute, overlap = configs_of(result.job)
    timing = iteration_timing(result.job, comm_times(ecmp.sweeps[0][1].first, result.job), compute, overlap)
    parts = timing.schedule.timeline.breakdown_s()
    assert parts.shape == (result.job.pp, 4) and np.allclose(parts.sum(axis=1), timing.time_s)
    assert dataclasses.is_dataclass(timing.schedule.timeline) and (parts >= -1e-12).all()


def _table_rows(cluster, job, doc: dict, n_seeds: int) -> dict:
    """The iteration table as ``rankmap simulate`` prints it: ``{placement: cells}`` (its rows
    come after the communication table's, which name the placements first)."""
    from rich.console import Console

    from rankmap.cli.report import print_simulation

    console = Console(record=True, width=200)
    print_simulation(cluster, job, doc, [], 0.0, n_seeds, console)
    lines = console.export_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("predicted iteration"))
    names = [p["name"] for p in doc["placements"]]
    rows = {}
    for line in lines[start:]:
        name = next((n for n in names if line.strip().startswith(n + " ")), None)
        if name is not None and name not in rows:
            rows[name] = line.strip()[len(name):].split()
    return rows


def test_timeline_titles_repeat_the_table(sims):
    """Each timeline's title gives the iteration table's own cells (time, MFU, bubble, exposed
    time per kind) and names as critical the stage whose reduction ends last; with one seed
    the table's exposed DP time is that stage's reduction past the last backward, as drawn."""
    cluster, result, maps, ecmp, spray = sims
    for sim in (ecmp, spray):
        doc = sim.document
        fig = figure(Network(cluster), list(sim.sweeps), "t", list(sim.timelines),
                     spray=sim is spray, iterations=[p["iteration"] for p in doc["placements"]])
        rows = _table_rows(cluster, result.job, doc, len(sim.seeds))
        kinds = list(doc["placements"][0]["iteration"]["exposed_comm_s"])
        for i, p in enumerate(doc["placements"]):
            ax = next(a for a in fig.axes if a.get_title().startswith(p["name"] + ": ") and "MFU" in a.get_title())
            title = ax.get_title()
            cells = rows[p["name"]]                                     # time 's', MFU, tokens, bubble, exposed...
            assert f"{cells[0]} s, MFU {cells[2]}, bubble {cells[4]}" in title
            exposed = [f"{k} {cells[5 + 2 * j]} s" for j, k in enumerate(kinds)]
            assert ", ".join(exposed) in title
            tl = sim.timelines[i][0]
            critical = int(np.argmax(tl.reduce_end_s))
            assert f"critical stage {critical}:" in title
            assert ax.get_yticklabels()[critical].get_text() == f"stage {critical} (critical)"
            assert ("(packet spraying)" if sim is spray else f"drawn: seed {sim.seeds[0]}") in title
        if sim is spray:                                              # one run: the drawn one is the table's
            tl = sim.timelines[0][0]
            past = float(tl.reduce_end_s.max() - tl.backward_end_s.max())
            it = doc["placements"][0]["iteration"]
            assert it["exposed_comm_s"]["dp"] == pytest.approx(past + tl.gather_wait_s.sum(axis=1)[critical], rel=1e-5)


def test_timeline_marks_every_seed(sims):
    """Ticks at every seed's reduction end per stage, dotted lines at every seed's iteration end."""
    cluster, result, maps, ecmp, _ = sims
    fig = figure(Network(cluster), list(ecmp.sweeps), "t", list(ecmp.timelines),
                 iterations=[p["iteration"] for p in ecmp.document["placements"]])
    ax = next(a for a in fig.axes if a.get_title().startswith("hostname order: ") and "MFU" in a.get_title())
    tls = ecmp.timelines[1]
    ticks = ax.collections[-2].get_offsets()
    want = np.array([[t.reduce_end_s[s], s] for t in tls for s in range(result.job.pp)])
    assert len(tls) == 2 and np.allclose(ticks, want)
    lines = ax.collections[-1].get_segments()
    assert sorted(seg[0][0] for seg in lines) == pytest.approx(sorted(t.time_s for t in tls))


def test_heat_map_has_a_block_of_rows_per_seed(sims):
    """The ECMP heat map stacks every seed's queue pairs per cable; its rows are seed 0's, then seed 1's."""
    cluster, result, maps, ecmp, _ = sims
    network = Network(cluster)
    fig = figure(network, list(ecmp.sweeps), "t")
    ax = next(a for a in fig.axes if a.get_title().startswith("hostname order: queue pairs"))
    sweep = ecmp.sweeps[1][1]
    phase = sweep.first.slowest()[0].name
    grids = [r.uplink_qps(network, phase) for r in sweep.runs]
    used = np.flatnonzero(sum(g.sum(axis=1) for g in grids) > 0)
    shown = np.asarray(ax.images[0].get_array())
    assert shown.shape == (2 * used.size, network.rails * network.uplinks)
    assert (shown[:used.size] == grids[0][used]).all() and (shown[used.size:] == grids[1][used]).all()
    assert "every seed" in ax.get_title() and not (grids[0] == grids[1]).all()


@pytest.mark.parametrize("gather_on", [True, False])
def test_timeline_draws_data_loading_apart_from_exposed_comm(gather_on):
    # 2 s of loading: drawn [0, 2] as loading on every stage; with the gather overlap off its
    # 1 s follows as exposed comm [2, 3]; with it on the gather hides under the load (no bar)
    import matplotlib.colors as mc
    from matplotlib.figure import Figure

    from rankmap.simulator.plot import _COLORS, _timeline_panel
    from rankmap.simulator.schedule import OverlapConfig, PipelineCosts, run_schedule

    c = PipelineCosts(forward_s=(1.0,) * 2, backward_s=(2.0,) * 2, comm_forward_s=(0.0,) * 2,
                      comm_backward_s=(0.0,) * 2, m=4, dp_gather_s=1.0, data_loading_s=2.0)
    tl = run_schedule(c, OverlapConfig(dp_gather=gather_on)).timeline
    ax = Figure().add_subplot()
    _timeline_panel(ax, "x", [tl], None, [0])

    def bars(kind):
        return sorted((round(float(p.vertices[0][0]), 9), round(float(p.vertices[2][0]), 9), round(float(p.vertices[0][1]), 1))
                      for coll in ax.collections if len(coll.get_facecolor())
                      and mc.same_color(coll.get_facecolor()[0], _COLORS[kind]) for p in coll.get_paths())

    assert [b[:2] for b in bars("loading")] == [(0.0, 2.0)] * 2
    assert [b[:2] for b in bars("comm")] == ([] if gather_on else [(2.0, 3.0)] * 2)
    assert "data loading" in [t.get_text() for t in ax.get_legend().get_texts()]
