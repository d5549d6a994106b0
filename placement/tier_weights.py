"""How much a byte crossing each tier of the fabric costs: the planner's tier weights.

A byte whose two ranks sit in different level-``l`` domains (ToR groups at level 0, pods
at level 1, ...) leaves its level-``l`` domain through that domain's uplinks and crosses
the tier above (the spine above ToR groups, the core above pods). The tiers a job can
cross are those above levels ``0 .. depth - 1``; the top level's domains are islands,
which no job spans.

Default rule: a tier's weight is how scarce its bandwidth is per host below it, relative
to the ToR uplinks, i.e. the product of the oversubscription ratios (down over up
bandwidth, ``Cluster.tier_figures``) of the domains a byte leaves above the ToR group::

    w(tier above level 0) = 1
    w(tier above level l) = prod_{j=1..l} max(1, ratio_j)

On MegaScale's 1:1 three-layer Clos (NSDI 2024, §3.3) every tier weighs 1, so a byte
crossing pods counts twice (it crosses the spine and the core); under 3:1 spine uplinks
(Arnold, arXiv 2509.15940: bandwidth shrinks at higher tiers) the core weighs 3. Users
set weights by tier name, e.g. ``spine=1,core=3``.
"""

from __future__ import annotations

from rankmap.errors import SpecError
from rankmap.topology.model import Cluster

__all__ = ["crossed_tiers", "default_tier_weights", "tier_weights"]


def crossed_tiers(cluster: Cluster) -> tuple[str, ...]:
    """Names of the tiers a job can cross, lowest first: ``[L]`` for levels ``0 .. depth-1``.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> crossed_tiers(parse_cluster("tor_groups: [{name: a, hosts: 'x[1-2]'}]"))
    ('spine',)
    """
    figures = cluster.tier_figures()
    return tuple(f.name for f in figures[1:cluster.depth + 1])


def default_tier_weights(cluster: Cluster) -> tuple[float, ...]:
    """``w[L]``: the default weight of each crossed tier (rule in the module docstring)."""
    figures = cluster.tier_figures()
    out, w = [], 1.0
    for level in range(cluster.depth):
        if level >= 1:
            ratio = figures[level].ratio
            w *= max(1.0, ratio if ratio is not None else 1.0)
        out.append(w)
    return tuple(out)


def tier_weights(cluster: Cluster, given: dict | None = None) -> tuple[float, ...]:
    """``w[L]``: the defaults, overridden by ``given`` (``{tier name: weight}``).

    Raises
    ------
    SpecError
        A name that is not a crossed tier of ``cluster``, or a weight that is negative, not finite or
        above :data:`~rankmap.placement.objectives.MAX_WEIGHT` (key ``--tier-weights``).
    """
    from rankmap.placement.objectives import MAX_WEIGHT

    names = crossed_tiers(cluster)
    weights = list(default_tier_weights(cluster))
    for name, w in (given or {}).items():
        if name not in names:
            raise SpecError(f"unknown tier {name!r} in tier weights (tiers of {cluster.name!r}: "
                            f"{', '.join(names)})", key="--tier-weights")
        if not 0 <= w <= MAX_WEIGHT:  # NaN fails both
            raise SpecError(f"tier weight {name}={w:g} must be a number >= 0 and <= {MAX_WEIGHT:g}",
                            key="--tier-weights")
        weights[names.index(name)] = float(w)
    return tuple(weights)

