"""The links of a multi-rail cluster and the path of every flow over them.

Links are one direction each (a full-duplex cable is two links):

- ``nic-up`` / ``nic-down``: host NIC ``r`` to rail ToR ``r`` of its ToR group and back,
  at ``min(nic_gbps, tor_downlink_gbps)``;
- ``tor-up`` / ``tor-down``: uplink cable ``u`` of rail ToR (group, rail) to spine
  switch ``u % spine.switches`` and back, at ``tor_uplink_gbps`` (the wiring of
  :func:`rankmap.topology.graph.to_networkx`);
- ``nvlink-out`` / ``nvlink-in``: a GPU's NVLink bandwidth out of and into it, at
  ``nvlink_gbps`` (NVSwitch hosts are non-blocking inside).

A flow between two GPUs of one host uses the sender's ``nvlink-out`` and the receiver's
``nvlink-in``. Between hosts it leaves through a NIC; if both NICs hang off the same rail
ToR it turns there (NIC -> rail ToR -> NIC), otherwise it climbs to the spine: the rail
ToR hashes it onto one of its uplinks (ECMP, :mod:`rankmap.simulator.ecmp`), the spine switch
reached hashes it onto one of its cables down to the destination's rail ToR, which
delivers it to the NIC. With packet spraying a flow splits evenly over every uplink and
every down cable instead. A switch tree above the ToR groups (``Cluster.switches``) is
modelled as this one spine layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from rankmap.simulator.ecmp import EcmpConfig, choose, flow_hash, mix64, roce_source_port, switch_salt
from rankmap.simulator.flows import FlowSet
from rankmap.topology.model import Cluster

__all__ = ["Network", "Routing", "LINK_KINDS"]

LINK_KINDS = ("nic-up", "nic-down", "tor-up", "tor-down", "nvlink-out", "nvlink-in")


@dataclass(frozen=True, eq=False)
class Routing:
    """Where a flow set's coflows put their flows.

    Attributes
    ----------
    matrix : scipy.sparse.csr_array
        ``matrix[L, C]``: how many flows (fractions for queue pairs and spraying) of each
        coflow cross each link; a coflow at rate ``r`` loads link ``l`` with ``matrix[l, c] * r``.
    uplink : ndarray
        ``uplink[Q]``: ``tor-up`` link of every hashed sub-flow (queue pair) that climbs to
        the spine; empty under spraying.
    uplink_coflow : ndarray
        ``uplink_coflow[Q]``: its coflow.
    """

    matrix: sparse.csr_array
    uplink: np.ndarray
    uplink_coflow: np.ndarray


class Network:
    """Link table of a cluster: capacities and index arithmetic.

    Parameters
    ----------
    cluster : Cluster

    Attributes
    ----------
    capacity_bps : ndarray
        ``capacity_bps[L]``: bytes per second of each link.
    host_index : dict of str to int
        Host name -> index (cluster order).
    host_group, host_gpus, host_nics : ndarray
        ``[H]`` ToR group index, GPU count and NIC count of each host.

    Examples
    --------
    >>> from rankmap.topology.spec import parse_cluster
    >>> net = Network(parse_cluster("hosts: {gpus: 8, nics: 8}\\nlinks: {tor_uplinks: 4}\\n"
    ...                             "spine: {switches: 2}\\ntor_groups: [{name: a, hosts: 'h[1-2]'}]"))
    >>> net.n_links, net.describe(net.tor_up(0, 3, 1))
    (128, 'tor-up a/rail3/uplink1 -> spine1')
    """

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        links = cluster.links
        self.n_hosts = len(cluster.hosts)
        self.rails = max(cluster.rails, 1)
        self.n_groups = len(cluster.tor_groups)
        self.uplinks = links.tor_uplinks
        self.spines = max(cluster.spine.switches, 1)
        self.gpus = max((h.gpus for h in cluster.hosts), default=1)
        self.host_index = {h.name: i for i, h in enumerate(cluster.hosts)}
        group_index = {g.name: g.index for g in cluster.tor_groups}
        self.host_group = np.array([group_index[h.tor_group] for h in cluster.hosts], dtype=np.int64)
        self.host_gpus = np.array([h.gpus for h in cluster.hosts], dtype=np.int64)
        self.host_nics = np.array([h.nics for h in cluster.hosts], dtype=np.int64)
        h, r, t, g = self.n_hosts, self.rails, self.n_groups * self.rails * self.uplinks, self.n_hosts * self.gpus
        sizes = [h * r, h * r, t, t, g, g]
        self._offset = dict(zip(LINK_KINDS, np.cumsum([0] + sizes[:-1]).tolist()))
        self.n_links = int(sum(sizes))
        nic_bps = min(links.nic_gbps, links.tor_downlink_gbps) * 1e9 / 8
        speeds = [nic_bps, nic_bps, links.tor_uplink_gbps * 1e9 / 8, links.tor_uplink_gbps * 1e9 / 8,
                  links.nvlink_gbps * 1e9 / 8, links.nvlink_gbps * 1e9 / 8]
        self.capacity_bps = np.repeat(np.array(speeds, dtype=float), sizes)

    # -- link index arithmetic (all vectorised) --------------------------------------------
    def nic_up(self, host, nic):
        return self._offset["nic-up"] + np.asarray(host) * self.rails + nic

    def nic_down(self, host, nic):
        return self._offset["nic-down"] + np.asarray(host) * self.rails + nic

    def tor_switch(self, group, rail):
        """Switch id of rail ToR (group, rail); spine switch ``s`` is ``groups*rails + s``."""
        return np.asarray(group) * self.rails + rail

    def tor_up(self, group, rail, cable):
        return self._offset["tor-up"] + self.tor_switch(group, rail) * self.uplinks + cable

    def tor_down(self, group, rail, cable):
        return self._offset["tor-down"] + self.tor_switch(group, rail) * self.uplinks + cable

    def nvlink_out(self, host, gpu):
        return self._offset["nvlink-out"] + np.asarray(host) * self.gpus + gpu

    def nvlink_in(self, host, gpu):
        return self._offset["nvlink-in"] + np.asarray(host) * self.gpus + gpu

    def link_range(self, kind: str) -> range:
        """Link indices of one kind (see ``LINK_KINDS``)."""
        start = self._offset[kind]
        stop = self._offset[LINK_KINDS[LINK_KINDS.index(kind) + 1]] if kind != LINK_KINDS[-1] else self.n_links
        return range(start, stop)

    @cached_property
    def link_kind(self) -> np.ndarray:
        """``link_kind[L]``: index into ``LINK_KINDS``."""
        out = np.empty(self.n_links, dtype=np.int8)
        for i, kind in enumerate(LINK_KINDS):
            r = self.link_range(kind)
            out[r.start:r.stop] = i
        return out

    @cached_property
    def uplink_group(self) -> np.ndarray:
        """``uplink_group[U_total]``: ToR group of each ``tor-up`` link, in link order."""
        return np.repeat(np.arange(self.n_groups), self.rails * self.uplinks)

    def describe(self, link: int) -> str:
        """A link in words, e.g. ``'tor-up tg03/rail2/uplink17 -> spine17'``."""
        kind = LINK_KINDS[int(self.link_kind[link])]
        i = int(link) - self._offset[kind]
        if kind in ("nic-up", "nic-down"):
            host, nic = divmod(i, self.rails)
            return f"{kind} {self.cluster.hosts[host].name}/nic{nic}"
        if kind in ("nvlink-out", "nvlink-in"):
            host, gpu = divmod(i, self.gpus)
            return f"{kind} {self.cluster.hosts[host].name}/gpu{gpu}"
        switch, cable = divmod(i, self.uplinks)
        group, rail = divmod(switch, self.rails)
        arrow = "->" if kind == "tor-up" else "<-"
        return (f"{kind} {self.cluster.tor_groups[group].name}/rail{rail}/uplink{cable} {arrow} "
                f"spine{cable % self.spines}")

    def nic_address(self, host, nic) -> np.ndarray:
        """An address per NIC (10.0.0.0/8 plus the NIC's index), for hashing."""
        return 0x0A000000 + np.asarray(host, dtype=np.int64) * self.rails + nic

    # -- routing ----------------------------------------------------------------------------
    def route(self, flows: FlowSet, config: EcmpConfig) -> Routing:
        """Lay every flow of ``flows`` on links.

        Returns
        -------
        Routing
            ``matrix[L, C]`` sums flows per link and coflow (duplicates add up).
        """
        sh, dh = flows.src_host, flows.dst_host
        intra = (sh == dh) & (flows.src_gpu != flows.dst_gpu)
        inter = sh != dh
        sg, dg = self.host_group[sh], self.host_group[dh]
        cross = inter & ((sg != dg) | (flows.src_nic != flows.dst_nic))
        rows = [self.nvlink_out(sh[intra], flows.src_gpu[intra]), self.nvlink_in(dh[intra], flows.dst_gpu[intra]),
                self.nic_up(sh[inter], flows.src_nic[inter]), self.nic_down(dh[inter], flows.dst_nic[inter])]
        cols = [flows.coflow[intra], flows.coflow[intra], flows.coflow[inter], flows.coflow[inter]]
        vals = [np.ones(int(intra.sum()) * 2 + int(inter.sum()) * 2)]
        idx = np.flatnonzero(cross)
        if config.mode == "spray":
            up, down, col, w = self._spray(flows, idx, sg, dg)
            uplink, uplink_coflow = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        else:
            up, down, col, w = self._hash(flows, idx, sg, dg, config)
            uplink, uplink_coflow = up, col
        rows += [up, down]
        cols += [col, col]
        vals += [w, w]
        matrix = sparse.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                  shape=(self.n_links, flows.n_coflows)).tocsr()
        matrix.sum_duplicates()
        return Routing(matrix, uplink, uplink_coflow)

    def _spray(self, flows: FlowSet, idx: np.ndarray, sg: np.ndarray, dg: np.ndarray):
        u = self.uplinks
        rep = np.repeat(idx, u)                                  # (Q,) = (n_cross * U,)
        cable = np.tile(np.arange(u), idx.size)
        up = self.tor_up(sg[rep], flows.src_nic[rep], cable)
        # Each ToR's cable c lands on spine c % S, so down cable c carries 1/U too.
        down = self.tor_down(dg[rep], flows.dst_nic[rep], cable)
        return up, down, flows.coflow[rep], np.full(rep.size, 1.0 / u)

    def _hash(self, flows: FlowSet, idx: np.ndarray, sg: np.ndarray, dg: np.ndarray, config: EcmpConfig):
        q = config.qps_per_connection
        sub = np.repeat(idx, q)                                  # (Q,) one entry per queue pair
        qp = np.tile(np.arange(q), idx.size)
        sh, dh = flows.src_host[sub], flows.dst_host[sub]
        snic, dnic = flows.src_nic[sub], flows.dst_nic[sub]
        src_addr, dst_addr = self.nic_address(sh, snic), self.nic_address(dh, dnic)
        ends = mix64((sh * self.gpus + flows.src_gpu[sub]).astype(np.uint64) << np.uint64(32)
                     | (dh * self.gpus + flows.dst_gpu[sub]).astype(np.uint64))
        sport = roce_source_port(flows.conn[sub] ^ ends, qp, config.seed)
        tor = self.tor_switch(sg[sub], snic)
        salt = switch_salt(config.seed, tor, config.per_switch_salt)
        cable_up = choose(flow_hash(src_addr, dst_addr, sport, salt), self.uplinks)
        spine = cable_up % self.spines
        # Cables from spine s down to one rail ToR: c = s, s + S, ... below U.
        n_down = (self.uplinks - 1 - spine) // self.spines + 1
        salt = switch_salt(config.seed, self.n_groups * self.rails + spine, config.per_switch_salt)
        cable_down = spine + self.spines * choose(flow_hash(src_addr, dst_addr, sport, salt), n_down)
        up = self.tor_up(sg[sub], snic, cable_up)
        down = self.tor_down(dg[sub], dnic, cable_down)
        return up, down, flows.coflow[sub], np.full(sub.size, 1.0 / q)
