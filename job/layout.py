"""Global rank <-> parallel coordinates, and the process groups of every kind.

A rank generator in the manner of Megatron-Core's ``RankGenerator``
(NVIDIA Megatron-LM, ``megatron/core/parallel_state.py``: ``RankGenerator.get_ranks`` over
``generate_masked_orthogonal_rank_groups``). An order string such as ``"tp-cp-ep-dp-pp"``
lists the rank *digits* fastest-varying first: with tp=2, pp=2, dp=4 (16 ranks),
rank = tp + 2*dp + 8*pp, so the DP group of rank 0 is [0, 2, 4, 6] and its PP group is
[0, 8]. Expert parallelism is carved out of data parallelism (Megatron-Core's
expert-data-parallel): the ``dp`` digit has size ``dp / ep``, and the dense DP
coordinate combines the ``ep`` and ``dp`` digits.

Two vocabularies name groups:

- :meth:`ParallelLayout.ranks` takes a Megatron-Core token over the digits (``"tp"``,
  ``"dp-cp"``, ``"tp-pp"`` ...): the groups of ranks that differ only in those digits.
- :meth:`ParallelLayout.groups` takes a group *kind* (:data:`GROUP_KINDS`) or kinds joined
  by ``-`` (``"tp-pp"``, ``"tp-dp"``), whose digits are the union of the parts' digits.
  The kinds are the communicators the job runs collectives in:

  ======  =============  ====================================================
  kind    digits         group
  ======  =============  ====================================================
  tp      tp             tensor (and sequence) parallel
  cp      cp             context parallel
  ep      ep             expert parallel (all-to-all of tokens)
  dp      cp, ep, dp     gradient reduction: DP x CP (Megatron-Core ``dp-cp``)
  dp_ep   dp             expert data parallel: DP without the EP ranks
  pp      pp             pipeline stages
  ======  =============  ====================================================

Groups list their ranks in increasing order, which is the order in which NCCL rings
are formed from the communicator's ranks (the ring order the planner controls); rows
are ordered by their smallest rank, as ``generate_masked_orthogonal_rank_groups``
enumerates them.

Coordinates: :attr:`ParallelLayout.coord_table` has one named column per dimension;
:data:`COORD` maps a dimension to its column and :meth:`ParallelLayout.column` returns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rankmap.job.spec import DIMS, JobSpec

__all__ = ["ParallelLayout", "GROUP_KINDS", "COORD", "kind_digits", "kind_size"]

# Which rank digits vary inside one group of each kind. DP reduces gradients over
# DP x CP, as Megatron-Core does (CP ranks hold the same parameters); the expert
# data-parallel group (dp_ep) is the ``dp`` digit alone.
GROUP_KINDS = {"tp": ("tp",), "cp": ("cp",), "ep": ("ep",), "dp": ("cp", "ep", "dp"), "dp_ep": ("dp",),
               "pp": ("pp",)}

# Column of each dimension in ``ParallelLayout.coord_table`` (dp: the dense DP coordinate).
COORD = {dim: i for i, dim in enumerate(DIMS)}


def kind_digits(name: str) -> tuple[str, ...]:
    """Rank digits that vary inside a group of kind ``name`` (kinds may be joined by ``-``).

    Raises
    ------
    ValueError
        A part is not one of :data:`GROUP_KINDS`.

    Examples
    --------
    >>> kind_digits("dp"), kind_digits("tp-pp"), kind_digits("dp-ep")
    (('cp', 'ep', 'dp'), ('tp', 'pp'), ('cp', 'ep', 'dp'))
    """
    out: list[str] = []
    for part in name.split("-"):
        if part not in GROUP_KINDS:
            raise ValueError(f"unknown group kind {part!r} in {name!r} (known: {', '.join(GROUP_KINDS)})")
        out += [d for d in GROUP_KINDS[part] if d not in out]
    return tuple(d for d in DIMS if d in out)


def kind_size(sizes: dict, name: str) -> int:
    """Ranks per group of kind ``name``, from the job's sizes (``dp`` dense; no order needed).

    Examples
    --------
    >>> sizes = {"tp": 8, "cp": 2, "ep": 4, "dp": 16, "pp": 4}
    >>> kind_size(sizes, "dp"), kind_size(sizes, "dp_ep"), kind_size(sizes, "tp-pp")
    (32, 4, 32)
    """
    digit = {"tp": sizes["tp"], "cp": sizes["cp"], "ep": sizes["ep"], "dp": sizes["dp"] // sizes["ep"],
             "pp": sizes["pp"]}
    return int(np.prod([digit[d] for d in kind_digits(name)]))


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
    >>> lay.groups("tp-pp")[0].tolist(), lay.column("pp")[[0, 8]].tolist()
    ([0, 1, 8, 9], [0, 1])
    >>> lay.coords(9)
    {'tp': 1, 'cp': 0, 'ep': 0, 'dp': 0, 'pp': 1}

    References
    ----------
    NVIDIA Megatron-LM, ``megatron/core/parallel_state.py``: ``RankGenerator``,
    ``generate_masked_orthogonal_rank_groups``.
    """

    sizes: dict
    order: str

    @classmethod
    def of(cls, job: JobSpec) -> "ParallelLayout":
        """The layout of a resolved job (``job.dp`` set, ``job.order`` not ``auto``)."""
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
        """Number of ranks: the product of the digit sizes."""
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
        """``coords[W, 5]`` int array: columns :data:`COORD` (tp, cp, ep, dp, pp; dense dp) of every rank."""
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
        cols = {dim: digit_val.get(dim, zero) for dim in DIMS}
        cols["dp"] = ep + n_ep * dpi if ep_first else dpi + n_dpi * ep
        return np.stack([cols[dim] for dim in COORD], axis=1).astype(np.int64)

    def column(self, dim: str) -> np.ndarray:
        """``coord[W]``: every rank's coordinate along ``dim`` (tp, cp, ep, dp or pp; dp dense).

        Raises
        ------
        KeyError
            ``dim`` is not one of :data:`COORD`.
        """
        return self.coord_table[:, COORD[dim]]

    def coords(self, rank: int) -> dict[str, int]:
        """Coordinates of one rank, e.g. ``{"tp": 1, "cp": 0, "ep": 0, "dp": 3, "pp": 0}``."""
        return {d: int(v) for d, v in zip(COORD, self.coord_table[rank])}

    def ranks(self, token: str) -> np.ndarray:
        """Megatron-Core's ``RankGenerator.get_ranks(token)`` over this layout's digits.

        Parameters
        ----------
        token : str
            Digits joined by ``-`` in any order, e.g. ``"dp"``, ``"dp-cp"``, ``"tp-pp"``.
            Here the ``dp`` digit is the expert-data-parallel one (size ``dp / ep``); with
            ``ep == 1`` it is Megatron-Core's dense ``dp``.

        Returns
        -------
        ndarray
            ``ranks[n_groups, group_size]``: the ranks that differ only in those digits;
            rows ascending, ordered by their smallest rank.

        Raises
        ------
        ValueError
            A part of ``token`` is not a dimension (tp, cp, ep, dp, pp).
        """
        parts = token.split("-")
        unknown = [p for p in parts if p not in DIMS]
        if unknown:
            raise ValueError(f"unknown rank digit {unknown[0]!r} in {token!r} (known: {', '.join(DIMS)})")
        present = dict(self.digits)
        axes = [self._axis(d) for d in DIMS if d in parts and d in present]
        rest = [a for a in range(self._grid.ndim) if a not in axes]
        size = int(np.prod([self._grid.shape[a] for a in axes])) if axes else 1
        table = np.transpose(self._grid, rest + axes).reshape(-1, size)
        table = np.sort(table, axis=1)
        return table[np.argsort(table[:, 0], kind="stable")]

    def groups(self, kind: str) -> np.ndarray:
        """All groups of one kind as ``ranks[n_groups, group_size]``, each row ascending.

        Rows are ordered by their smallest rank. ``kind`` is one of :data:`GROUP_KINDS`
        (tp, cp, ep, dp, dp_ep, pp) or several joined by ``-`` (``"tp-pp"``: the ranks of
        one model replica's TP x PP slice; ``"tp-dp"``: TP x DP x CP).

        Raises
        ------
        ValueError
            An unknown kind.
        """
        return self.ranks("-".join(kind_digits(kind)))

    def group_of(self, kind: str, rank: int) -> np.ndarray:
        """The ranks of ``rank``'s group of ``kind``, ascending."""
        table = self.groups(kind)
        return table[np.nonzero((table == rank).any(axis=1))[0][0]]
