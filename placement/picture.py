"""A picture of a plan: the fabric as tiers, every host coloured by the pipeline stage it runs,
and the DP rings and pipeline hops that leave their ToR group drawn between groups.

One panel per placement (the plan first, then any baselines beside it, same scale), so a
cluster engineer sees at a glance which stages sit under which ToR group and pod, and why
the plan crosses the spine less. Every host is a cell (ToR groups are blocks of up to 8
cells a row, pods are shaded bands, the top tier's domains are labelled), which stays
readable from 8 hosts to the 1,536 hosts of a 12,288-GPU cluster; above about 4,000 hosts the
cells get small but the arcs (aggregated per pair of ToR groups) still read.

- Host colour: pipeline stage of the host's first rank (a host runs one stage whenever tp
  fills it); white: free and unused; light grey: busy (another job) or reserved; pink: excluded;
  black: failed in the cluster spec or replanned away (black even when the map still runs ranks
  there: that map needs ``rankmap replan``).
- Arcs above the blocks: DP ring edges whose ends sit in different ToR groups (ring order,
  the last rank back to the first, as NCCL's ring all-reduce sends, Patarasuk & Yuan, JPDC
  2009), one arc per pair of groups, width growing with the count. Arcs below: pipeline
  hops (stage s to s+1 of one pipeline) between groups.

matplotlib (Agg backend) is imported when a picture is drawn; output is a PNG (bytes),
identical for identical inputs (no timestamps in the metadata).
"""

from __future__ import annotations

import io
from collections import Counter

import numpy as np

from rankmap.job.rank_map import RankMap
from rankmap.topology.hostnames import expand_hostlist
from rankmap.topology.model import Cluster

__all__ = ["group_crossings", "plan_picture"]

ROW = 8  # host cells per row inside a ToR group block
BUSY, FAILED, EXCLUDED = "0.82", "black", "#f4c7c3"
# Stage colours: tab10 without its grey and red (kept apart from busy and failed hosts).
STAGES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")


def _room(width: float) -> float:
    """Height left for arcs above (and below) the blocks: the tallest arc plus a margin."""
    return min(14.0, 1.5 + 0.25 * width) + 2.0


def group_crossings(rm: RankMap, kind: str) -> Counter:
    """Edges of ``kind`` ("dp": ring edges, cyclic; "pp": consecutive stages) between ToR groups.

    Returns a Counter ``{(group a, group b): edges}`` with ``a < b`` by name.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec, ModelShape
    >>> job = JobSpec(name="j", tp=1, pp=1, dp=4, model=ModelShape(layers=2, hidden=8, heads=2, seq_len=8))
    >>> rm = RankMap(job=job, cluster_name="c", cluster_hash="0" * 64, hosts=("a", "b", "c", "d"),
    ...              tor_groups=("t1", "t1", "t2", "t2"), rails=((0,),) * 4, nproc_per_node=1)
    >>> dict(group_crossings(rm, "dp"))   # ring a-b-c-d-a leaves t1 twice
    {('t1', 't2'): 2}
    """
    tor = np.asarray(rm.tor_groups)[rm.rank_node]
    groups = rm.layout.groups(kind)
    if groups.shape[1] < 2:
        return Counter()
    nxt = np.roll(groups, -1, axis=1) if kind == "dp" else groups[:, 1:]
    cur = groups if kind == "dp" else groups[:, :-1]
    if kind == "dp" and groups.shape[1] == 2:  # a ring of two is one edge, used both ways
        nxt, cur = groups[:, 1:], groups[:, :-1]
    a, b = tor[cur.ravel()], tor[nxt.ravel()]
    cross = a != b
    return Counter(tuple(sorted(pair)) for pair in zip(a[cross].tolist(), b[cross].tolist()))


def _layout(cluster: Cluster):
    """Block origin per ToR group (x, y of its top-left cell), the pod bands, and the width."""
    level = 1 if cluster.depth >= 2 else 0
    pods = cluster.tier_domains(level) if level else (tuple(g.name for g in cluster.tor_groups),)
    origin, bands, x = {}, [], 0.0
    for pod in pods:
        start = x
        for name in pod:
            origin[name] = x
            x += ROW + 1.5
        bands.append((start - 0.5, x - 1.0, pod))
        x += 1.5
    return origin, bands, x


def _arcs(ax, crossings: Counter, centre: dict, y0: float, up: bool, colour: str, most: int) -> None:
    """Half ellipses between group centres (one polyline collection: fast for thousands of pairs)."""
    from matplotlib.collections import LineCollection

    t = np.linspace(0.0, np.pi, 24)
    lines, widths = [], []
    for (a, b), n in sorted(crossings.items()):
        xa, xb = sorted((centre[a], centre[b]))
        height = _room(xb - xa) - 2.0
        xs = (xa + xb) / 2 - (xb - xa) / 2 * np.cos(t)
        ys = y0 + (1 if up else -1) * height * np.sin(t)
        lines.append(np.column_stack([xs, ys]))
        widths.append(0.3 + 3.0 * np.log1p(n) / np.log1p(most))
    if lines:
        ax.add_collection(LineCollection(lines, linewidths=widths, colors=colour, alpha=0.5))


