"""This host's node rank in a rank map, and the torchrun flags that start its agent: for pods
whose rank must follow the map (a Kubernetes JobSet, Kubeflow Trainer / PyTorchJob), where the
scheduler picks the nodes and each pod must find its own place at start-up. No torch here.

A pod learns its node's name from the downward API (``spec.nodeName`` as an environment
variable, [1]_); ``rankmap node-rank --host "$NODE_NAME"`` then prints the node rank and the
static-rendezvous torchrun flags (``--node-rank``, ``--master-addr`` of node 0, [2]_). The
name is matched exactly first; a short name or FQDN only when exactly one host of the map
matches it.

References
----------
.. [1] Kubernetes documentation, "Expose Pod Information to Containers Through Environment
   Variables" (``fieldRef: spec.nodeName``).
   https://kubernetes.io/docs/tasks/inject-data-application/environment-variable-expose-pod-information/
.. [2] PyTorch documentation, "torchrun (Elastic Launch)": ``--node-rank`` with the static
   rendezvous. https://pytorch.org/docs/stable/elastic/run.html
"""

from __future__ import annotations

from rankmap.errors import LaunchError
from rankmap.job.rank_map import RankMap
from rankmap.launch.torchrun import torchrun_args
from rankmap.names import host_identity

__all__ = ["node_rank_of", "node_rank_flags"]


def _short(name: str) -> str:
    return host_identity(name.split(".")[0])


def node_rank_of(rm: RankMap, host: str) -> int:
    """The node rank of ``host``: an exact match, else the one host with the same short name.

    Raises
    ------
    LaunchError
        No host of the map matches, or a short name matches several (they are named).

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> rm = RankMap(job=JobSpec(tp=2, dp=2, num_micro_batches=1), cluster_name="c", cluster_hash="x",
    ...              hosts=("gpu-b.dc1", "gpu-a.dc1"), tor_groups=("t", "t"), rails=((0, 1), (0, 1)),
    ...              nproc_per_node=2)
    >>> node_rank_of(rm, "gpu-a.dc1"), node_rank_of(rm, "gpu-a"), node_rank_of(rm, "GPU-B.dc1.example.org")
    (1, 1, 0)
    """
    exact = [n for n, h in enumerate(rm.hosts) if host_identity(h) == host_identity(host)]  # names ignore case
    if exact:
        return exact[0]
    matches = [n for n, h in enumerate(rm.hosts) if _short(h) == _short(host)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise LaunchError(f"host {host!r} is ambiguous: its short name matches {', '.join(rm.hosts[n] for n in matches)}"
                          f" in the rank map; give the exact name")
    raise LaunchError(f"host {host!r} is not in the rank map ({', '.join(rm.hosts[:4])}"
                      f"{', ...' if len(rm.hosts) > 4 else ''})")


def node_rank_flags(rm: RankMap, host: str, master_port: int = 29500, master_addr: str | None = None) -> tuple:
    """``(node rank, torchrun flags)`` for ``host`` (static rendezvous, master = node 0's host)."""
    node = node_rank_of(rm, host)
    return node, torchrun_args(rm, node, master_addr or rm.hosts[0], master_port)
