"""What the planner returns: candidates (host orders with their cost) and the plan result."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from rankmap.job.rank_map import RankMap
from rankmap.job.spec import JobSpec
from rankmap.placement.metrics import PlacementMetrics

__all__ = ["Candidate", "PlanResult", "metrics_row", "with_summary"]


@dataclass(frozen=True)
class Candidate:
    """One host order and what it costs."""

    name: str
    hosts: tuple
    metrics: PlacementMetrics
    solve_time_s: float = 0.0


@dataclass(frozen=True)
class PlanResult:
    """Our plan, the baselines, and how good the plan is.

    ``lower_bound_bytes`` bounds the optimised cost (tier-weighted bytes,
    :attr:`rankmap.placement.metrics.PlacementMetrics.cost`) of every placement of this job
    on these hosts; ``gap = (ours - bound) / ours``.
    """

    job: JobSpec
    rankmap: RankMap
    ours: Candidate
    baselines: tuple
    lower_bound_bytes: float
    bound_method: str
    solver_status: str
    notes: tuple = field(default_factory=tuple)
    moved_hosts: int | None = None
    tier_weights: tuple = ()

    @property
    def has_bound(self) -> bool:
        """False when no bound was computed (``bound_method`` "none ...": hosts of different
        GPU counts are packed, no search runs); ``lower_bound_bytes`` is then 0, not a bound
        worth a gap, and the summary's ``gap_to_bound`` is null."""
        return not self.bound_method.startswith("none")

    @property
    def gap(self) -> float:
        cost = self.ours.metrics.cost
        return max(0.0, (cost - self.lower_bound_bytes) / cost) if cost > 0 else 0.0

    def candidate_rankmap(self, cluster, candidate: Candidate) -> RankMap:
        """The rank map that launching ``candidate``'s host order gives, under the planner's rule.

        Every host runs ``nproc_per_node`` ranks; on hosts of different GPU counts each host
        runs whole TP groups (as many as fit) and the last host what is left, as the planned
        map does (see :mod:`rankmap.placement.packing`).

        Parameters
        ----------
        cluster : Cluster
            The cluster the plan was made for.
        candidate : Candidate
            ``self.ours`` or one of ``self.baselines``.

        Returns
        -------
        RankMap
        """
        gpn = self.rankmap.nproc_per_node
        if self.rankmap.uniform:
            return RankMap.from_hosts(self.job, cluster, list(candidate.hosts), gpn)
        tp, left, counts = self.job.tp, self.job.world_size, []
        for name in candidate.hosts:
            counts.append(min(cluster.host(name).gpus // tp * tp, left))
            left -= counts[-1]
        return RankMap.from_hosts(self.job, cluster, list(candidate.hosts), max(counts), nprocs=counts)


def metrics_row(c: Candidate, bound_bytes: float | None) -> dict:
    """One candidate's figures, as in the ``summary`` of rankmap.json and the CLI table
    (``bound_bytes`` None: no bound, ``gap_to_bound`` None).

    Per tier (lowest first, as :func:`rankmap.placement.tier_weights.crossed_tiers` names
    them): bytes crossing it, and the most domains below it that any DP or PP group spans
    (Arnold's spread). The gap is on the optimised cost, ``weighted_bytes``. Solve time is
    left out: files must be byte-identical across runs."""
    m = c.metrics
    cost = m.cost
    return {
        "cross_tor_bytes": m.cross_tor_bytes,
        "weighted_bytes": cost,
        "tier_bytes": list(m.tier_bytes),
        "max_dp_spread_per_tier": list(m.tier_spread.get("dp", ())),
        "max_pp_spread_per_tier": list(m.tier_spread.get("pp", ())),
        "dp_edges_cross_tor": m.cross_edges["dp"],
        "pp_edges_cross_tor": m.cross_edges["pp"],
        "max_dp_spread_tor_groups": m.max_spread["dp"],
        "max_uplink_bytes": m.max_uplink_bytes,
        "gap_to_bound": None if bound_bytes is None else (max(0.0, (cost - bound_bytes) / cost) if cost > 0 else 0.0),
    }


def with_summary(result: PlanResult) -> PlanResult:
    bound = result.lower_bound_bytes if result.has_bound else None
    summary = {
        "plan": metrics_row(result.ours, bound),
        "lower_bound_bytes": result.lower_bound_bytes,
        "bound_method": result.bound_method,
        "solver_status": result.solver_status,
        "tier_weights": list(result.tier_weights),
        "baselines": {b.name: metrics_row(b, bound) for b in result.baselines},
    }
    if result.moved_hosts is not None:
        summary["moved_hosts"] = result.moved_hosts
    rm = dataclasses.replace(result.rankmap, summary=summary)
    return dataclasses.replace(result, rankmap=rm)
