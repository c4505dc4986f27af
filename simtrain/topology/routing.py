"""Routing on node-fabric + Clos clusters: intra-node paths, NIC choice (PXN) and ECMP.

A transfer between devices of one node stays on the node fabric. A transfer between nodes
leaves through a NIC, climbs the Clos only as high as needed (same leaf: no spine; same
pod: one spine; else spine, core, spine) and picks among equal-cost spines and cores by a
deterministic hash of (src, dst), as switches hash flow headers (ECMP).

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
            h = ecmp_hash(src, dst, salt=1)
            spine = (h % np.uint64(clos.leaf_up.shape[1])).astype(np.int64)
            cross_leaf = src_leaf != dst_leaf
            columns.append(np.where(cross_leaf, clos.leaf_up[src_leaf, spine], -1))
            if clos.spine_up is not None and clos.spine_down is not None:
                core = ((h >> np.uint64(32)) % np.uint64(clos.spine_up.shape[2])).astype(np.int64)
                src_group = clos.group_of_leaf[src_leaf]
                dst_group = clos.group_of_leaf[dst_leaf]
                cross_pod = src_group != dst_group
                columns.append(np.where(cross_pod, clos.spine_up[src_group, spine, core], -1))
                columns.append(np.where(cross_pod, clos.spine_down[dst_group, spine, core], -1))
            columns.append(np.where(cross_leaf, clos.leaf_down[dst_leaf, spine], -1))
        columns.append(clos.nic_down[dst_node, dst_rail])
        return pad_columns(*columns)
