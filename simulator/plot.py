"""The simulation figure (``simulation.png``): what a network engineer reads off a run.

Top row, over every placement:

- communication time per iteration under every ECMP seed (one dot per seed, a bar from
  the fastest to the slowest) and under packet spraying (a diamond: the no-collision
  ideal); a run that sprays packets is labelled "spray", never as a seed;
- the completion time of every group of the collective the slowest phase waits for (e.g.
  each DP group's reduce-scatter), slowest first: the median over seeds as a line, the
  band from the fastest to the slowest seed around it.

Then one row per placement (the phase the top row focuses on):

- a heat map of the ToR uplinks: ToR group (rows, one block of rows per seed) x uplink
  cable (columns, ``rail * uplinks + cable``), queue pairs hashed onto each cable (Gb/s
  averaged over the phase when packets are sprayed, as nothing is hashed);
- a histogram of ToR uplink cables by the queue pairs they carry, over every seed (bar:
  mean, whiskers: fewest to most), beside the balls-into-bins expectation for the same
  flows per ToR (:func:`rankmap.simulator.stats.cables_by_load`): ECMP collisions where
  the histogram has cables with 2, 3, ... flows and idle ones;
- a timeline of one iteration per pipeline stage (:class:`~rankmap.simulator.schedule.StageTimeline`)
  under the first seed: forward and backward compute, exposed communication, DP reduction,
  optimizer step; the grey background left showing is the pipeline bubble; ticks and
  dotted lines mark every seed's reduction and iteration ends. Its title repeats the
  iteration table's figures (mean over seeds) and names the critical stage, the one whose
  reduction ends last, where the table's exposed communication sits.

On a fabric of several tiers the heat map's title also gives the bytes up each switch
tier's uplinks (e.g. "spine 2201 GB": what left the pods for the core).

Rendered with matplotlib's Agg backend at a fixed size and DPI with the PNG's
``Software`` metadata removed, so the same inputs give the same bytes.
"""

from __future__ import annotations

import io

import numpy as np

from rankmap.simulator.network import Network
from rankmap.simulator.report import iteration_figures
from rankmap.simulator.schedule import StageTimeline
from rankmap.simulator.stats import IterationSweep, cables_by_load

__all__ = ["figure", "render_png"]

_COLORS = {"forward": "#4C72B0", "backward": "#223F6B", "comm": "#DD8452", "reduce": "#C44E52",
           "optimizer": "#55A868", "bubble": "#E5E5E5", "loading": "#937860"}


def _focus(sweeps: list[tuple[str, IterationSweep]]) -> tuple[str, str] | None:
    """(phase, collective) the first placement's slowest phase waits for (first seed)."""
    for _, sweep in sweeps:
        got = sweep.first.slowest()
        if got is not None:
            return got[0].name, got[1].label
    return None


def _tier_label(network: Network, result) -> str:
    """Bytes up each switch tier's uplinks (cables and sprayed bundles), or ""."""
    parts = []
    for t in range(1, network.depth):
        ranges = [network.link_range(f"tier{t}-up"), network.link_range(f"tier{t}-up-all")]
        total = sum(float(p.link_bytes[r.start:r.stop].sum()) for p in result.phases for r in ranges)
        parts.append(f"{network.fabric.levels[t - 1].name} {total / 1e9:.0f} GB")
    return f" (up: {', '.join(parts)})" if parts else ""


