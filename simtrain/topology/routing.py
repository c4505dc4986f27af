"""Routing on node-fabric + Clos clusters: intra-node paths, NIC choice (PXN) and ECMP.

A transfer between devices of one node stays on the node fabric. A transfer between nodes
leaves through a NIC, climbs the Clos only as high as needed (same leaf: no spine; same
pod: one spine; else spine, core, spine) and picks among equal-cost spines and cores:

- ``ecmp`` (default): by a deterministic hash of (src, dst) salted with the experiment's
  seed, as switches hash flow headers. Flows that hash onto the same uplink share it while
  other uplinks idle: the collisions that make a fabric's achieved bisection fall short of
  its nominal one.
- ``adaptive``: each flow of a batch (the flows of one collective step, routed together)
  takes the equal-cost path whose busiest link carries the fewest flows routed so far, as
  adaptive routing steers flows to lightly loaded ports; it spreads a permutation evenly.

NIC choice follows NCCL: device ``a`` uses NIC ``a * nics // g``. On rail networks NCCL's
PXN (default since NCCL 2.12) first moves the data over the node fabric to the device on the
destination's rail, so the transfer stays inside one rail; on a rail-only network this is
the only way across rails.

The torus uses dimension-order routing (``torus.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.topology.base import ecmp_hash, pad_columns
from simtrain.topology.fat_tree import ClosFabric
from simtrain.topology.node_fabric import NodeFabric


@dataclass(frozen=True)
class ClusterRouter:
    """Routes for a cluster of nodes joined by a Clos (or a single node when ``clos`` is None).

    Endpoints are device indices, or switches for in-network reduction flows: a node's
    NVSwitch (from its devices) or adjacent Clos switches (``ClosFabric.switch_routes``).
    """

    fabric: NodeFabric
    num_devices: int
    nics_per_node: int
    clos: ClosFabric | None = None
    pxn: bool = False
    salt: int = 0
    """Salt of the ECMP hash (the experiment's seed)."""
    adaptive: bool = False
    """Least-loaded path choice instead of the hash (see the module docstring)."""

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Link ids of each route, padded with -1."""
        g = self.fabric.gpus_per_node
        n = self.num_devices
        intra = ~((src < n) & (dst < n)) | (src // g == dst // g)
        if self.clos is None:
            return self.fabric.routes(src, dst)
        clos_switch = (src >= self.clos.leaf_node[0]) | (dst >= self.clos.leaf_node[0])
        intra &= ~clos_switch
        inter = ~intra & ~clos_switch
        parts = [(intra, lambda s, d: self.fabric.routes(s, d)), (inter, self._inter_node)]
        parts.append(
            (clos_switch, lambda s, d: self.clos.switch_routes(s, d, g, self.nics_per_node))
        )
        routed = [(mask, fn(src[mask], dst[mask])) for mask, fn in parts if mask.any()]
        width = max(r.shape[1] for _, r in routed)
        out = np.full((src.size, width), -1, dtype=np.int64)
        for mask, rows in routed:
            out[np.flatnonzero(mask)[:, None], np.arange(rows.shape[1])] = rows
        return out

    def _inter_node(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Routes between devices of different nodes (see the module docstring)."""
        clos = self.clos
        assert clos is not None  # only called when there is a scale-out network
        g, nics = self.fabric.gpus_per_node, self.nics_per_node
        src_node, src_local = np.divmod(src, g)
        dst_node, dst_local = np.divmod(dst, g)
        dst_rail = dst_local * nics // g
        columns: list[np.ndarray] = []
        if self.pxn:
            src_rail = dst_rail
            needs_relay = src_local * nics // g != dst_rail
            relay = np.where(needs_relay, src_node * g + dst_local, src)
            columns.append(self.fabric.routes(src, relay))
        else:
            src_rail = src_local * nics // g
        src_leaf = clos.leaf_of_nic[src_node, src_rail]
        dst_leaf = clos.leaf_of_nic[dst_node, dst_rail]
        columns.append(clos.nic_up[src_node, src_rail])
        if clos.leaf_up is not None and clos.leaf_down is not None:
            src_group = clos.group_of_leaf[src_leaf]
            dst_group = clos.group_of_leaf[dst_leaf]
            cross_leaf = src_leaf != dst_leaf
            cross_pod = src_group != dst_group
            if self.adaptive:
                spine, core = self._least_loaded(src_leaf, dst_leaf, cross_leaf, cross_pod)
            else:
                h = ecmp_hash(src, dst, salt=self.salt)
                spine = (h % np.uint64(clos.leaf_up.shape[1])).astype(np.int64)
                core = np.zeros_like(spine)
                if clos.spine_up is not None:
                    cores = np.uint64(clos.spine_up.shape[2])
                    core = ((h >> np.uint64(32)) % cores).astype(np.int64)
            columns.append(np.where(cross_leaf, clos.leaf_up[src_leaf, spine], -1))
            if clos.spine_up is not None and clos.spine_down is not None:
                columns.append(np.where(cross_pod, clos.spine_up[src_group, spine, core], -1))
                columns.append(np.where(cross_pod, clos.spine_down[dst_group, spine, core], -1))
            columns.append(np.where(cross_leaf, clos.leaf_down[dst_leaf, spine], -1))
        columns.append(clos.nic_down[dst_node, dst_rail])
        return pad_columns(*columns)

    def _least_loaded(
        self,
        src_leaf: np.ndarray,
        dst_leaf: np.ndarray,
        cross_leaf: np.ndarray,
        cross_pod: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Spine and core of each flow, chosen greedily in flow order to balance link loads.

        A flow that leaves its leaf takes the spine whose uplink from its leaf and downlink
        to the destination leaf carry the fewest flows so far; one that leaves its pod also
        takes the core that balances that spine's links to and from the cores. Ties go to
        the lowest index after a rotation by the flow's position, so equal loads still
        spread.
        """
        clos = self.clos
        assert clos is not None and clos.leaf_up is not None
        num_spines = clos.leaf_up.shape[1]
        up = np.zeros((clos.leaf_up.shape[0], num_spines), dtype=np.int64)
        down = np.zeros_like(up)
        spine = np.zeros(src_leaf.size, dtype=np.int64)
        core = np.zeros(src_leaf.size, dtype=np.int64)
        groups = clos.group_of_leaf
        if clos.spine_up is not None:
            core_up = np.zeros(clos.spine_up.shape, dtype=np.int64)  # (groups, spines, cores)
            core_down = np.zeros_like(core_up)
        spines = np.arange(num_spines)
        for i in np.flatnonzero(cross_leaf):
            a, b = src_leaf[i], dst_leaf[i]
            load = np.maximum(up[a], down[b])
            above = None
            if clos.spine_up is not None and cross_pod[i]:
                above = np.maximum(core_up[groups[a]], core_down[groups[b]])
                num_cores = above.shape[1]
                best_core = np.argmin(np.roll(above, -(i % num_cores), axis=1), axis=1) + i
                best_core %= num_cores
                load = np.maximum(load, above[spines, best_core])
            s = (int(np.argmin(np.roll(load, -(i % num_spines)))) + i) % num_spines
            spine[i] = s
            up[a, s] += 1
            down[b, s] += 1
            if above is not None:
                c = int(best_core[s])
                core[i] = c
                core_up[groups[a], s, c] += 1
                core_down[groups[b], s, c] += 1
        return spine, core
