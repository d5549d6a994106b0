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
every down cable instead.

Above the spine, the fabric's tiers (``Cluster.fabric_tiers``, :mod:`rankmap.simulator.fabric`)
add, for every level ``t`` below the top:

- ``tier{t}-up`` / ``tier{t}-down``: up cable ``j`` of switch ``s`` of level ``t`` (in one
  domain and plane) to the level above and back, at the tier's ``up_gbps``, so ports have
  their real counts and speeds;
- ``tier{t}-up-all`` / ``tier{t}-down-all``: one bundle per domain plane and direction
  holding all its up cables, used only by packet spraying (:mod:`rankmap.simulator.paths`).

A flow climbs only to the lowest level joining its two rail ToRs and hashes at every
switch on the way up and down. A one-level fabric (every spec without tiers or switch
tree) has none of these links and routes exactly as the one-spine model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from rankmap.simulator.ecmp import EcmpConfig, mix64, roce_source_port
from rankmap.simulator.fabric import Fabric
from rankmap.simulator.flows import FlowSet
from rankmap.simulator.incidence import incidence_csr, with_rows
from rankmap.simulator.paths import hash_paths, spray_paths
from rankmap.topology.model import Cluster

__all__ = ["Network", "Routing", "LINK_KINDS", "TIER_KINDS"]

