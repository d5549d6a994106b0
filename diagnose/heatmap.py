"""Heat map of each rank's own excess time per phase (MegaScale, NSDI'24 §5.2: stragglers stand out).

Left panel, the colour: a rank's *own* excess seconds per step in each phase
(:attr:`rankmap.diagnose.analysis.Diagnosis.excess`) -- compute time above the median of
ranks doing the same work, and arrival at collectives later than the median rank -- so the
culprit is the bright cell and the ranks that merely wait for it stay dark. Right panel,
apart: the seconds per step each rank spends inside each operation (waiting included),
where the victims of a straggler show. Rows are labelled with rank, host and ToR group;
above 128 ranks the rows are hosts (the median of their ranks). Flagged cells are boxed.
"""

from __future__ import annotations

import io

import numpy as np

from rankmap.diagnose.analysis import Diagnosis
from rankmap.diagnose.records import COMPUTE

__all__ = ["heatmap_png"]


def _rows(values: np.ndarray, d: Diagnosis, host_of: dict, tor_of: dict, max_rows: int):
    labels = [f"r{r} {host_of.get(r, '?')} {tor_of.get(host_of.get(r, '?'), '?')}" for r in d.ranks]
    if len(d.ranks) <= max_rows or not values.size:
        return values, labels
    hosts = sorted({host_of.get(r, "?") for r in d.ranks})
    rows = {h: [i for i, r in enumerate(d.ranks) if host_of.get(r, "?") == h] for h in hosts}
    return np.array([np.nanmedian(values[rows[h]], axis=0) for h in hosts]), [f"{h} {tor_of.get(h, '?')}" for h in hosts]


def heatmap_png(d: Diagnosis, host_of: dict, tor_of: dict, max_rows: int = 128) -> bytes:
    """PNG bytes of the heat map (no timestamp or software tag: byte-identical for equal input)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    excess = d.excess if d.excess.shape == d.matrix.shape else np.zeros_like(d.matrix)
    own, labels = _rows(excess * 1e3, d, host_of, tor_of, max_rows)
    comm = [j for j, p in enumerate(d.phases) if p not in COMPUTE]
    if comm:
        waits, _ = _rows(d.matrix[:, comm] * 1e3, d, host_of, tor_of, max_rows)
    else:  # no operation was timed: one empty column, not a zero-width image (matplotlib warns on it)
        waits = np.zeros((len(labels), 1))
    height = 1.8 + 0.22 * len(labels)
    width = 3 + 0.55 * max(1, len(d.phases)) + 0.55 * max(1, len(comm))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(width, height), dpi=100,
                                  gridspec_kw={"width_ratios": [max(1, len(d.phases)), max(1, len(comm))]})
    im = ax.imshow(own, aspect="auto", cmap="magma", vmin=0.0, vmax=max(1.0, float(np.nanmax(own, initial=1.0))))
    ax.set_xticks(range(len(d.phases)), d.phases, rotation=50, ha="right", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    flagged = {(f.who, f.phase) for f in d.flags if f.what == "rank"}
    for i, r in enumerate(d.ranks if len(labels) == len(d.ranks) else []):
        for j, phase in enumerate(d.phases):
            if (str(r), phase) in flagged:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="cyan", linewidth=2))
    fig.colorbar(im, ax=ax, label="own excess, ms per step")
    ax.set_title("own excess time (culprits bright)", fontsize=9)
    im2 = ax2.imshow(waits, aspect="auto", cmap="Greys", vmin=0.0)
    ax2.set_xticks(range(len(comm)) if comm else [0], [d.phases[j] for j in comm] if comm else ["(none timed)"],
                   rotation=50, ha="right", fontsize=7)
    ax2.set_yticks([])
    fig.colorbar(im2, ax=ax2, label="ms per step inside the operation")
    ax2.set_title("time in operations (waits)", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
