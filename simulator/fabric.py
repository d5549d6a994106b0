"""The switch tiers above the rail ToRs as the simulator wires them: levels, planes, cables.

Level 0 is the rail ToRs (one per ToR group and rail); level ``t`` (1..depth) is
``Cluster.fabric_tiers[t - 1]``, built once per domain of ``Cluster.tier_domains(t)`` and,
when its planes are per rail, once per rail in every domain (NVIDIA's rail-optimised
reference designs; rails share the tier as in MegaScale, NSDI 2024, §3.3, otherwise).

Cabling is the regular Clos rule of :func:`rankmap.topology.graph.to_networkx`, one level
up: the ``C`` up cables of a unit are numbered ``k = 0..C-1`` (a rail ToR's uplinks; for a
level-``t`` domain plane, switch ``s``'s port ``j`` is ``k = s * up_ports + j``) and cable
``k`` ends on switch ``k mod S`` of the level above (``S`` switches per domain plane). So
switch ``s'`` above reaches a unit below through the cables ``k = s', s' + S, ...`` below
``C``; a link carries one speed (``Tier.up_gbps`` = the next tier's ``down_gbps``,
``Cluster`` validates it). A spec without tiers gets ``derived_tiers``: one flat spine
whose switch ids and salts are those of the one-spine model, so old specs route as before.

References
----------
MegaScale (Jiang et al., NSDI 2024), §3.3: three-layer Clos, 64 x 400G switches, 1:1 per layer.
C. Hopps, RFC 2992 (2000), "Analysis of an Equal-Cost Multi-Path Algorithm": hash-threshold next hops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankmap.errors import RankmapError
from rankmap.topology.model import Cluster

__all__ = ["Level", "Fabric"]


@dataclass(frozen=True, eq=False)
class Level:
    """One switch level above the rail ToRs.

    Attributes
    ----------
    name : str
        The tier's name ("spine", "core", ...).
    switches : int
        Switches per domain and plane (``S``).
    planes : int
        Planes per domain: the rail count with rail planes, else 1.
    rail : bool
        Whether every rail has its own plane of this level.
    domains : int
        Domains at this level (``D``).
    up_ports : int
        Up cables per switch to the level above; 0 at the top.
    up_gbps : float
        Speed of one up cable, Gb/s, one direction.
    group_domain : ndarray
        ``group_domain[G]``: domain of every ToR group at this level.
    switch_offset : int
        Global id of this level's first switch (rail ToRs are ``0 .. G * rails - 1``).
    """

    name: str
    switches: int
    planes: int
    rail: bool
    domains: int
    up_ports: int
    up_gbps: float
    group_domain: np.ndarray
    switch_offset: int

    @property
    def cables_per_plane(self) -> int:
        """Up cables of one domain plane, ``switches * up_ports``."""
        return self.switches * self.up_ports

    @property
    def n_cables(self) -> int:
        """Up cables of the whole level (one direction)."""
        return self.domains * self.planes * self.cables_per_plane

    def plane(self, nic) -> np.ndarray:
        """Plane of this level that NIC (rail) ``nic`` reaches (0 when rails share it)."""
        return np.asarray(nic) if self.rail else np.zeros_like(np.asarray(nic))

    def domain_plane(self, group, nic) -> np.ndarray:
        """Index ``domain * planes + plane`` of the domain plane above ToR ``(group, nic)``."""
        return self.group_domain[np.asarray(group)] * self.planes + self.plane(nic)

    def switch_id(self, domain_plane, switch) -> np.ndarray:
        """Global switch id (the salt's input) of ``switch`` in ``domain_plane``."""
        return self.switch_offset + np.asarray(domain_plane) * self.switches + switch


class Fabric:
    """The levels of a cluster's fabric, lowest first, with the climb level of flows.

    Parameters
    ----------
    cluster : Cluster

    Attributes
    ----------
    levels : tuple of Level
        Level 1 first. A cluster with no level at all (``switches=()``) gets one spine of
        ``spine.switches`` over every ToR group, the one-spine model it always had.

    Raises
    ------
    RankmapError
        A level has fewer up cables per domain plane than the level above has switches
        per plane, so some upper switch could not reach down (deeper than one level).

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> c = parse_cluster("tor_groups: [{name: a, hosts: x1}, {name: b, hosts: y1}]")
    >>> [(lv.name, lv.switches, lv.domains) for lv in Fabric(c).levels]
    [('spine', 32, 1)]
    """

    def __init__(self, cluster: Cluster):
        self.rails = max(cluster.rails, 1)
        self.uplinks = cluster.links.tor_uplinks
        n_groups = len(cluster.tor_groups)
        tiers = cluster.fabric_tiers
        offset = n_groups * self.rails
        levels = []
        if not tiers:
            levels.append(Level(name="spine", switches=max(cluster.spine.switches, 1), planes=1, rail=False,
                                domains=1, up_ports=0, up_gbps=cluster.links.tor_uplink_gbps,
                                group_domain=np.zeros(n_groups, dtype=np.int64), switch_offset=offset))
        for t, tier in enumerate(tiers, 1):
            rail = tier.planes == "rail"
            level = Level(name=tier.name, switches=tier.switches, planes=self.rails if rail else 1, rail=rail,
                          domains=len(cluster.tier_domains(t)),
                          up_ports=tier.up_ports if t < len(tiers) else 0, up_gbps=float(tier.up_gbps),
                          group_domain=np.array(cluster.domain_index(t), dtype=np.int64), switch_offset=offset)
            offset += level.domains * level.planes * level.switches
            levels.append(level)
        self.levels = tuple(levels)
        self._check()

    @property
    def depth(self) -> int:
        return len(self.levels)

    def cables_below(self, t: int) -> int:
        """Up cables of one unit below level ``t``: a rail ToR's uplinks (t = 1), else a domain plane's."""
        return self.uplinks if t == 1 else self.levels[t - 2].cables_per_plane

    def _check(self) -> None:
        if self.depth < 2:
            return
        for t, level in enumerate(self.levels, 1):
            below = self.cables_below(t)
            if below < level.switches:
                raise RankmapError(f"tier {level.name!r} has {level.switches} switches per plane but each unit "
                                   f"below sends only {below} up cables: the simulator needs every switch of a "
                                   "tier cabled to every unit below it")

    def climb(self, src_group, src_nic, dst_group, dst_nic) -> np.ndarray:
        """Lowest level whose switches join each pair of rail ToRs (``level[F]``, 0 = same ToR).

        A level joins two ToRs when they share its domain and, with rail planes, their
        rails are the same; a flow climbs to it and no higher.

        Raises
        ------
        RankmapError
            Some pair has no common level (different islands, or different rails on rail
            planes up to the top).
        """
        sg, dg = np.asarray(src_group), np.asarray(dst_group)
        same_nic = np.asarray(src_nic) == np.asarray(dst_nic)
        level = np.where((sg == dg) & same_nic, 0, -1)
        for t, lv in enumerate(self.levels, 1):
            joined = (lv.group_domain[sg] == lv.group_domain[dg]) & (same_nic | (not lv.rail))
            level = np.where((level < 0) & joined, t, level)
        if (level < 0).any():
            bad = int(np.flatnonzero(level < 0)[0])
            raise RankmapError(f"no switch joins ToR group {int(sg[bad])} rail {int(np.asarray(src_nic)[bad])} and "
                               f"ToR group {int(dg[bad])} rail {int(np.asarray(dst_nic)[bad])}: different islands, "
                               "or different rails on rail planes up to the top tier")
        return level