def _seeds_panel(ax, sweeps, spray: bool) -> None:
    """Communication time per seed per placement, and under spraying."""
    for i, (name, sweep) in enumerate(sweeps):
        times = np.asarray(sweep.comm_time_s, dtype=float)
        if spray:
            ax.scatter([i], times[:1], color="C0", marker="D", zorder=3, label="spray" if i == 0 else None)
            continue
        x = i + np.linspace(-0.2, 0.2, times.size) if times.size > 1 else np.array([float(i)])
        ax.vlines(i, times.min(), times.max(), color="0.5", linewidth=1)
        ax.scatter(x, times, s=14, color="C0", zorder=3,
                   label=f"ECMP, one dot per seed ({times.size})" if i == 0 else None)
        ax.scatter([i + 0.3], [sweep.ideal.comm_time_s], color="C2", marker="D", zorder=3,
                   label="packet spraying (ideal)" if i == 0 else None)
    ax.set_xticks(range(len(sweeps)), [n for n, _ in sweeps], fontsize=8, rotation=15)
    ax.set_ylabel("communication time per iteration (s)")
    ax.set_ylim(bottom=0)
    ax.set_title("communication per iteration under packet spraying" if spray
                 else "communication per iteration: every seed and its spread", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")


def _groups_panel(ax, sweeps, focus: tuple[str, str], spray: bool) -> None:
    """Completion time per group, slowest first: median over seeds, band min-max."""
    phase_name, label = focus
    for i, (name, sweep) in enumerate(sweeps):
        rows = []
        for run in sweep.runs or (sweep.first,):
            phase = run.phase(phase_name)
            part = next((p for p in phase.parts if p.label == label), None) if phase else None
            if part is not None:
                rows.append(np.sort(part.group_times_s)[::-1])
        if not rows:
            continue
        times = np.array(rows)                                      # (S, G)
        x = np.arange(times.shape[1])
        style = ("-", "--", "-.", ":")[i % 4]
        ax.step(x, np.median(times, axis=0), where="mid", linestyle=style, linewidth=1.5, color=f"C{i}",
                label=name if spray or len(rows) == 1 else f"{name} (median of {len(rows)} seeds, band: min-max)")
        if len(rows) > 1:
            ax.fill_between(x, times.min(axis=0), times.max(axis=0), step="mid", alpha=0.25, color=f"C{i}")
    ax.set_xlabel("group, slowest first")
    ax.set_ylabel("completion time (s)")
    ax.set_title(f"completion time per group: {label} ({phase_name} phase)", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


def _heat_panel(ax, fig, network: Network, name: str, sweep: IterationSweep, phase_name: str, spray: bool) -> None:
    """ToR group x uplink cable: queue pairs (ECMP, one block of rows per seed) or Gb/s (spraying) in one phase."""
    run = sweep.first
    phase = run.phase(phase_name)
    shape = (network.n_groups, network.rails * network.uplinks)
    if spray:
        r = network.link_range("tor-up")
        seconds = phase.time_s if phase is not None and phase.time_s > 0 else 1.0
        grids = [np.zeros(shape) if phase is None else phase.link_bytes[r.start:r.stop].reshape(shape) * 8 / seconds / 1e9]
        what = "Gb/s (phase average)"
    else:
        grids, what = [r.uplink_qps(network, phase_name) for r in (sweep.runs or (run,))], "queue pairs"
    used = np.flatnonzero(sum(g.sum(axis=1) for g in grids) > 0)
    seeds = "" if spray else (f"seed {sweep.seeds[0]}" if len(grids) == 1
                              else f"every seed: a block of rows each, seed {sweep.seeds[0]} on top")
    ax.set_title(f"{name}: {what} per ToR uplink, {phase_name}" + (f"\n{seeds}" if seeds else "")
                 + _tier_label(network, run), fontsize=8 if seeds else 9)
    if used.size == 0:
        ax.text(0.5, 0.5, "no traffic leaves the ToR groups", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    image = ax.imshow(np.vstack([g[used] for g in grids]), aspect="auto", interpolation="nearest", cmap="viridis")
    step = max(1, used.size * len(grids) // 24)
    names = [network.cluster.tor_groups[g].name for g in used] * len(grids)
    ax.set_yticks(np.arange(0, len(names), step), names[::step], fontsize=6)
    for k in range(1, len(grids)):
        ax.axhline(k * used.size - 0.5, color="white", linewidth=1.2)
    if len(grids) > 1:
        for k, seed in enumerate(sweep.seeds):
            ax.text(1.0, (k + 0.5) * used.size - 0.5, f" seed {seed}", fontsize=6, va="center",
                    transform=ax.get_yaxis_transform())
    ax.set_xlabel(f"uplink cable (rail x {network.uplinks} + cable)", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.06 if len(grids) > 1 else 0.02)


def _histogram_panel(ax, network: Network, name: str, sweep: IterationSweep, phase_name: str, spray: bool) -> None:
    """Cables by queue pairs carried, every seed, against balls into bins."""
    if spray:
        _spray_histogram(ax, network, name, sweep.first.phase(phase_name), phase_name)
        return
    ax.set_title(f"{name}: ToR uplinks by queue pairs carried, {phase_name}", fontsize=9)
    k = network.uplinks
    per_seed = [run.uplink_qps(network, phase_name).reshape(-1, k) for run in (sweep.runs or (sweep.first,))]
    sending = per_seed[0].sum(axis=1) > 0                           # ToR switches that hash flows up
    if not sending.any():
        ax.text(0.5, 0.5, "no traffic leaves the ToR groups", ha="center", va="center", transform=ax.transAxes,
                fontsize=8)
        ax.set_axis_off()
        return
    top = int(max(q.max() for q in per_seed))
    counts = np.array([np.bincount(q[sending].ravel(), minlength=top + 1) for q in per_seed])   # (S, J)
    j = np.arange(top + 1)
    mean = counts.mean(axis=0)
    ax.bar(j, mean, width=0.8, color="C0", alpha=0.7,
           yerr=np.array([mean - counts.min(axis=0), counts.max(axis=0) - mean]), capsize=2,
           label=f"ECMP, {len(per_seed)} seed(s): mean, whiskers min-max")
    expected = cables_by_load(per_seed[0][sending].sum(axis=1), k, top)
    ax.plot(j, expected, "o-", color="C3", markersize=3, label=f"balls into bins ({k} uplinks per ToR)")
    ax.set_xlabel("queue pairs on the cable")
    ax.set_ylabel("uplink cables")
    ax.legend(fontsize=7)


def _spray_histogram(ax, network: Network, name: str, phase, phase_name: str) -> None:
    """Packet spraying hashes nothing: the uplink cables of the ToRs that send, by load (Gb/s over the phase)."""
    ax.set_title(f"{name}: ToR uplinks by load, {phase_name} (packet spraying, nothing hashed)", fontsize=9)
    r = network.link_range("tor-up")
    if phase is None or phase.time_s <= 0 or not phase.link_bytes[r.start:r.stop].any():
        ax.text(0.5, 0.5, "no traffic leaves the ToR groups", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    gbps = phase.link_bytes[r.start:r.stop].reshape(-1, network.uplinks) * 8 / phase.time_s / 1e9   # (ToRs, k)
    ax.hist(gbps[gbps.sum(axis=1) > 0].ravel(), bins=20, color="C0", alpha=0.7, label="packet spraying (one run)")
    ax.set_xlabel("Gb/s on the cable (phase average)")
    ax.set_ylabel("uplink cables")
    ax.legend(fontsize=7)


def _timeline_panel(ax, name: str, timelines, it: dict | None, seeds) -> None:
    """One iteration per pipeline stage: passes, exposed communication, reduction, optimizer; bubble shows grey.

    The first seed's timeline is drawn; every seed's reduction ends (ticks) and iteration
    end (dotted lines) show the spread. The title repeats the table's figures (``it``, the
    placement's ``"iteration"`` entry, mean over seeds) and names the critical stage: the
    one whose reduction ends last, where the exposed communication the table counts sits.
    """
    tl = timelines[0]
    p = tl.pass_s.shape[0]
    end = float(tl.backward_end_s.max())
    for s in range(p):
        ax.broken_barh([(tl.start_s, end - tl.start_s)], (s - 0.4, 0.8), color=_COLORS["bubble"])
        if tl.loading_s > 0:                                          # loading the batch, then a gather not overlapped
            ax.broken_barh([(0.0, tl.loading_s)], (s - 0.4, 0.8), color=_COLORS["loading"])
        if tl.start_s > tl.loading_s:
            ax.broken_barh([(tl.loading_s, tl.start_s - tl.loading_s)], (s - 0.4, 0.8), color=_COLORS["comm"])
        for col, (ends, kind) in enumerate(((tl.forward_end_s, "forward"), (tl.backward_end_s, "backward"))):
            stop = np.sort(ends[s].ravel())
            start = stop - tl.pass_s[s, col]
            compute = tl.compute_s[s, col]
            ax.broken_barh(list(zip(start, np.full(start.size, compute))), (s - 0.4, 0.8), color=_COLORS[kind])
            if tl.pass_s[s, col] > compute:
                ax.broken_barh(list(zip(start + compute, np.full(start.size, tl.pass_s[s, col] - compute))),
                               (s - 0.4, 0.8), color=_COLORS["comm"])
        if tl.gather_wait_s is not None:                                # all-gather a chunk's first forward waited for
            waits = [(float(tl.forward_end_s[s, 0, ch] - tl.pass_s[s, 0] - w), float(w))
                     for ch, w in enumerate(tl.gather_wait_s[s]) if w > 0]
            ax.broken_barh(waits, (s - 0.4, 0.8), color=_COLORS["comm"])
        last = float(tl.backward_end_s[s].max())
        ax.broken_barh([(last, float(tl.reduce_end_s[s]) - last)], (s - 0.25, 0.5), color=_COLORS["reduce"])
    opt_start = float(tl.reduce_end_s.max())
    if tl.time_s > opt_start:
        ax.broken_barh([(opt_start, tl.time_s - opt_start)], (-0.4, p - 0.2), color=_COLORS["optimizer"])
    ends = np.array([t.reduce_end_s for t in timelines])                  # (S, p)
    ax.scatter(ends.ravel(), np.tile(np.arange(p), len(timelines)), marker="|", s=60, color="black", zorder=3)
    ax.vlines([t.time_s for t in timelines], -0.5, p - 0.5, colors="black", linestyles=":", linewidth=0.8)
    critical = int(np.argmax(tl.reduce_end_s))
    ax.set_title(_timeline_title(name, tl, it, seeds, critical), fontsize=8)
    ax.set_ylim(p + 0.9, -0.5)                                      # a free row at the bottom for the legend
    ax.set_yticks(range(p), [f"stage {s}" + (" (critical)" if s == critical else "") for s in range(p)],
                  fontsize=6 if p > 12 else 8)
    ax.set_xlabel("time (s)")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=_COLORS[k], label=label) for k, label in
               (("forward", "forward"), ("backward", "backward"), ("comm", "exposed comm"),
                ("reduce", "DP reduction"), ("optimizer", "optimizer"), ("bubble", "bubble (idle)"))]
    if tl.loading_s > 0:
        handles.append(Patch(color=_COLORS["loading"], label="data loading"))
    every = "" if seeds is None else ", every seed"
    handles += [Line2D([], [], color="black", marker="|", linestyle="none", label=f"reduction end{every}"),
                Line2D([], [], color="black", linestyle=":", label=f"iteration end{every}")]
    ax.legend(handles=handles, fontsize=6, ncols=4, loc="lower left")


def _timeline_title(name: str, tl: StageTimeline, it: dict | None, seeds, critical: int) -> str:
    """Two lines: the table's iteration figures (mean over seeds), then exposed time per kind
    on the critical stage and which run is drawn."""
    seed = None if seeds is None else f"seed {seeds[0]}"
    if it is None:
        return f"{name}: {tl.time_s:.3f} s ({seed or 'packet spraying'}); critical stage {critical}"
    f = iteration_figures(it)
    runs = "packet spraying" if seeds is None else f"mean of {len(seeds)} seed{'s' if len(seeds) > 1 else ''}"
    exposed = ", ".join(f"{k} {t}" for k, t in f["exposed"].items()) or "none"
    return (f"{name}: {f['time']}, MFU {f['mfu']}, bubble {f['bubble']} ({runs})\n"
            f"exposed on critical stage {critical}: {exposed}" + (f"; drawn: {seed}" if seed else ""))


def figure(network: Network, sweeps: list[tuple[str, IterationSweep]], title: str = "",
           timelines: list | None = None, spray: bool = False, iterations: list[dict] | None = None):
    """The figure for placements ``[(name, sweep)]`` (a ``matplotlib.figure.Figure``, Agg backend).

    Parameters
    ----------
    network : Network
    sweeps : list of (str, IterationSweep)
        Placements in legend order, each with its runs over the seeds.
    title : str
        Figure title.
    timelines : list, optional
        Per placement its schedule's :class:`StageTimeline` under each seed (a sequence, the
        first drawn, every one's reduction and iteration ends marked), or one timeline; no
        timeline column without them.
    spray : bool
        The runs spray packets (one run each, labelled "spray", no hashing figures).
    iterations : list of dict, optional
        Per placement its ``"iteration"`` entry of ``simulation.json``: the timeline's title
        repeats the figures the table prints (:func:`rankmap.simulator.report.iteration_figures`).
    """
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    n = len(sweeps)
    fig = Figure(figsize=(18, 4.2 + 3.4 * n), dpi=100, layout="constrained")
    grid = fig.add_gridspec(1 + n, 3)
    _seeds_panel(fig.add_subplot(grid[0, 0]), sweeps, spray)
    focus = _focus(sweeps)
    if focus is not None:
        _groups_panel(fig.add_subplot(grid[0, 1:]), sweeps, focus, spray)
        for i, (name, sweep) in enumerate(sweeps):
            _heat_panel(fig.add_subplot(grid[1 + i, 0]), fig, network, name, sweep, focus[0], spray)
            _histogram_panel(fig.add_subplot(grid[1 + i, 1]), network, name, sweep, focus[0], spray)
    for i, timeline in enumerate(timelines or ()):
        runs = (timeline,) if isinstance(timeline, StageTimeline) else tuple(timeline)
        _timeline_panel(fig.add_subplot(grid[1 + i, 2]), sweeps[i][0], runs, iterations[i] if iterations else None,
                        None if spray else sweeps[i][1].seeds)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def render_png(network: Network, sweeps: list[tuple[str, IterationSweep]], title: str = "",
               timelines: list | None = None, spray: bool = False, iterations: list[dict] | None = None) -> bytes:
    """PNG bytes of :func:`figure`: 1,800 x (420 + 340 * placements) pixels, no ``Software`` tag."""
    buf = io.BytesIO()
    figure(network, sweeps, title, timelines, spray, iterations).savefig(buf, format="png",
                                                                        metadata={"Software": None})
    return buf.getvalue()
