"""Global rank <-> parallel coordinates for any Megatron-style order string.

An order string such as ``"tp-cp-ep-dp-pp"`` lists the rank dimensions fastest-varying
first, as Megatron-Core's ``RankGenerator`` does: with tp=2, pp=2, dp=4 (16 ranks),
rank = tp + 2*dp + 8*pp, so the DP group of rank 0 is [0, 2, 4, 6] and its PP group is
[0, 8]. Expert parallelism is carved out of data parallelism (Megatron-Core's
expert-data-parallel): the dense DP coordinate combines the ``ep`` digit and the
``dp`` digit of size ``dp / ep``.

Groups list their ranks in increasing order, which is the order in which NCCL rings
are formed from the communicator's ranks (the ring order the planner controls).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rankmap.job.spec import DIMS, JobSpec

__all__ = ["ParallelLayout", "GROUP_KINDS"]

# Which rank digits vary inside one group of each kind. DP reduces gradients over
# DP x CP, as Megatron-Core does (CP ranks hold the same parameters).
GROUP_KINDS = {"tp": ("tp",), "cp": ("cp",), "ep": ("ep",), "dp": ("cp", "ep", "dp"), "pp": ("pp",)}


@dataclass(frozen=True)
class ParallelLayout:
    """Rank layout of a resolved job.

    Parameters
    ----------
    sizes : dict
        ``{"tp": .., "cp": .., "ep": .., "dp": .., "pp": ..}``; ``dp`` is the dense size.
    order : str
        Order string, fastest first; dims missing from it must have size 1.

    Examples
    --------
    >>> lay = ParallelLayout({"tp": 2, "cp": 1, "ep": 1, "dp": 4, "pp": 2}, "tp-cp-ep-dp-pp")
    >>> lay.group_of("dp", 0).tolist(), lay.group_of("pp", 0).tolist()
    ([0, 2, 4, 6], [0, 8])
    >>> lay.coords(9)
    {'tp': 1, 'cp': 0, 'ep': 0, 'dp': 0, 'pp': 1}
    """

    sizes: dict
    order: str

    @classmethod
    def of(cls, job: JobSpec) -> "ParallelLayout":
        return cls(job.sizes(), job.order)

    @cached_property
    def digits(self) -> list[tuple[str, int]]:
        """``[(digit, size)]`` fastest first; the ``dp`` digit has size ``dp / ep``."""
        out = []
        for dim in self.order.split("-"):
            size = self.sizes[dim] // self.sizes["ep"] if dim == "dp" else self.sizes[dim]
            out.append((dim, size))
        for dim in DIMS:
            if dim not in self.order.split("-") and self.sizes[dim] != 1:
                raise ValueError(f"order {self.order!r} lacks {dim} of size {self.sizes[dim]}")
        return out

    @property
    def world_size(self) -> int:
        return int(np.prod([s for _, s in self.digits]))

    @cached_property
    def _grid(self) -> np.ndarray:
        # Axis i of the C-ordered array is digit len-1-i (the first digit varies fastest).
        shape = [s for _, s in reversed(self.digits)]
        return np.arange(self.world_size).reshape(shape)

    def _axis(self, digit: str) -> int:
        names = [d for d, _ in self.digits]
        return len(names) - 1 - names.index(digit)

    @cached_property
    def coord_table(self) -> np.ndarray:
        """``coords[W, 5]`` int array: columns tp, cp, ep, dp, pp (dense dp) of every rank."""
        w = self.world_size
        digit_val: dict[str, np.ndarray] = {}
        stride = 1
        ranks = np.arange(w)
        for name, size in self.digits:
            digit_val[name] = (ranks // stride) % size
            stride *= size
        zero = np.zeros(w, dtype=np.int64)
        ep = digit_val.get("ep", zero)
        dpi = digit_val.get("dp", zero)
        names = [d for d, _ in self.digits]
        n_ep, n_dpi = self.sizes["ep"], self.sizes["dp"] // self.sizes["ep"]
        ep_first = "ep" in names and "dp" in names and names.index("ep") < names.index("dp")
        dense_dp = ep + n_ep * dpi if ep_first else dpi + n_dpi * ep
        cols = [digit_val.get("tp", zero), digit_val.get("cp", zero), ep, dense_dp, digit_val.get("pp", zero)]
        return np.stack(cols, axis=1).astype(np.int64)

    def coords(self, rank: int) -> dict[str, int]:
        """Coordinates of one rank, e.g. ``{"tp": 1, "cp": 0, "ep": 0, "dp": 3, "pp": 0}``."""
        return {d: int(v) for d, v in zip(DIMS, self.coord_table[rank])}

    def groups(self, kind: str) -> np.ndarray:
        """All groups of one kind as ``ranks[n_groups, group_size]``, each row ascending.

        Rows are ordered by their smallest rank. ``kind`` is one of tp, cp, ep, dp, pp.
        """
        varying = [d for d in GROUP_KINDS[kind] if d in dict(self.digits)]
        axes = [self._axis(d) for d in varying]
        rest = [a for a in range(self._grid.ndim) if a not in axes]
        size = int(np.prod([self._grid.shape[a] for a in axes])) if axes else 1
        table = np.transpose(self._grid, rest + axes).reshape(-1, size)
        table = np.sort(table, axis=1)
        return table[np.argsort(table[:, 0], kind="stable")]

    def group_of(self, kind: str, rank: int) -> np.ndarray:
        """The ranks of ``rank``'s group of ``kind``, ascending."""
        table = self.groups(kind)
        return table[np.nonzero((table == rank).any(axis=1))[0][0]]
