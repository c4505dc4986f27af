"""Group fabric of clusters of nodes joined by a Clos: single node, fat-tree, rail networks.

Inside a node, the group's ring bus bandwidth is what one ring (or, on a point-to-point mesh,
the set of rings NCCL would open) reaches over the node fabric: the flow model times one
ring step over the group's ranks of a node, once per distinct pattern of local ranks.

Across nodes, a ring of the group opens one channel per NIC its nodes can use (``min(ranks
per node, NICs)``) and each channel crosses every node boundary once, so the ring's bus
bandwidth is the channels times the rate one NIC reaches. That rate is the NIC's, unless a
shared switch tier is the bottleneck. Under SPMD every replica of the group runs the same
ring at the same moment, so every NIC of a leaf carries the same pattern: if a fraction f of
the ring's hops leave their leaf, the leaf's N NICs push N·f flows into uplinks of capacity
U, and each flow gets at most U / (N·f); likewise for the hops that leave their pod and the
pod's spine-to-core capacity. An oversubscribed tier therefore costs nothing to rings that
stay below it (consecutive nodes on one leaf) and 1/r to rings whose every hop crosses it.
ECMP collisions are not in this closed form (see the flow model).

On rail networks (rail_optimized, rail_only) NCCL's PXN moves traffic bound for another rail
over the node fabric to the GPU on that rail first (``topology/routing.py``): rings stay on
their rail, and all-to-all exchanges load the node fabric with the forwarded bytes.
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import GroupLayout
from simtrain.collectives.ring import ring_orders, ring_step
from simtrain.network.fabric import GroupFabric, Tier, register_fabric_view
from simtrain.network.flow import max_min_rates
from simtrain.specs.cluster import ClusterSpec
from simtrain.topology import Topology, cluster_links
from simtrain.topology.fat_tree import ClosFabric

RAIL_KINDS = frozenset({"rail_optimized", "rail_only"})
"""Kinds whose routing forwards cross-rail traffic over the node fabric (PXN)."""


@register_fabric_view("single_node", "fat_tree", "rail_optimized", "rail_only")
def clos_view(topology: Topology, cluster: ClusterSpec, devices: np.ndarray) -> GroupFabric:
    """The group's fabric on a node-fabric + Clos cluster (see the module docstring)."""
    up, out = cluster_links(cluster)
    g = topology.gpus_per_node
    by_node = GroupLayout.of(devices, topology).by_node
    counts = np.array([r.size for r in by_node])
    patterns = {tuple(int(d) for d in devices[r] % g) for r in by_node}
    default_bw = up.effective_bandwidth_bytes_per_s
    intra_bw = min(_node_ring_bandwidth(topology, p, default_bw) for p in patterns)
    exchange_bw = min(_node_exchange_bandwidth(topology, p, default_bw) for p in patterns)
    fullest = devices[by_node[int(np.argmax(counts))]]
    flow_bw = _pair_bandwidth(topology, fullest) if fullest.size > 1 else intra_bw
    intra = Tier(
        bandwidth_bytes_per_s=intra_bw,
        latency_s=up.latency_s,
        link_class="pci" if topology.node_fabric == "pcie" else "nvlink",
        flow_bandwidth_bytes_per_s=flow_bw,
        exchange_bandwidth_bytes_per_s=exchange_bw,
    )
    common = {
        "num_ranks": int(devices.size),
        "num_nodes": len(by_node),
        "ranks_per_node": int(counts.min()),
        "intra": intra,
        "nvls": topology.nvls_switch is not None,
        "cross_rail_via_scale_up": topology.kind in RAIL_KINDS,
    }
    if len(by_node) == 1:
        return GroupFabric(**common)
    nics = max(1, topology.nics_per_node)
    channels = max(1, min(int(counts.min()), nics))
    nic_bw = out.effective_bandwidth_bytes_per_s
    ring_rate = exchange_rate = nic_bw
    if topology.clos is not None:
        src, dst, rails = _ring_hops(devices, by_node, g, nics, channels)
        ring_rate = min(nic_bw, _tier_limit(topology, topology.clos, src, dst, rails))
        src, dst = _exchange_pairs(np.array([devices[r[0]] // g for r in by_node]))
        rail = np.zeros(src.size, dtype=np.int64)
        exchange_rate = min(nic_bw, _tier_limit(topology, topology.clos, src, dst, rail))
    inter = Tier(
        bandwidth_bytes_per_s=channels * ring_rate,
        latency_s=out.latency_s,
        link_class="net",
        flow_bandwidth_bytes_per_s=ring_rate,
        exchange_bandwidth_bytes_per_s=channels * exchange_rate,
    )
    notes = {
        "scale_out_share_ring": ring_rate / nic_bw,
        "scale_out_share_exchange": exchange_rate / nic_bw,
        "channels": float(channels),
    }
    return GroupFabric(**common, inter=inter, collnet=topology.sharp is not None, notes=notes)


def _node_ring_bandwidth(topology: Topology, local: tuple[int, ...], default: float) -> float:
    """Ring bus bandwidth over local ranks ``local`` of node 0, through the flow model.

    One ring step, uncontended; each ring (channel) carries an equal share, so the group
    reaches the sum over rings of each ring's slowest flow. A single rank moves nothing
    inside the node: ``default`` (the scale-up link's bandwidth) then.
    """
    devices = np.array(local, dtype=np.int64)
    if devices.size < 2:
        return default
    orders = ring_orders(GroupLayout.of(devices, topology), topology)
    src, dst = ring_step(devices, orders)
    rates = max_min_rates(topology.routes(src, dst), topology.link_bandwidth_bytes_per_s)
    per_ring = rates.reshape(len(orders), devices.size).min(axis=1)
    return float(per_ring.sum())


def _exchange_pairs(nodes: np.ndarray, most: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(source, destination) node pairs of an all-to-all; at most ``most`` offsets each.

    Large groups use evenly spaced offsets, a deterministic sample of the pairs.
    """
    m = nodes.size
    offsets = np.unique(np.linspace(1, m - 1, min(m - 1, most)).astype(np.int64))
    index = np.arange(m)
    src = np.repeat(index, offsets.size)
    dst = (src + np.tile(offsets, m)) % m
    return nodes[src], nodes[dst]


def _node_exchange_bandwidth(topology: Topology, local: tuple[int, ...], default: float) -> float:
    """Per rank, what an all-to-all among local ranks ``local`` of node 0 sends at once.

    Every ordered pair carries a flow; the slowest rank's summed rates set the exchange.
    """
    devices = np.array(local, dtype=np.int64)
    if devices.size < 2:
        return default
    a, b = np.nonzero(~np.eye(devices.size, dtype=bool))
    rates = max_min_rates(
        topology.routes(devices[a], devices[b]), topology.link_bandwidth_bytes_per_s
    )
    return float(np.bincount(a, weights=rates).min())


def _pair_bandwidth(topology: Topology, devices: np.ndarray) -> float:
    """Bandwidth of one transfer between the first two devices (its slowest link)."""
    route = topology.routes(devices[:1], devices[1:2])[0]
    return float(topology.link_bandwidth_bytes_per_s[route[route >= 0]].min())


def _ring_hops(
    devices: np.ndarray, by_node: tuple[np.ndarray, ...], g: int, nics: int, channels: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source node, destination node, rail) of every inter-node hop of every channel.

    Channel c enters each node at its c-th share of the node's group ranks, as
    ``collectives.ring.ring_orders`` does; the hop uses the rail of the rank it enters.
    """
    nodes = np.array([devices[r[0]] // g for r in by_node])
    src, dst, rails = [], [], []
    for c in range(channels):
        entry = np.array([devices[r[c * r.size // channels]] for r in by_node])
        src.append(nodes)
        dst.append(np.roll(nodes, -1))
        rails.append(np.roll(entry % g * nics // g, -1))
    return np.concatenate(src), np.concatenate(dst), np.concatenate(rails)


def _tier_limit(
    topology: Topology,
    clos: ClosFabric,
    src_node: np.ndarray,
    dst_node: np.ndarray,
    rail: np.ndarray,
) -> float:
    """Most one flow gets when every NIC carries these hops' crossing pattern (SPMD)."""
    limit = np.inf
    if clos.leaf_up is None:
        return limit
    bw = topology.link_bandwidth_bytes_per_s
    src_leaf = clos.leaf_of_nic[src_node, rail]
    dst_leaf = clos.leaf_of_nic[dst_node, rail]
    nics_on_leaf = np.bincount(clos.leaf_of_nic.ravel(), minlength=clos.leaf_up.shape[0])
    cross_leaf = src_leaf != dst_leaf
    if cross_leaf.any():
        share = cross_leaf.mean()
        leaves = np.unique(src_leaf[cross_leaf])
        uplink = bw[clos.leaf_up[leaves]].sum(axis=1)
        limit = min(limit, float((uplink / (nics_on_leaf[leaves] * share)).min()))
    if clos.spine_up is not None:
        src_pod = clos.group_of_leaf[src_leaf]
        cross_pod = src_pod != clos.group_of_leaf[dst_leaf]
        if cross_pod.any():
            share = cross_pod.mean()
            pods = np.unique(src_pod[cross_pod])
            nics_in_pod = np.bincount(
                clos.group_of_leaf, weights=nics_on_leaf, minlength=clos.spine_up.shape[0]
            )
            uplink = bw[clos.spine_up[pods]].reshape(pods.size, -1).sum(axis=1)
            limit = min(limit, float((uplink / (nics_in_pod[pods] * share)).min()))
    return limit
