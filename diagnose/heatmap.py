"""Heat map of per-rank phase durations (MegaScale, NSDI'24 §5.2: stragglers stand out).

Each cell is a rank's median seconds per step in a phase divided by the median over all
ranks, so 1.0 is typical and a straggler is a bright cell. Rows are labelled with rank,
host and ToR group; above 128 ranks the rows are hosts (the median of their ranks).
"""

from __future__ import annotations

import io

import numpy as np

from rankmap.diagnose.analysis import Diagnosis

__all__ = ["heatmap_png"]


def heatmap_png(d: Diagnosis, host_of: dict, tor_of: dict, max_rows: int = 128) -> bytes:
    """PNG bytes of the heat map (no timestamp or software tag: byte-identical for equal input)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratio = d.matrix / np.nanmedian(d.matrix, axis=0, keepdims=True) if d.matrix.size else d.matrix
    labels = [f"r{r} {host_of.get(r, '?')} {tor_of.get(host_of.get(r, '?'), '?')}" for r in d.ranks]
    if len(d.ranks) > max_rows:
        hosts = sorted({host_of.get(r, "?") for r in d.ranks})
        rows = {h: [i for i, r in enumerate(d.ranks) if host_of.get(r, "?") == h] for h in hosts}
        ratio = np.array([np.nanmedian(ratio[rows[h]], axis=0) for h in hosts])
        labels = [f"{h} {tor_of.get(h, '?')}" for h in hosts]
    flagged = {(f.who, f.phase) for f in d.flags if f.what == "rank"}
    height = 1.5 + 0.22 * len(labels)
    fig, ax = plt.subplots(figsize=(2 + 1.1 * max(1, len(d.phases)), height), dpi=100)
    im = ax.imshow(ratio, aspect="auto", cmap="magma", vmin=0.5, vmax=max(2.0, float(np.nanmax(ratio, initial=2.0))))
    ax.set_xticks(range(len(d.phases)), d.phases, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    for i, r in enumerate(d.ranks if len(labels) == len(d.ranks) else []):
        for j, phase in enumerate(d.phases):
            if (str(r), phase) in flagged:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="cyan", linewidth=2))
    fig.colorbar(im, ax=ax, label="duration / median over ranks")
    ax.set_title("median seconds per step, relative to all ranks")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
