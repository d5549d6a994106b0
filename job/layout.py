"""Global rank <-> parallel coordinates, and the process groups of every kind.

Two rank generators in the manner of Megatron-Core (>= 0.10) ``initialize_model_parallel``
(NVIDIA Megatron-LM, ``megatron/core/parallel_state.py``: ``RankGenerator.get_ranks`` over
``generate_masked_orthogonal_rank_groups``), both over the same order string, which lists
the rank *digits* fastest-varying first:

- the *dense* generator (attention and dense layers): digits tp, cp, dp, pp (ep has size 1).
  With tp=2, pp=2, dp=4 (16 ranks) and order ``tp-cp-ep-dp-pp``, rank = tp + 2*dp + 8*pp,
  so the DP group of rank 0 is [0, 2, 4, 6] and its PP group is [0, 8];
- the *expert* generator (MoE layers, "parallel folding"): digits etp (expert tensor
  parallel, default tp), ep, edp = world / (etp*ep*pp), pp, and no cp digit: CP ranks fold
  into the expert data-parallel dimension. So EP need not divide DP, and with cp > 1 the EP
  groups differ from any dense split (the ep digit follows tp directly).

Megatron-Core asserts that both generators give the same PP groups, and that the dense and
expert data-parallel sizes agree unless pp is the slowest digit; :meth:`ParallelLayout.check`
does the same.

Two vocabularies name groups:

- :meth:`ParallelLayout.ranks` takes a Megatron-Core token over the dense digits (``"tp"``,
  ``"dp-cp"``, ``"tp-pp"`` ...) and :meth:`ParallelLayout.expert_ranks` one over the expert
  digits (``"ep"``, ``"tp-ep"``, ``"dp"``: expert tp, ep, expert dp).
- :meth:`ParallelLayout.groups` takes a group *kind* (:data:`GROUP_KINDS`) or kinds of one
  generator joined by ``-`` (``"tp-pp"``, ``"tp-dp"``). The kinds are the communicators the
  job runs collectives in:

  ======  =========  =============  ===============================================
  kind    generator  digits         group
  ======  =========  =============  ===============================================
  tp      dense      tp             tensor (and sequence) parallel
  cp      dense      cp             context parallel
  ep      expert     ep             expert parallel (all-to-all of tokens)
  dp      dense      cp, dp         gradient reduction: DP x CP (Megatron-Core ``dp-cp``)
  dp_ep   expert     dp             expert data parallel (expert gradients)
  pp      dense      pp             pipeline stages (the same in both generators)
  ======  =========  =============  ===============================================

Groups list their ranks in increasing order, which is the order in which NCCL rings
are formed from the communicator's ranks (the ring order the planner controls); rows
are ordered by their smallest rank, as ``generate_masked_orthogonal_rank_groups``
enumerates them.

Coordinates: :attr:`ParallelLayout.coord_table` has one named column per dimension (tp, cp,
dp, pp from the dense generator; ep from the expert one); :data:`COORD` maps a dimension to
its column and :meth:`ParallelLayout.column` returns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from rankmap.job.generators import DIMS, digit_values, generator_sizes, get_ranks, megatron_check, rank_digits
from rankmap.job.spec import layout_sizes

if TYPE_CHECKING:
    from rankmap.job.spec import JobSpec

__all__ = ["ParallelLayout", "GROUP_KINDS", "EXPERT_KINDS", "COORD", "kind_digits", "kind_size",
           "generator_sizes"]

# Which rank digits vary inside one group of each kind, in that kind's generator. DP
# reduces gradients over DP x CP, as Megatron-Core does (CP ranks hold the same parameters).
GROUP_KINDS = {"tp": ("tp",), "cp": ("cp",), "ep": ("ep",), "dp": ("cp", "dp"), "dp_ep": ("dp",),
               "pp": ("pp",)}
EXPERT_KINDS = ("ep", "dp_ep")   # kinds of the expert generator

# Column of each dimension in ``ParallelLayout.coord_table``.
COORD = {dim: i for i, dim in enumerate(DIMS)}


def _generator(name: str) -> str:
    """"dense" or "expert": the generator of a kind or of kinds joined by ``-`` (pp fits both)."""
    parts = name.split("-")
    for part in parts:
        if part not in GROUP_KINDS:
            raise ValueError(f"unknown group kind {part!r} in {name!r} (known: {', '.join(GROUP_KINDS)})")
    expert = {p in EXPERT_KINDS for p in parts if p != "pp"}
    if len(expert) > 1:
        raise ValueError(f"group kinds {name!r} mix the dense generator's kinds with the expert one's "
                         f"({', '.join(EXPERT_KINDS)})")
    return "expert" if expert == {True} else "dense"


def kind_digits(name: str) -> tuple[str, ...]:
    """Rank digits that vary inside a group of kind ``name`` (kinds may be joined by ``-``), in
    the kind's generator (see the module docstring).

    Raises
    ------
    ValueError
        A part is not one of :data:`GROUP_KINDS`, or the parts mix the two generators.

    Examples
    --------
    >>> kind_digits("dp"), kind_digits("tp-pp"), kind_digits("dp_ep"), kind_digits("ep-pp")
    (('cp', 'dp'), ('tp', 'pp'), ('dp',), ('ep', 'pp'))
    """
    _generator(name)
    out: list[str] = []
    for part in name.split("-"):
        out += [d for d in GROUP_KINDS[part] if d not in out]
    return tuple(d for d in DIMS if d in out)


def kind_size(sizes: dict, name: str) -> int:
    """Ranks per group of kind ``name``, from the job's sizes (no order needed).

    Examples
    --------
    >>> sizes = {"tp": 8, "cp": 2, "ep": 4, "dp": 16, "pp": 4}
    >>> kind_size(sizes, "dp"), kind_size(sizes, "dp_ep"), kind_size(sizes, "tp-pp")
    (32, 8, 32)
    """
    digit = generator_sizes(sizes, _generator(name) == "expert")
    return int(np.prod([digit[d] for d in kind_digits(name)]))


@dataclass(frozen=True)
class ParallelLayout:
    """Rank layout of a resolved job: its dense and expert rank generators.

    Parameters
    ----------
    sizes : dict
        ``{"tp": .., "cp": .., "ep": .., "dp": .., "pp": ..}``; ``dp`` is the dense size;
        an ``"etp"`` key (expert tensor parallel) defaults to tp; ``"ep_in_dp": True`` builds
        expert groups as Megatron-Core before 0.10 did (:func:`rankmap.job.spec.layout_sizes`).
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
    >>> moe = ParallelLayout({"tp": 2, "cp": 2, "ep": 4, "dp": 2, "pp": 1}, "tp-cp-ep-dp-pp")
    >>> moe.group_of("ep", 0).tolist(), moe.group_of("dp", 0).tolist()   # CP folds into expert DP
    ([0, 2, 4, 6], [0, 2, 4, 6])
    >>> moe.group_of("dp_ep", 0).tolist()
    [0]

    References
    ----------
    NVIDIA Megatron-LM, ``megatron/core/parallel_state.py``: ``RankGenerator``,
    ``generate_masked_orthogonal_rank_groups``, ``initialize_model_parallel`` (the dense
    ``decoder_rank_generator`` and the ``expert_decoder_rank_generator``).
    """

    sizes: dict
    order: str

    @classmethod
    def of(cls, job: JobSpec) -> "ParallelLayout":
        """The layout of a resolved job (``job.dp`` set, ``job.order`` not ``auto``)."""
        return cls(layout_sizes(job), job.order)

    @cached_property
    def digits(self) -> list[tuple[str, int]]:
        """``[(digit, size)]`` of the dense generator, fastest first (ep has size 1 there)."""
        return rank_digits(self.order, generator_sizes(self.sizes, expert=False))

    @cached_property
    def expert_digits(self) -> list[tuple[str, int]]:
        """``[(digit, size)]`` of the expert generator: tp is expert TP, dp expert DP, cp 1.

        Raises
        ------
        ValueError
            etp*ep*pp does not divide the world size, or the order lacks ep.
        """
        sizes = generator_sizes(self.sizes, expert=True)
        if np.prod(list(sizes.values())) != self.world_size:
            etp = sizes["tp"]
            raise ValueError(f"expert tp*ep*pp = {etp}*{self.sizes['ep']}*{self.sizes['pp']} does not divide the "
                             f"{self.world_size} ranks")
        return rank_digits(self.order, sizes)

    def check(self) -> str | None:
        """Why Megatron-Core's ``initialize_model_parallel`` would refuse these generators, or None
        (:func:`rankmap.job.generators.megatron_check`)."""
        return megatron_check(self.sizes, self.order)

    @property
    def world_size(self) -> int:
        """Number of ranks: the product of the dense digit sizes."""
        return int(np.prod([s for _, s in self.digits]))

    @cached_property
    def coord_table(self) -> np.ndarray:
        """``coords[W, 5]`` int array: columns :data:`COORD` (tp, cp, ep, dp, pp) of every rank.

        tp, cp, dp and pp are dense coordinates; ep is the rank's place in its EP group.
        """
        w = self.world_size
        table = np.zeros((w, len(COORD)), dtype=np.int64)   # filled column by column: one [W, 5] array
        for dim, values in digit_values(self.digits, w).items():
            if dim in COORD and dim != "ep":
                table[:, COORD[dim]] = values
        if self.sizes["ep"] > 1:
            table[:, COORD["ep"]] = digit_values(self.expert_digits, w)["ep"]
        return table

    def column(self, dim: str) -> np.ndarray:
        """``coord[W]``: every rank's coordinate along ``dim`` (tp, cp, ep, dp or pp).

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
        """Megatron-Core's dense ``RankGenerator.get_ranks(token)``.

        Parameters
        ----------
        token : str
            Digits joined by ``-`` in any order, e.g. ``"dp"``, ``"dp-cp"``, ``"tp-pp"``.

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
        return get_ranks(self.digits, token)

    def expert_ranks(self, token: str) -> np.ndarray:
        """Megatron-Core's expert ``RankGenerator.get_ranks(token)`` (``"tp"``: expert TP, ``"dp"``:
        expert DP, ``"tp-ep"``, ``"tp-ep-pp"`` ...); shape and order as :meth:`ranks`."""
        return get_ranks(self.expert_digits, token)

    def groups(self, kind: str) -> np.ndarray:
        """All groups of one kind as ``ranks[n_groups, group_size]``, each row ascending.

        Rows are ordered by their smallest rank. ``kind`` is one of :data:`GROUP_KINDS`
        (tp, cp, ep, dp, dp_ep, pp) or several of one generator joined by ``-``
        (``"tp-pp"``: the ranks of one model replica's TP x PP slice; ``"tp-dp"``: TP x DP x CP).

        Raises
        ------
        ValueError
            An unknown kind, or kinds of both generators.
        """
        token = "-".join(kind_digits(kind))
        return self.expert_ranks(token) if _generator(kind) == "expert" else self.ranks(token)

    def group_of(self, kind: str, rank: int) -> np.ndarray:
        """The ranks of ``rank``'s group of ``kind``, ascending."""
        table = self.groups(kind)
        return table[np.nonzero((table == rank).any(axis=1))[0][0]]
