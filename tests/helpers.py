"""Small clusters and jobs shared by the tests (importable as ``helpers``)."""

from __future__ import annotations

from rankmap.job.spec import JobSpec, ModelShape
from rankmap.topology import parse_cluster

TINY = ModelShape(layers=4, hidden=64, heads=8, seq_len=32, vocab=100)


def cluster_with_free(free: tuple, gpus: int = 2, busy_per_group: int = 1):
    groups, busy = [], []
    for g, n in enumerate(free):
        names = [f"g{g}h{i}" for i in range(n + busy_per_group)]
        groups.append(f"  - {{name: t{g}, hosts: '{','.join(names)}'}}")
        busy += names[n:]
    text = f"hosts: {{gpus: {gpus}, nics: {gpus}}}\ntor_groups:\n" + "\n".join(groups) + "\n"
    if busy:
        text += f"availability: {{busy: '{','.join(busy)}'}}\n"
    return parse_cluster(text, "brute.yaml")


def job(**kw) -> JobSpec:
    """A tiny-model job with tp=8 (one host per TP group) unless overridden."""
    return JobSpec(**{"tp": 8, "model": TINY, "num_micro_batches": 2, "source": "job.yaml", **kw})
