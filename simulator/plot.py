"""The simulation figure (``simulation.png``): uplink loads per ToR group, completion time per group.

Top: bytes per iteration through each ToR group's uplinks (all rails and cables), one bar
per placement -- where the spine traffic lands. Bottom: the completion time of every
group of the collective the slowest phase waits for (e.g. each DP group's
reduce-scatter), sorted slowest first, one line per placement -- how far stragglers lag.

On a fabric of several tiers the top panel's legend also gives, per placement, the bytes
up each switch tier's uplinks (e.g. "spine 2201 GB": what left the pods for the core).

Rendered with matplotlib's Agg backend at a fixed size and DPI with the PNG's
``Software`` metadata removed, so the same inputs give the same bytes.
"""

from __future__ import annotations

import io

import numpy as np

from rankmap.simulator.iteration import IterationResult
from rankmap.simulator.network import Network

__all__ = ["render_png"]


def _focus(results: list[IterationResult]) -> tuple[str, str] | None:
    """(phase, collective) the first placement's slowest phase waits for."""
    for result in results:
        got = result.slowest()
        if got is not None:
            return got[0].name, got[1].label
    return None


def _tier_label(network: Network, name: str, result: IterationResult) -> str:
    """``name``, plus bytes up each switch tier's uplinks (cables and sprayed bundles) when there are some."""
    parts = []
    for t in range(1, network.depth):
        ranges = [network.link_range(f"tier{t}-up"), network.link_range(f"tier{t}-up-all")]
        total = sum(float(p.link_bytes[r.start:r.stop].sum()) for p in result.phases for r in ranges)
        parts.append(f"{network.fabric.levels[t - 1].name} {total / 1e9:.0f} GB")
    return f"{name} (up: {', '.join(parts)})" if parts else name


def render_png(network: Network, named: list[tuple[str, IterationResult]], title: str = "") -> bytes:
    """PNG bytes of the figure for placements ``[(name, iteration result)]``.

    Parameters
    ----------
    network : Network
    named : list of (str, IterationResult)
        Placements in legend order.
    title : str
        Figure title.
    """
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 7), dpi=100)
    top, bottom = fig.subplots(2, 1)
    loads = np.array([r.uplink_bytes(network).sum(axis=1) for _, r in named]).reshape(len(named), -1)  # (P, K)
    used = np.flatnonzero(loads.sum(axis=0) > 0)
    width = 0.8 / max(len(named), 1)
    x = np.arange(used.size)
    for i, (name, result) in enumerate(named):
        top.bar(x + i * width - 0.4 + width / 2, loads[i, used] / 1e9, width,
                label=_tier_label(network, name, result))
    top.set_xticks(x, [network.cluster.tor_groups[k].name for k in used], rotation=90, fontsize=7)
    top.set_yscale("log")
    top.set_ylabel("GB per iteration (log)")
    top.set_title("bytes through each ToR group's uplinks" + (" (ToR tier)" if network.depth > 1 else ""),
                  fontsize=10)
    if used.size:
        top.set_ylim(top=loads[:, used].max() / 1e9 * 8)          # headroom for the legend (log axis)
    top.legend(fontsize=8, ncols=max(min(len(named), 3), 1), loc="upper center")
    focus = _focus([r for _, r in named])
    if focus is not None:
        phase_name, label = focus
        for i, (name, result) in enumerate(named):
            phase = result.phase(phase_name)
            part = next((p for p in phase.parts if p.label == label), None) if phase else None
            if part is not None:
                times = np.sort(part.group_times_s)[::-1]
                bottom.step(np.arange(times.size), times, where="mid", label=name,
                            linestyle=("-", "--", "-.", ":")[i % 4], linewidth=1.5)
        bottom.set_xlabel("group, slowest first")
        bottom.set_ylabel("completion time (s)")
        bottom.set_title(f"completion time per group: {label} ({phase_name} phase)", fontsize=10)
        bottom.set_ylim(bottom=0)
        bottom.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
