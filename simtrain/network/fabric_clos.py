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
The group's replicas on the same node (the other tensor-parallel ranks' data-parallel
groups) open their channels at the same moment too: where they open more than the node has
NICs (8 GCDs, 4 NICs on Frontier), each NIC's flows split it (:func:`nic_flows`).

That even spread is what adaptive routing achieves. When the topology hashes
(``clos_routing: ecmp``), each connection's flows (``ecmp_flows_per_connection``) pick their
uplink by a hash, so the n flows leaving a switch land on its m uplinks as balls in bins:
the busiest uplink carries about the typical maximum of Binomial(n, 1/m) over every such
link of the job, not n / m. Its flows share it, and a connection, whose bytes are split
evenly over its flows, finishes with its slowest flow: the tier then gives a connection
``flows x link bandwidth / busiest link's flows``. The same holds for the links down to the
destination leaf (the spine is chosen by the same hash) and for the pod's links to the
cores. The flow model (``network_model: flow``) routes every flow by its actual hash; this
is the expected outcome of the same process, without routing.

On rail networks (rail_optimized, rail_only) NCCL's PXN moves traffic bound for another rail
over the node fabric to the GPU on that rail first (``topology/routing.py``): rings stay on
their rail, and all-to-all exchanges load the node fabric with the forwarded bytes.
"""

from __future__ import annotations

import math
from functools import lru_cache

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
    flows_per_nic = nic_flows(g, nics, int(counts.min()), channels)
    nic_bw = out.effective_bandwidth_bytes_per_s
    ring_rate = exchange_rate = nic_bw
    if topology.clos is not None:
        spec = cluster.topology
        flows = spec.ecmp_flows_per_connection if spec.clos_routing == "ecmp" else 0
        src, dst, rails = _ring_hops(devices, by_node, g, nics, channels)
        ring_rate = min(nic_bw, _tier_limit(topology, topology.clos, src, dst, rails, flows))
        src, dst = _exchange_pairs(np.array([devices[r[0]] // g for r in by_node]))
        rail = np.zeros(src.size, dtype=np.int64)
        exchange_rate = min(nic_bw, _tier_limit(topology, topology.clos, src, dst, rail, flows))
    ring_rate /= flows_per_nic
    exchange_rate /= flows_per_nic
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
        "flows_per_nic": flows_per_nic,
    }
    return GroupFabric(**common, inter=inter, collnet=topology.sharp is not None, notes=notes)


def nic_flows(gpus_per_node: int, nics: int, ranks_per_node: int, channels: int) -> float:
    """Flows each NIC of a node carries when every replica of a group communicates at once.

    Under SPMD the group's replicas (the other data- or tensor-parallel groups) tile the
    node: ``gpus_per_node / ranks_per_node`` of them, each opening ``channels`` connections
    across nodes. When they open more connections than the node has NICs, the NICs (and the
    switch tiers above them, whose limits assume one flow per NIC) are shared: every flow gets
    1 / flows of its NIC. Example: a data-parallel group of a TP 2 job on Frontier (4 of 8
    GCDs per node, 4 NICs) opens 4 channels; the other TP rank's group opens 4 more, so each
    NIC carries 2 flows and each group's ring reaches half the node's 4 x 23.8 GB/s. With one
    NIC per GPU (DGX) a group never exceeds one flow per NIC.

    >>> nic_flows(8, 4, 4, 4), nic_flows(8, 4, 1, 1), nic_flows(8, 8, 1, 1), nic_flows(8, 4, 8, 4)
    (2.0, 2.0, 1.0, 1.0)
    """
    replicas = gpus_per_node / max(1, ranks_per_node)
    return max(1.0, replicas * channels / max(1, nics))


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
    flows: int = 0,
) -> float:
    """Most one connection gets when every NIC carries these hops' crossing pattern (SPMD).

    ``flows``: flows per connection hashed onto the equal-cost uplinks (0: spread evenly, as
    adaptive routing does); see the module docstring.
    """
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
        if flows:
            links = bw[clos.leaf_up[leaves]]
            # up from every leaf of the job, and down to every leaf (same hashed spine)
            bins = 2 * clos.leaf_up.size
            limit = min(
                limit, _hashed_rate(float(nics_on_leaf[leaves].max() * share), links, flows, bins)
            )
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
            if flows:
                links = bw[clos.spine_up[pods]]
                bins = 2 * clos.spine_up.size
                connections = float(nics_in_pod[pods].max() * share)
                limit = min(limit, _hashed_rate(connections, links, flows, bins))
    return limit


def _hashed_rate(connections: float, links: np.ndarray, flows: int, bins: int) -> float:
    """Rate of the slowest connection under hashed routing (module docstring).

    One switch's ``connections`` connections of ``flows`` flows each hash uniformly onto its
    equal-cost links (``links``: their bandwidths, one row per switch); the pattern repeats
    on ``bins`` links of the job.
    """
    n = max(1, round(connections * flows))
    busiest = typical_max_load(n, links.reshape(links.shape[0], -1).shape[1], bins)
    return flows * float(links.mean()) / busiest


@lru_cache(maxsize=1024)
def typical_max_load(balls: int, bins_per_switch: int, bins: int) -> int:
    """Median load of the busiest of ``bins`` bins, each switch hashing ``balls`` balls.

    Every switch throws ``balls`` balls uniformly into its ``bins_per_switch`` bins; the
    result is the smallest c with P(Binomial(balls, 1/bins_per_switch) <= c) ** bins >= 1/2
    (bins taken as independent).

    Examples:
        >>> typical_max_load(16, 1, 100)  # one uplink carries every flow
        16
        >>> typical_max_load(16, 16, 16_384)  # one flow per uplink on average, 16K links
        6
    """
    if bins_per_switch == 1:
        return balls
    p = 1.0 / bins_per_switch
    # The answer lies between the mean and far out in the tail: only that range is summed
    # (the mass beyond 12 standard deviations plus 30 is negligible against 1 / bins).
    mean, sd = balls * p, math.sqrt(balls * p * (1 - p))
    lo, hi = int(mean), min(balls, math.ceil(mean + 12 * sd + 30))
    k = np.arange(lo, hi + 1)
    log_pmf = (
        np.array(
            [math.lgamma(balls + 1) - math.lgamma(j + 1) - math.lgamma(balls - j + 1) for j in k]
        )
        + k * math.log(p)
        + (balls - k) * math.log1p(-p)
    )
    tail = np.cumsum(np.exp(log_pmf)[::-1])[::-1]  # tail[i] = P(X >= k[i])
    above = np.append(tail[1:], 0.0)  # P(X > k[i])
    ok = -bins * np.log1p(-np.minimum(above, 1 - 1e-12)) <= math.log(2)
    return max(1, int(k[np.argmax(ok)]))
