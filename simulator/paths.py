"""Paths of flows between rail ToRs through a multi-tier Clos: up to the lowest common tier and down.

A flow between two rail ToRs climbs only to the lowest level whose switches join them
(:meth:`rankmap.simulator.fabric.Fabric.climb`): a ring inside one pod never leaves the pod's
spines. On the way up every switch hashes the flow onto one of its up cables; on the way
down every switch hashes it onto one of its cables into the destination's domain (ECMP
next-hop choice by a hash of the 5-tuple, RFC 2992's hash-threshold family; Broadcom and
other switch ASICs salt the hash per switch). With one salt everywhere
(``per_switch_salt=False``) every switch computes the same hash, so a flow that took
index ``p`` at one tier takes index ``p`` at the next: hash polarisation, which leaves
upper uplinks idle whenever a switch has more uplinks than the next tier has switches.

Under packet spraying a flow splits evenly over the rail ToR's uplinks (as in the
one-spine model) and, at every level above, evenly over all up (and down) cables of the
domain plane: these are the "bundle" links, one per domain plane and direction, whose
capacity is the sum of their cables' (equal split makes a bundle behave as one link).
"""

from __future__ import annotations

import numpy as np

from rankmap.simulator.ecmp import choose, flow_hash, switch_salt
from rankmap.simulator.fabric import Fabric

__all__ = ["hash_paths", "spray_paths"]


def _hasher(src_addr, dst_addr, sport, config):
    """``h(switch_id, mask)``: the 5-tuple hash of the masked sub-flows at those switches."""
    def h(switch_id, mask=slice(None)):
        salt = switch_salt(config.seed, switch_id, config.per_switch_salt)
        return flow_hash(src_addr[mask], dst_addr[mask], sport[mask], salt)
    return h


def hash_paths(net, fabric: Fabric, ends: dict, level: np.ndarray, config) -> tuple[list, list, list]:
    """Links of every hashed sub-flow, tier by tier (ECMP).

    Parameters
    ----------
    net : Network
        For link indices.
    fabric : Fabric
    ends : dict of str to ndarray
        ``sg, dg, snic, dnic, src_addr, dst_addr, sport``, each ``[Q]``: ToR groups, NICs,
        addresses and UDP source ports of the sub-flows (queue pairs).
    level : ndarray
        ``level[Q]`` >= 1: level each sub-flow climbs to.
    config : EcmpConfig

    Returns
    -------
    up : list of ndarray
        Per level ``0..depth-1``: the up link of each sub-flow that leaves that level
        (level 0: all, ``[Q]``; level ``t``: those with ``level > t``).
    down : list of ndarray
        The same for the down links.
    masks : list of ndarray
        ``masks[t]``: which sub-flows use level ``t``'s cables (bool ``[Q]``).
    """
    sg, dg, snic, dnic = ends["sg"], ends["dg"], ends["snic"], ends["dnic"]
    h = _hasher(ends["src_addr"], ends["dst_addr"], ends["sport"], config)
    first = fabric.levels[0]
    cable = choose(h(net.tor_switch(sg, snic)), fabric.uplinks)           # (Q,) ToR uplink
    up, masks = [net.tor_up(sg, snic, cable)], [np.ones(level.size, dtype=bool)]
    switch = cable % first.switches                                        # (Q,) switch at level 1
    for t in range(1, fabric.depth):
        lv, above = fabric.levels[t - 1], fabric.levels[t]
        m = level > t
        dp = lv.domain_plane(sg[m], snic[m])
        j = choose(h(lv.switch_id(dp, switch[m]), m), lv.up_ports)
        k = switch[m] * lv.up_ports + j
        up.append(net.tier_up(t, dp * lv.cables_per_plane + k))
        masks.append(m)
        switch[m] = k % above.switches
    down = [None] * fabric.depth
    for t in range(fabric.depth - 1, 0, -1):
        lv, above = fabric.levels[t - 1], fabric.levels[t]
        m = masks[t]
        s = switch[m]
        n = (lv.cables_per_plane - 1 - s) // above.switches + 1
        k = s + above.switches * choose(h(above.switch_id(above.domain_plane(dg[m], dnic[m]), s), m), n)
        down[t] = net.tier_down(t, lv.domain_plane(dg[m], dnic[m]) * lv.cables_per_plane + k)
        switch[m] = k // lv.up_ports
    n = (fabric.uplinks - 1 - switch) // first.switches + 1
    salt_id = first.switch_id(first.domain_plane(dg, dnic), switch)
    down[0] = net.tor_down(dg, dnic, switch + first.switches * choose(h(salt_id), n))
    return up, down, masks


def spray_paths(net, fabric: Fabric, sg, dg, snic, dnic, level) -> tuple[list, list]:
    """Bundle links of sprayed flows above the rail ToRs.

    Parameters
    ----------
    net : Network
    fabric : Fabric
    sg, dg, snic, dnic : ndarray
        ``[X]`` ToR groups and NICs of the crossing flows.
    level : ndarray
        ``level[X]``: level each climbs to.

    Returns
    -------
    rows, picks : list of ndarray
        Per level ``t = 1..depth-1``, up bundles then down bundles: bundle link of every
        flow that climbs above ``t``, and which flows (indices into ``[X]``) those are.
    """
    rows, picks = [], []
    for t in range(1, fabric.depth):
        lv = fabric.levels[t - 1]
        pick = np.flatnonzero(level > t)
        rows += [net.tier_up_all(t, lv.domain_plane(sg[pick], snic[pick])),
                 net.tier_down_all(t, lv.domain_plane(dg[pick], dnic[pick]))]
        picks += [pick, pick]
    return rows, picks