LINK_KINDS = ("nic-up", "nic-down", "tor-up", "tor-down", "nvlink-out", "nvlink-in")
TIER_KINDS = ("up", "down", "up-all", "down-all")   # per level t below the top: f"tier{t}-{kind}"


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
    tier_uplinks : tuple of (ndarray, ndarray)
        Per level ``t = 1..depth-1``: ``(links[Q_t], coflows[Q_t])``, the ``tier{t}-up``
        cable and coflow of every hashed sub-flow that climbs above level ``t``.
    coflow_level : ndarray
        ``coflow_level[C]``: the highest level any flow of the coflow climbs to (0: none
        leaves its rail ToR).
    constraints : scipy.sparse.csr_array or None
        ``constraints[L + K, C]``: ``matrix`` followed by the ``K`` extra rows asked of
        :meth:`Network.route` (``matrix`` shares its memory); None when none were asked.
    column_entries : ndarray or None
        ``column_entries[C]``: stored entries in each column of ``constraints`` (of
        ``matrix`` when there are none), when routing counted them on the way; else None.
    """

    matrix: sparse.csr_array
    uplink: np.ndarray
    uplink_coflow: np.ndarray
    tier_uplinks: tuple = ()
    coflow_level: np.ndarray | None = None
    constraints: sparse.csr_array | None = None
    column_entries: np.ndarray | None = None


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
        self.fabric = Fabric(cluster)
        self.n_hosts = len(cluster.hosts)
        self.rails = max(cluster.rails, 1)
        self.n_groups = len(cluster.tor_groups)
        self.uplinks = links.tor_uplinks
        self.spines = self.fabric.levels[0].switches
        self.gpus = max((h.gpus for h in cluster.hosts), default=1)
        self.host_index = {h.name: i for i, h in enumerate(cluster.hosts)}
        group_index = {g.name: g.index for g in cluster.tor_groups}
        self.host_group = np.array([group_index[h.tor_group] for h in cluster.hosts], dtype=np.int64)
        self.host_gpus = np.array([h.gpus for h in cluster.hosts], dtype=np.int64)
        self.host_nics = np.array([h.nics for h in cluster.hosts], dtype=np.int64)
        h, r, t, g = self.n_hosts, self.rails, self.n_groups * self.rails * self.uplinks, self.n_hosts * self.gpus
        sizes = [h * r, h * r, t, t, g, g]
        nic_bps = min(links.nic_gbps, links.tor_downlink_gbps) * 1e9 / 8
        speeds = [nic_bps, nic_bps, links.tor_uplink_gbps * 1e9 / 8, links.tor_uplink_gbps * 1e9 / 8,
                  links.nvlink_gbps * 1e9 / 8, links.nvlink_gbps * 1e9 / 8]
        kinds = list(LINK_KINDS)
        for lv_t, lv in enumerate(self.fabric.levels[:-1], 1):
            cable_bps, bundles = lv.up_gbps * 1e9 / 8, lv.domains * lv.planes
            kinds += [f"tier{lv_t}-{k}" for k in TIER_KINDS]
            sizes += [lv.n_cables, lv.n_cables, bundles, bundles]
            speeds += [cable_bps, cable_bps, cable_bps * lv.cables_per_plane, cable_bps * lv.cables_per_plane]
        self.link_kinds = tuple(kinds)
        self._offset = dict(zip(kinds, np.cumsum([0] + sizes[:-1]).tolist()))
        self.n_links = int(sum(sizes))
        self.capacity_bps = np.repeat(np.array(speeds, dtype=float), sizes)

    @property
    def depth(self) -> int:
        """Switch levels above the rail ToRs (1: the one-spine model)."""
        return self.fabric.depth

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

    def tier_up(self, level: int, cable):
        """``tier{level}-up`` link of up cable ``cable`` (``domain_plane * cables_per_plane + k``)."""
        return self._offset[f"tier{level}-up"] + np.asarray(cable)

    def tier_down(self, level: int, cable):
        return self._offset[f"tier{level}-down"] + np.asarray(cable)

    def tier_up_all(self, level: int, domain_plane):
        """Spraying bundle of all up cables of ``domain_plane`` at ``level``."""
        return self._offset[f"tier{level}-up-all"] + np.asarray(domain_plane)

    def tier_down_all(self, level: int, domain_plane):
        return self._offset[f"tier{level}-down-all"] + np.asarray(domain_plane)

    def link_range(self, kind: str) -> range:
        """Link indices of one kind (``link_kinds``: ``LINK_KINDS``, then the tiers' kinds)."""
        i = self.link_kinds.index(kind)
        stop = self._offset[self.link_kinds[i + 1]] if i + 1 < len(self.link_kinds) else self.n_links
        return range(self._offset[kind], stop)

    @cached_property
    def link_kind(self) -> np.ndarray:
        """``link_kind[L]``: index into ``link_kinds``."""
        out = np.empty(self.n_links, dtype=np.int8)
        for i, kind in enumerate(self.link_kinds):
            r = self.link_range(kind)
            out[r.start:r.stop] = i
        return out

    @cached_property
    def uplink_group(self) -> np.ndarray:
        """``uplink_group[U_total]``: ToR group of each ``tor-up`` link, in link order."""
        return np.repeat(np.arange(self.n_groups), self.rails * self.uplinks)

    def describe(self, link: int) -> str:
        """A link in words, e.g. ``'tor-up tg03/rail2/uplink17 -> spine17'``."""
        kind = self.link_kinds[int(self.link_kind[link])]
        i = int(link) - self._offset[kind]
        if kind.startswith("tier"):
            return self._describe_tier(kind, i)
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

    def _describe_tier(self, kind: str, i: int) -> str:
        t = int(kind[4:kind.index("-")])
        lv, above = self.fabric.levels[t - 1], self.fabric.levels[t]
        if kind.endswith("-all"):
            domain, plane = divmod(i, lv.planes)
            return f"{kind} {lv.name} domain {domain}/plane{plane} ({lv.cables_per_plane} cables)"
        dp, k = divmod(i, lv.cables_per_plane)
        (domain, plane), (switch, port) = divmod(dp, lv.planes), divmod(k, lv.up_ports)
        arrow = "->" if kind.endswith("-up") else "<-"
        return (f"{kind} {lv.name} domain {domain}/plane{plane}/{lv.name}{switch}/uplink{port} {arrow} "
                f"{above.name}{k % above.switches}")

    def nic_address(self, host, nic) -> np.ndarray:
        """An address per NIC (10.0.0.0/8 plus the NIC's index), for hashing."""
        return 0x0A000000 + np.asarray(host, dtype=np.int64) * self.rails + nic

    # -- routing ----------------------------------------------------------------------------
    def route(self, flows: FlowSet, config: EcmpConfig, extra_rows: sparse.sparray | None = None) -> Routing:
        """Lay every flow of ``flows`` on links.

        Parameters
        ----------
        flows : FlowSet
        config : EcmpConfig
        extra_rows : scipy.sparse.sparray, optional
            ``extra_rows[K, C]``: rows to put below the links (the per-connection rate caps,
            :func:`rankmap.simulator.connections.connection_caps`); built with the links in
            one pass, so no copy of the matrix is needed to add them.

        Returns
        -------
        Routing
            ``matrix[L, C]`` sums flows per link and coflow (duplicates add up);
            ``constraints[L + K, C]`` when ``extra_rows`` is given.

        Notes
        -----
        A ring's flow set (:class:`~rankmap.simulator.flows.LazyFlowSet`) hands over its
        flows between hosts and its NVLink rows: the former are routed as any flows, the
        latter spliced into the CSR arrays as they are (one pass, no sort), so the ring's
        flow table is never built; the matrix is the same, array for array.

        Raises
        ------
        RankmapError
            Two rail ToRs that a flow joins share no switch (see :meth:`Fabric.climb`).
        """
        between = flows.between_set()
        nvlink = None if between is None else flows.nvlink_rows(self.gpus)
        if nvlink is not None:       # route the flows between hosts, then add the NVLink rows
            flows = between
        sh, dh, coflow = flows.src_host, flows.dst_host, flows.coflow
        inter = flows.between_hosts                               # (I,) flows that leave their host
        if inter.size == flows.n_flows:                          # all of them (e.g. a ring's flows between hosts)
            ish, idh, isnic, idnic = sh, dh, flows.src_nic, flows.dst_nic
        else:
            ish, idh, isnic, idnic = sh[inter], dh[inter], flows.src_nic[inter], flows.dst_nic[inter]
        sg, dg = self.host_group[ish], self.host_group[idh]       # (I,)
        leave = np.flatnonzero((sg != dg) | (isnic != idnic))     # (X,) into inter: flows above their rail ToR
        sg, dg, idx = sg[leave], dg[leave], inter[leave]
        level = self.fabric.climb(sg, isnic[leave], dg, idnic[leave])   # (X,)
        coflow_level = np.zeros(flows.n_coflows, dtype=np.int64)
        np.maximum.at(coflow_level, coflow[idx], level)
        if config.mode == "spray":
            got_rows, got_cols, got_vals = self._spray(flows, idx, sg, dg, level)
            uplink, uplink_coflow, tiers = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), ()
        else:
            got_rows, got_cols, got_vals, tiers = self._hash(flows, idx, sg, dg, level, config)
            uplink, uplink_coflow = got_rows[0], got_cols[0]
        n_extra = 0
        if extra_rows is not None:
            extra = extra_rows.tocoo()
            n_extra = extra.shape[0]
            got_rows.append(self.n_links + extra.row)
            got_cols.append(extra.col)
            got_vals.append(extra.data)
        shape = (self.n_links + n_extra, flows.n_coflows)
        rows, cols, vals = self._entries(flows, self.nic_up(ish, isnic), self.nic_down(idh, idnic),
                                         got_rows, got_cols, got_vals, shape)
        full = incidence_csr(rows, cols, vals, shape)
        entries = None
        if nvlink is not None:
            counts, write, entries = nvlink
            entries = entries + np.bincount(full.indices, minlength=shape[1])
            full = with_rows(full, self._offset["nvlink-out"], self.n_hosts * self.gpus, counts, write)
        if extra_rows is None:
            return Routing(full, uplink, uplink_coflow, tiers, coflow_level, column_entries=entries)
        end = int(full.indptr[self.n_links])
        matrix = sparse.csr_array((full.data[:end], full.indices[:end], full.indptr[:self.n_links + 1]),
                                  shape=(self.n_links, flows.n_coflows))
        matrix.has_canonical_format = True       # the leading rows of a canonical matrix
        return Routing(matrix, uplink, uplink_coflow, tiers, coflow_level, full, entries)

    def _entries(self, flows: FlowSet, nic_up: np.ndarray, nic_down: np.ndarray, got_rows: list, got_cols: list,
                 got_vals: list, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows[E], cols[E], vals[E])`` of the incidence matrix of ``shape``: every flow's first
        two links (``nic_up[I]``, ``nic_down[I]``: those of the flows between hosts), then ``got_*``.

        The entries share one block (one allocation, no concatenation), int32 whenever
        the indices fit, as scipy would choose: half the bytes to move.
        """
        f = flows.n_flows
        n_entries = 2 * f + sum(r.size for r in got_rows)
        index = np.int32 if max(shape) < 2**31 else np.int64
        block = np.empty((2 + 8 // np.dtype(index).itemsize, n_entries), dtype=index)   # values: the last 8 bytes
        rows, cols, vals = block[0], block[1], block[2:].ravel().view(np.float64)
        # Out of the sender and into the receiver: NVLink inside a host, the NICs between
        # hosts. A GPU sending to itself crosses no link: its two NVLink keys are equal
        # (and only then).
        out_link, in_link = rows[:f], rows[f:2 * f]
        if nic_up.size == f:                       # every flow leaves its host: no NVLink
            out_link[:], in_link[:], moves = nic_up, nic_down, np.ones(1, dtype=bool)
        else:
            np.multiply(flows.src_host, self.gpus, out=out_link, casting="same_kind")
            np.add(out_link, flows.src_gpu, out=out_link, casting="same_kind")
            np.multiply(flows.dst_host, self.gpus, out=in_link, casting="same_kind")
            np.add(in_link, flows.dst_gpu, out=in_link, casting="same_kind")
            moves = out_link != in_link
            out_link += self._offset["nvlink-out"]
            in_link += self._offset["nvlink-in"]
            out_link[flows.between_hosts] = nic_up
            in_link[flows.between_hosts] = nic_down
        cols[:f] = flows.coflow
        cols[f:2 * f] = flows.coflow
        vals[:2 * f] = 1.0
        at = 2 * f
        for r, c, v in zip(got_rows, got_cols, got_vals):
            rows[at:at + r.size], cols[at:at + r.size], vals[at:at + r.size] = r, c, v
            at += r.size
        if not moves.all():
            keep = np.concatenate([moves, moves, np.ones(n_entries - 2 * f, dtype=bool)])
            rows, cols, vals = rows[keep], cols[keep], vals[keep]
        return rows, cols, vals

    def _spray(self, flows: FlowSet, idx: np.ndarray, sg: np.ndarray, dg: np.ndarray, level: np.ndarray):
        """Rows of sprayed flows ``flows[idx]`` (``sg, dg, level``: ``[X]``, theirs)."""
        u = self.uplinks
        rep = np.repeat(np.arange(idx.size), u)                  # (Q,) = (n_cross * U,) into idx
        cable = np.tile(np.arange(u), idx.size)
        snic, dnic = flows.src_nic[idx], flows.dst_nic[idx]
        up = self.tor_up(sg[rep], snic[rep], cable)
        # Each ToR's cable c lands on spine c % S, so down cable c carries 1/U too.
        down = self.tor_down(dg[rep], dnic[rep], cable)
        coflow = flows.coflow[idx]
        col, w = coflow[rep], np.full(rep.size, 1.0 / u)
        rows, cols, vals = [up, down], [col, col], [w, w]
        bundles, picks = spray_paths(self, self.fabric, sg, dg, snic, dnic, level)
        for row, pick in zip(bundles, picks):
            rows.append(row)
            cols.append(coflow[pick])
            vals.append(np.ones(pick.size))
        return rows, cols, vals

    def _hash(self, flows: FlowSet, idx: np.ndarray, sg: np.ndarray, dg: np.ndarray, level: np.ndarray,
              config: EcmpConfig):
        """Rows of ECMP-hashed flows ``flows[idx]`` (``sg, dg, level``: ``[X]``, theirs), per queue pair."""
        q = config.qps_per_connection
        rep = np.repeat(np.arange(idx.size), q)                  # (Q,) one entry per queue pair, into idx
        sub = idx[rep]
        qp = np.tile(np.arange(q), idx.size)
        sh, dh = flows.src_host[sub], flows.dst_host[sub]
        snic, dnic = flows.src_nic[sub], flows.dst_nic[sub]
        ends = mix64((sh * self.gpus + flows.src_gpu[sub]).astype(np.uint64) << np.uint64(32)
                     | (dh * self.gpus + flows.dst_gpu[sub]).astype(np.uint64))
        ends = {"sg": sg[rep], "dg": dg[rep], "snic": snic, "dnic": dnic,
                "src_addr": self.nic_address(sh, snic), "dst_addr": self.nic_address(dh, dnic),
                "sport": roce_source_port(flows.conn[sub] ^ ends, qp, config.seed)}
        up, down, masks = hash_paths(self, self.fabric, ends, level[rep], config)
        col, w = flows.coflow[sub], np.full(sub.size, 1.0 / q)
        rows, cols, vals = [up[0], down[0]], [col, col], [w, w]
        for t in range(1, self.depth):
            m = masks[t]
            rows += [up[t], down[t]]
            cols += [col[m], col[m]]
            vals += [w[m], w[m]]
        tiers = tuple((up[t], col[masks[t]]) for t in range(1, self.depth))
        return rows, cols, vals, tiers
