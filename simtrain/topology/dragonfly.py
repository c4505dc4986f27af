"""Dragonfly (HPE Slingshot, Cray EX): switch groups, all-to-all inside and between groups.

Kim, Dally, Scott and Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology" (ISCA
2008), as HPE builds it for Frontier and LUMI (``docs/references/networks.md`` §2):

- a group has ``switches_per_group`` switches (32 in a Cray EX cabinet), each with
  ``nic_ports_per_switch`` NIC ports (16); every pair of switches of a group is joined by a
  local link;
- every pair of groups is joined by ``links_per_group_pair`` global links (Frontier: 4 per
  "arc"), spread over the switches of both groups;
- nodes fill groups in order, a node's NICs sharing one switch (the NICs of 16 / NICs nodes
  per switch).

Every link runs at the scale-out link's bandwidth (Slingshot's NICs, local and global
links are all 200 Gb/s ports of the same Rosetta switch). The NIC's link into the fabric
carries the per-step latency (``topology/base.py``); switch-to-switch hops add none.

Routing, chosen by ``cluster.topology.routing``:

- ``minimal``: at most local, global, local switch hops; among the links of a group pair a
  flow takes one by a deterministic hash of its endpoints (as ECMP).
- ``valiant``: every flow between groups detours through an intermediate group chosen by
  hash (two global hops), and every flow between switches of one group through an
  intermediate switch: uniform load whatever the pattern, at twice the hops.
- ``ugal``: per phase, with global knowledge (UGAL-G): each flow compares its minimal path's
  most loaded link with its Valiant path's, weighting the Valiant path by its two-fold hop
  count as UGAL does. Slingshot adapts per packet, so of the c flows sharing a link (which
  carries one at full rate without a queue) the excess ``c - 1 - 2 d`` (d: flows already on
  the detour) spreads over the P detour paths, in the share ``P / (P + 2)`` that balances
  them; that share of the flows detours whole (chosen by a hash of the endpoints, so
  deterministically). Loads count the phase's flows per byte/s of link capacity. Neighbour
  exchanges stay minimal, while a pattern that overloads a link (a whole group talking to
  one other group, or several rings crossing one local link) spreads over the other paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.errors import SpecError
from simtrain.specs.hardware import LinkSpec
from simtrain.specs.topology import TopologySpec
from simtrain.topology.base import LinkTable, ecmp_hash, pad_columns
from simtrain.topology.node_fabric import NodeFabric

ROUTINGS: tuple[str, ...] = ("minimal", "valiant", "ugal")
"""Routings the flow model implements on a dragonfly."""
UGAL_HOP_WEIGHT = 2.0
"""UGAL weighs a Valiant path's congestion by its hop count relative to the minimal path's:
two global hops instead of one (Kim et al. 2008, §4.2)."""


@dataclass(frozen=True)
class DragonflyShape:
    """Sizes of a dragonfly and where a cluster's nodes sit in it."""

    num_groups: int
    switches_per_group: int
    nic_ports_per_switch: int
    links_per_group_pair: int
    nodes_per_switch: int
    num_nodes: int

    @property
    def nodes_per_group(self) -> int:
        """Nodes whose NICs plug into one group."""
        return self.nodes_per_switch * self.switches_per_group

    @property
    def groups_used(self) -> int:
        """Groups that hold at least one node of the cluster."""
        return -(-self.num_nodes // self.nodes_per_group)

    @property
    def global_ports_per_switch(self) -> int:
        """Global ports the busiest switch of a group needs."""
        slots = (self.num_groups - 1) * self.links_per_group_pair
        return -(-slots // self.switches_per_group)


def dragonfly_shape(spec: TopologySpec, num_nodes: int, nics: int) -> DragonflyShape:
    """Check a dragonfly spec against the cluster and the switch radix.

    Raises:
        SpecError: NICs that do not fill switch ports evenly, a cluster larger than the
            groups, or switches with more ports than ``switch_radix``.
    """
    ports = spec.nic_ports_per_switch
    if ports % nics:
        raise SpecError(
            f"'cluster.topology.nic_ports_per_switch' must be a multiple of the "
            f"{nics} NICs per node (got {ports})"
        )
    per_switch = ports // nics
    per_group = per_switch * spec.switches_per_group
    needed = -(-num_nodes // per_group)
    groups = spec.num_groups if spec.num_groups is not None else needed
    if groups < needed:
        raise SpecError(
            f"'cluster.topology.num_groups' must hold the cluster's {num_nodes} nodes at "
            f"{per_group} per group, so at least {needed} (got {groups})"
        )
    shape = DragonflyShape(
        groups, spec.switches_per_group, ports, spec.links_per_group_pair, per_switch, num_nodes
    )
    used = ports + (spec.switches_per_group - 1) + shape.global_ports_per_switch
    if used > spec.switch_radix:
        raise SpecError(
            f"'cluster.topology.switch_radix' must fit {ports} NIC + "
            f"{spec.switches_per_group - 1} local + {shape.global_ports_per_switch} global "
            f"ports = {used} per switch (got {spec.switch_radix}); lower num_groups or "
            "links_per_group_pair"
        )
    return shape


@dataclass(frozen=True)
class DragonflyLinks:
    """Link ids of a dragonfly's NIC, local and global links (all in one LinkTable)."""

    nic_up: np.ndarray
    """``nic_up[node, nic]``: NIC into its switch."""
    nic_down: np.ndarray
    """``nic_down[node, nic]``: switch out to the NIC."""
    switch_of_node: np.ndarray
    """Global switch index (group * switches_per_group + s) of every node."""
    local: np.ndarray
    """``local[group, s, t]``: switch s to switch t of one group (-1 on the diagonal)."""
    global_link: np.ndarray
    """``global_link[i, j, m]``: the m-th link from group i to group j (-1 for i == j)."""
    gateway: np.ndarray
    """``gateway[i, j, m]``: switch (within group i) holding ``global_link[i, j, m]``."""
    first_switch_node: int
    """Graph index of switch 0; switch ``w`` is graph node ``first_switch_node + w``."""


def build_dragonfly(
    table: LinkTable, shape: DragonflyShape, gpus_per_node: int, nics: int, link: LinkSpec
) -> DragonflyLinks:
    """Add the switches and links of a dragonfly; devices must be graph nodes 0..N-1.

    NIC ``r`` of a node belongs to its device ``ceil(r * g / nics)`` (the first device of the
    package it serves), as in the Clos builders.
    """
    a, groups, k = shape.switches_per_group, shape.num_groups, shape.links_per_group_pair
    bw = link.effective_bandwidth_bytes_per_s
    names = [f"g{g}/sw{s}" for g in range(groups) for s in range(a)]
    switches = table.add_nodes(names, "group_switch")
    first = int(switches[0])
    nodes = np.arange(shape.num_nodes)
    switch_of_node = (nodes // shape.nodes_per_group) * a + (
        nodes % shape.nodes_per_group
    ) // shape.nodes_per_switch
    owner = nodes[:, None] * gpus_per_node + -(-np.arange(nics)[None, :] * gpus_per_node // nics)
    nic_src = owner.ravel()
    nic_up = table.add_links(
        nic_src, first + np.repeat(switch_of_node, nics), bw, link.latency_s, "net"
    ).reshape(shape.num_nodes, nics)
    nic_down = table.add_links(
        first + np.repeat(switch_of_node, nics), nic_src, bw, 0.0, "net"
    ).reshape(shape.num_nodes, nics)
    local = np.full((groups, a, a), -1, dtype=np.int64)
    if a > 1:
        s, t = np.nonzero(~np.eye(a, dtype=bool))
        base = np.arange(groups)[:, None] * a
        ids = table.add_links(
            first + (base + s).ravel(), first + (base + t).ravel(), bw, 0.0, "net"
        )
        local[:, s, t] = ids.reshape(groups, -1)
    global_link = np.full((groups, groups, k), -1, dtype=np.int64)
    gateway = np.full((groups, groups, k), -1, dtype=np.int64)
    if groups > 1:
        i, j = np.nonzero(~np.eye(groups, dtype=bool))
        # Group i numbers its peers 0..G-2 (skipping itself); its m-th link to peer j uses
        # port slot peer * k + m, on switch slot % a: arcs spread over all switches.
        peer = np.where(j < i, j, j - 1)
        slot = peer[:, None] * k + np.arange(k)[None, :]
        gateway[i, j] = slot % a
        src = first + i[:, None] * a + gateway[i, j]
        dst = first + j[:, None] * a + gateway[j, i]
        global_link[i, j] = table.add_links(src.ravel(), dst.ravel(), bw, 0.0, "net").reshape(-1, k)
    return DragonflyLinks(nic_up, nic_down, switch_of_node, local, global_link, gateway, first)


def dragonfly_bisection(shape: DragonflyShape, nics: int, link: LinkSpec) -> float:
    """Bandwidth across the worst half cut of the groups the cluster uses, per direction.

    The lesser of half the NICs' injection and the global links between two halves of the
    groups (floor(G/2) x ceil(G/2) x links per pair); inside one group, the local links
    between two halves of its switches.
    """
    bw = link.effective_bandwidth_bytes_per_s
    injection = shape.num_nodes * nics * bw / 2
    groups = shape.groups_used
    if groups > 1:
        cut = (groups // 2) * (groups - groups // 2) * shape.links_per_group_pair * bw
    else:
        used = -(-shape.num_nodes // shape.nodes_per_switch)
        cut = (used // 2) * (used - used // 2) * bw
    return float(min(injection, cut)) if shape.num_nodes > 1 else 0.0


@dataclass(frozen=True)
class DragonflyRouter:
    """Routes on a dragonfly cluster (see the module docstring for the three routings)."""

    fabric: NodeFabric
    num_devices: int
    nics_per_node: int
    shape: DragonflyShape
    links: DragonflyLinks
    routing: str
    capacity_bytes_per_s: np.ndarray

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Link ids of each route, padded with -1."""
        g = self.fabric.gpus_per_node
        intra = src // g == dst // g
        out_parts: list[tuple[np.ndarray, np.ndarray]] = []
        if intra.any():
            out_parts.append((intra, self.fabric.routes(src[intra], dst[intra])))
        if (~intra).any():
            out_parts.append((~intra, self._inter_node(src[~intra], dst[~intra])))
        width = max(rows.shape[1] for _, rows in out_parts)
        out = np.full((src.size, width), -1, dtype=np.int64)
        for mask, rows in out_parts:
            out[np.flatnonzero(mask)[:, None], np.arange(rows.shape[1])] = rows
        return out

    def _inter_node(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Routes between devices of different nodes under the configured routing."""
        minimal = self._switch_path(src, dst, detour=False)
        if self.routing == "minimal":
            return minimal
        valiant = self._switch_path(src, dst, detour=True)
        if self.routing == "valiant":
            return valiant
        return self._ugal(src, dst, minimal, valiant)

    def _ugal(
        self, src: np.ndarray, dst: np.ndarray, minimal: np.ndarray, valiant: np.ndarray
    ) -> np.ndarray:
        """UGAL-G: detour the balancing share of the flows on congested minimal paths."""
        cap = self.capacity_bytes_per_s
        used = minimal[minimal >= 0]
        load = np.bincount(used, minlength=cap.size) / cap

        def worst(routes: np.ndarray, extra: float) -> tuple[np.ndarray, np.ndarray]:
            # Switch-to-switch hops only: the NIC links (first and last column) are the same
            # on both paths. Returns each flow's highest load and the link that has it.
            inner = routes[:, 1:-1]
            ids = np.maximum(inner, 0)
            q = np.where(inner >= 0, load[ids] + extra / cap[ids], 0.0)
            col = q.argmax(axis=1)
            return q[np.arange(q.shape[0]), col], inner[np.arange(q.shape[0]), col]

        q_min, bottleneck = worst(minimal, 0.0)
        q_detour, _ = worst(valiant, 0.0)
        # Slingshot adapts per packet, so the c flows sharing a link divide: a link of the
        # NICs' own rate carries one flow without a queue, so only the excess c - 1 (plus
        # twice the load already on the detour, UGAL's hop weighting) moves, spread over the
        # P detour paths (intermediate groups, or switches inside a group) in the share
        # P / (P + 2) that balances them. Whole flows detour in that share.
        flows = q_min * cap[np.maximum(bottleneck, 0)]
        detour_flows = q_detour / np.maximum(q_min, 1e-300) * flows
        a, groups = self.shape.switches_per_group, self.shape.num_groups
        g = self.fabric.gpus_per_node
        cross = self.links.switch_of_node[src // g] // a != self.links.switch_of_node[dst // g] // a
        paths = np.where(cross, groups - 2, a - 2).clip(min=0)
        excess = (flows - 1.0 - UGAL_HOP_WEIGHT * detour_flows) / np.maximum(flows, 1e-300)
        share = np.clip(excess, 0.0, 1.0) * paths / (paths + UGAL_HOP_WEIGHT)
        # Of the flows whose minimal paths peak on the same link, detour the balancing share,
        # picked in the order of a hash of their endpoints (deterministic, no favoured rank).
        u = ecmp_hash(src, dst, salt=7)
        order = np.lexsort((u, bottleneck))
        sorted_link = bottleneck[order]
        starts = np.flatnonzero(np.r_[True, sorted_link[1:] != sorted_link[:-1]])
        counts = np.diff(np.r_[starts, order.size])
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size) - np.repeat(starts, counts)
        group_size = np.empty(order.size, dtype=np.int64)
        group_size[order] = np.repeat(counts, counts)
        detour = rank < np.round(share * group_size)
        if not detour.any():
            return minimal
        # Per-packet adaptivity never piles two flows onto one detour: the flows leaving a
        # congested link take consecutive intermediates (groups or switches).
        pick = ecmp_hash(bottleneck, bottleneck, salt=11).astype(np.int64) % 65521 + rank
        spread = self._switch_path(src[detour], dst[detour], detour=True, pick=pick[detour])
        width = max(minimal.shape[1], spread.shape[1])
        out = np.full((src.size, width), -1, dtype=np.int64)
        out[:, : minimal.shape[1]] = minimal
        out[detour] = -1
        out[np.ix_(np.flatnonzero(detour), np.arange(spread.shape[1]))] = spread
        return out

    def _switch_path(
        self, src: np.ndarray, dst: np.ndarray, detour: bool, pick: np.ndarray | None = None
    ) -> np.ndarray:
        """NIC, local and global hops from ``src`` to ``dst`` (devices on other nodes).

        A detour's intermediate group or switch is chosen by ``pick`` (default: a hash).
        """
        g, nics, a = self.fabric.gpus_per_node, self.nics_per_node, self.shape.switches_per_group
        k, groups = self.shape.links_per_group_pair, self.shape.num_groups
        links = self.links
        src_node, src_local = np.divmod(src, g)
        dst_node, dst_local = np.divmod(dst, g)
        src_nic = src_local * nics // g
        dst_nic = dst_local * nics // g
        s_sw = links.switch_of_node[src_node]
        d_sw = links.switch_of_node[dst_node]
        s_grp, d_grp = s_sw // a, d_sw // a
        h = ecmp_hash(src, dst, salt=3)
        m = (h % np.uint64(k)).astype(np.int64)
        columns = [links.nic_up[src_node, src_nic]]
        if detour:
            # Intermediate group (between groups) or switch (inside a group), by hash,
            # never the source's or the destination's.
            if pick is None:
                pick = (h >> np.uint64(20)).astype(np.int64)
            cross = s_grp != d_grp
            mid_grp = self._other(pick, groups, s_grp, d_grp)
            mid_grp = np.where(cross & (groups > 2), mid_grp, d_grp)
            hop1_cols, at = self._to_group(s_sw, s_grp, mid_grp, m)
            columns += hop1_cols
            m2 = ((h >> np.uint64(40)) % np.uint64(k)).astype(np.int64)
            hop2_cols, at = self._to_group(at, at // a, d_grp, m2)
            columns += hop2_cols
            # Inside one group: an intermediate switch.
            same_grp = ~cross & (s_sw != d_sw) & (a > 2)
            mid_sw = s_grp * a + self._other(pick, a, s_sw % a, d_sw % a)
            via = np.where(same_grp, mid_sw, at)
            columns.append(self._local(at, via))
            at = via
        else:
            cols, at = self._to_group(s_sw, s_grp, d_grp, m)
            columns += cols
        columns.append(self._local(at, d_sw))
        columns.append(links.nic_down[dst_node, dst_nic])
        return pad_columns(*columns)

    def _to_group(
        self, at: np.ndarray, group: np.ndarray, target: np.ndarray, m: np.ndarray
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Local hop to the gateway of the m-th link to ``target``, then that global link.

        Flows already in ``target`` stay put (both columns -1). Returns the columns and the
        switch each flow has reached.
        """
        a = self.shape.switches_per_group
        links = self.links
        moving = group != target
        if self.shape.num_groups == 1:
            none = np.full(at.size, -1, dtype=np.int64)
            return [none, none], at
        tgt = np.where(moving, target, np.where(group == 0, 1, 0))  # any valid peer index
        gate = group * a + links.gateway[group, tgt, m]
        land = tgt * a + links.gateway[tgt, group, m]
        local = np.where(moving, self._local(at, gate), -1)
        hop = np.where(moving, links.global_link[group, tgt, m], -1)
        return [local, hop], np.where(moving, land, at)

    def _local(self, at: np.ndarray, to: np.ndarray) -> np.ndarray:
        """Local link from switch ``at`` to switch ``to`` of the same group (-1 if equal)."""
        a = self.shape.switches_per_group
        same = at == to
        link = self.links.local[at // a, at % a, np.where(same, (at + 1) % a, to) % a]
        return np.where(same, -1, link)

    @staticmethod
    def _other(pick: np.ndarray, count: int, avoid1: np.ndarray, avoid2: np.ndarray) -> np.ndarray:
        """A value in 0..count-1 chosen by ``pick``, unequal to avoid1 and avoid2 if possible."""
        if count <= 2:
            return avoid2.copy()
        c = (pick % (count - 2)).astype(np.int64)
        lo, hi = np.minimum(avoid1, avoid2), np.maximum(avoid1, avoid2)
        c = c + (c >= lo)
        c = c + (c >= hi)
        return np.where(avoid1 == avoid2, (avoid1 + 1 + pick % (count - 1)) % count, c)
