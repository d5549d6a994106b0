"""Megatron-Core's rank generators as arrays: digit sizes, rank groups, and its assertions.

The arithmetic under :mod:`rankmap.job.layout` (which names groups by kind) and
:mod:`rankmap.job.spec` (which checks jobs): a generator is a list of ``(digit, size)``
pairs, fastest first; :func:`get_ranks` is ``RankGenerator.get_ranks``.

References
----------
NVIDIA Megatron-LM, ``megatron/core/parallel_state.py``: ``RankGenerator``,
``generate_masked_orthogonal_rank_groups``, ``initialize_model_parallel``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DIMS", "generator_sizes", "rank_digits", "get_ranks", "digit_values", "megatron_check"]

DIMS = ("tp", "cp", "ep", "dp", "pp")


def generator_sizes(sizes: dict, expert: bool) -> dict[str, int]:
    """Digit sizes of the dense or expert generator, from the job's sizes.

    ``sizes`` has tp, cp, ep, dp (dense) and pp, and optionally etp (default tp). The
    expert generator has tp = etp, cp = 1 and dp = tp*cp*dp / (etp*ep) (expert DP), as
    Megatron-Core >= 0.10 builds it. With ``sizes["ep_in_dp"]`` true it is the generator of
    Megatron-Core before 0.10 (``RankGenerator.get_ranks(token, independent_ep=True)``): the
    dense digits with an ep digit and dp / ep in place of dp (EP carved out of DP, CP kept).

    Examples
    --------
    >>> s = {"tp": 4, "cp": 2, "ep": 8, "dp": 4, "pp": 1}
    >>> generator_sizes(s, False), generator_sizes(s, True)
    ({'tp': 4, 'cp': 2, 'ep': 1, 'dp': 4, 'pp': 1}, {'tp': 4, 'cp': 1, 'ep': 8, 'dp': 1, 'pp': 1})
    """
    if not expert:
        return {"tp": sizes["tp"], "cp": sizes["cp"], "ep": 1, "dp": sizes["dp"], "pp": sizes["pp"]}
    if sizes.get("ep_in_dp"):
        return {"tp": sizes["tp"], "cp": sizes["cp"], "ep": sizes["ep"], "dp": sizes["dp"] // sizes["ep"],
                "pp": sizes["pp"]}
    etp = sizes.get("etp") or sizes["tp"]
    return {"tp": etp, "cp": 1, "ep": sizes["ep"], "dp": sizes["tp"] * sizes["cp"] * sizes["dp"] // (etp * sizes["ep"]),
            "pp": sizes["pp"]}


def rank_digits(order: str, size: dict[str, int]) -> list[tuple[str, int]]:
    """``[(digit, size)]`` fastest first, as ``RankGenerator`` orders them (dims missing from the
    order must have size 1)."""
    names = order.split("-")
    for dim in DIMS:
        if dim not in names and size[dim] != 1:
            raise ValueError(f"order {order!r} lacks {dim} of size {size[dim]}")
    return [(dim, size[dim]) for dim in names]


def _grid(digits: list[tuple[str, int]]) -> np.ndarray:
    # Axis i of the C-ordered array is digit len-1-i (the first digit varies fastest).
    shape = [s for _, s in reversed(digits)]
    return np.arange(int(np.prod(shape))).reshape(shape)


def get_ranks(digits: list[tuple[str, int]], token: str) -> np.ndarray:
    """``RankGenerator.get_ranks(token)``: ``ranks[n_groups, group_size]``, rows ascending, by smallest rank."""
    parts = token.split("-")
    unknown = [p for p in parts if p not in DIMS]
    if unknown:
        raise ValueError(f"unknown rank digit {unknown[0]!r} in {token!r} (known: {', '.join(DIMS)})")
    grid = _grid(digits)
    names = [d for d, _ in digits]
    axes = [len(names) - 1 - names.index(d) for d in DIMS if d in parts and d in names]
    rest = [a for a in range(grid.ndim) if a not in axes]
    size = int(np.prod([grid.shape[a] for a in axes])) if axes else 1
    table = np.sort(np.transpose(grid, rest + axes).reshape(-1, size), axis=1)
    return table[np.argsort(table[:, 0], kind="stable")]


def digit_values(digits: list[tuple[str, int]], world: int) -> dict[str, np.ndarray]:
    out, stride, ranks = {}, 1, np.arange(world)
    for name, size in digits:
        out[name] = (ranks // stride) % size
        stride *= size
    return out


def megatron_check(sizes: dict, order: str) -> str | None:
    """Why Megatron-Core's ``initialize_model_parallel`` would refuse these sizes and order, or None.

    Its checks (0.10 and later): the world size is a multiple of etp*ep*pp; the PP groups of the dense and the
    expert generator are equal; and unless the order ends in pp (or pp = 1) the expert DP
    size equals the dense one.

    Examples
    --------
    >>> megatron_check({"tp": 2, "cp": 2, "ep": 8, "etp": 1, "dp": 2, "pp": 1}, "tp-cp-ep-dp-pp") is None
    True
    >>> megatron_check({"tp": 2, "cp": 1, "ep": 3, "dp": 4, "pp": 1}, "tp-cp-ep-dp-pp")
    'expert tp*ep*pp = 2*3*1 does not divide the 8 ranks'
    """
    if sizes.get("ep_in_dp"):  # Megatron-Core < 0.10: EP carved out of DP, no expert TP of its own
        if sizes["dp"] % sizes["ep"]:
            return f"ep={sizes['ep']} must divide dp={sizes['dp']} (Megatron-Core before 0.10 carves EP out of DP)"
        if sizes.get("etp") not in (None, sizes["tp"]):
            return "an expert tensor-parallel size of its own needs Megatron-Core 0.10 or later"
        try:
            rank_digits(order, generator_sizes(sizes, True))
        except ValueError as exc:
            return str(exc)
        return None
    dense_sizes, expert_sizes = generator_sizes(sizes, False), generator_sizes(sizes, True)
    world = int(np.prod(list(dense_sizes.values())))
    if int(np.prod(list(expert_sizes.values()))) != world:
        return (f"expert tp*ep*pp = {expert_sizes['tp']}*{sizes['ep']}*{sizes['pp']} does not divide the "
                f"{world} ranks")
    try:
        dense, expert = rank_digits(order, dense_sizes), rank_digits(order, expert_sizes)
    except ValueError as exc:
        return str(exc)
    edp, dp, pp = expert_sizes["dp"], sizes["dp"], sizes["pp"]
    if not (order.endswith("pp") or pp == 1 or edp == dp):
        return (f"order {order!r} does not end in pp, so the expert data-parallel size ({edp}) must equal "
                f"the dense one ({dp})")
    if not np.array_equal(get_ranks(dense, "pp"), get_ranks(expert, "pp")):
        return f"the expert and dense pipeline groups differ under order {order!r} (expert tp != tp)"
    return None