def _panel(ax, cluster: Cluster, rm: RankMap, name: str, stage_colour) -> None:
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    origin, bands, width = _layout(cluster)
    node_of = {h: n for n, h in enumerate(rm.hosts)}
    stage = rm.layout.column("pp")
    first = rm.offsets[:-1]
    deepest = max(-(-len(g.hosts) // ROW) for g in cluster.tor_groups)
    cells, faces = [], []
    told = {key: set(expand_hostlist(hosts)) for key, hosts in rm.context.items()}  # the plan's constraints
    for g in cluster.tor_groups:
        x0 = origin[g.name]
        for i, host_name in enumerate(g.hosts):
            r, c = divmod(i, ROW)
            cells.append(Rectangle((x0 + c, -r - 1), 0.9, 0.9))
            state = cluster.host(host_name).state
            if state == "failed" or host_name in told.get("failed", ()):
                faces.append(FAILED)  # also when the map still runs ranks there: it needs a replan
            elif host_name in node_of:
                faces.append(stage_colour(int(stage[int(first[node_of[host_name]])])))
            elif host_name in told.get("excluded", ()):
                faces.append(EXCLUDED)
            else:
                faces.append(BUSY if state == "busy" or host_name in told.get("reserved", ()) else "white")
    ax.add_collection(PatchCollection(cells, facecolors=faces, edgecolors="0.75", linewidths=0.2))
    for start, end, pod in bands:
        ax.add_patch(Rectangle((start, -deepest - 1.3), end - start, deepest + 1.6, facecolor="#4c72b0",
                               alpha=0.07, lw=0))
    centre = {g: x + ROW / 2 for g, x in origin.items()}
    dp, pp = group_crossings(rm, "dp"), group_crossings(rm, "pp")
    most = max([1, *dp.values(), *pp.values()])
    _arcs(ax, dp, centre, 0.4, True, "#1f77b4", most)
    _arcs(ax, pp, centre, -deepest - 1.4, False, "#ff7f0e", most)
    if len(cluster.tor_groups) <= 48:
        for g in cluster.tor_groups:
            ax.text(centre[g.name], -deepest - 1.0, g.name, ha="center", va="top", fontsize=5, rotation=90)
    if len(bands) > 1:
        for start, end, pod in bands:
            ax.text((start + end) / 2, 1.0, f"{pod[0]}..{pod[-1]}" if len(pod) > 1 else pod[0],
                    ha="center", va="bottom", fontsize=5, color="#4c72b0")
    ax.set_title(f"{name}: {sum(dp.values())} DP ring edges, {sum(pp.values())} pipeline hops between ToR groups"
                 if width > 120 else f"{name}: {sum(dp.values())} DP edges, {sum(pp.values())} PP hops across ToR groups",
                 fontsize=8 if width > 120 else 7, loc="left")
    ax.set_xlim(-1.5, width)
    ax.set_ylim(-deepest - 1.5 - _room(width), _room(width))
    ax.set_aspect("equal")
    ax.axis("off")


def plan_picture(cluster: Cluster, maps: list[tuple[str, RankMap]], title: str = "") -> bytes:
    """Draw ``maps`` (name, rank map) on ``cluster`` one above the other; return PNG bytes.

    Parameters
    ----------
    cluster : Cluster
        The cluster the maps were made for (hosts' ToR groups, pods, busy and failed hosts).
    maps : list of (str, RankMap)
        The plan first, then baselines; at least one.
    title : str
        Figure title (cluster and job, typically).

    Raises
    ------
    ValueError
        ``maps`` is empty.
    """
    if not maps:
        raise ValueError("plan_picture needs at least one rank map")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    pp = maps[0][1].job.pp
    cmap = plt.get_cmap("viridis")

    def stage_colour(s: int):
        return STAGES[s] if pp <= len(STAGES) else cmap(s / max(1, pp - 1))

    _, _, width = _layout(cluster)
    deepest = max(-(-len(g.hosts) // ROW) for g in cluster.tor_groups)
    cols = 2 if width < 120 and len(maps) > 1 else 1  # small fabrics: panels side by side
    rows = -(-len(maps) // cols)
    fig_w = min(22.0, max(8.0, width / 10 * cols))
    panel_h = fig_w / cols * (deepest + 1.5 + 2 * _room(width)) / (width + 1.5) + 0.45
    shown = range(pp) if pp <= len(STAGES) else (0, pp // 2, pp - 1)
    handles = [Patch(facecolor=stage_colour(s), label=f"stage {s}") for s in shown]
    handles += [Patch(facecolor="white", edgecolor="0.6", label="free, unused"),
                Patch(facecolor=BUSY, label="busy or reserved"), Patch(facecolor=EXCLUDED, label="excluded"),
                Patch(facecolor=FAILED, label="failed (in the spec or replanned away)"),
                Patch(facecolor="#1f77b4", alpha=0.6, label="DP ring edges between ToR groups (above)"),
                Patch(facecolor="#ff7f0e", alpha=0.6, label="pipeline hops between ToR groups (below)"),
                Patch(facecolor="#4c72b0", alpha=0.15, label="pod (domain of the tier above the ToR groups)")]
    ncol = max(1, min(int(fig_w // 2.6), len(handles)))
    legend_h = 0.25 + 0.18 * -(-len(handles) // ncol)
    fig, axes = plt.subplots(rows, cols, figsize=(fig_w, panel_h * rows + 0.45 + legend_h), squeeze=False)
    for ax in axes.ravel()[len(maps):]:
        ax.axis("off")
    for ax, (name, rm) in zip(axes.ravel(), maps):
        _panel(ax, cluster, rm, name, stage_colour)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    height = fig.get_figheight()
    fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.45 / height, bottom=legend_h / height, hspace=0.15, wspace=0.04)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
