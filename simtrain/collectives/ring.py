"""Ring algorithms (NCCL's default for large messages), with one ring per NIC (channel).

All-reduce = reduce-scatter + all-gather around a ring: 2(n-1) steps, each moving S/n per
rank to its successor; reduce-scatter and all-gather take n-1 such steps. On n ranks of
bandwidth B and per-step latency α, an uncontended all-reduce takes
2(n-1)/n · S/B + 2(n-1)·α (DESIGN.md).

Channels: a group spanning nodes opens one ring per NIC its nodes can use (NCCL's channels),
each carrying 1/C of the data. Ring c enters every node at the c-th of its ranks, so each
NIC sends and receives exactly one ring. Inside one node there is a single ring, except on
a point-to-point mesh where the rings of every stride coprime with n use disjoint links, and
a wired node (MI250X), where its widest ring runs in both directions.

Broadcast and reduce stream pipelined chunks down a chain in ring order from group rank 0.
"""

from __future__ import annotations

from math import gcd

import numpy as np

from simtrain.collectives.base import GroupLayout, Schedule, pipeline_chunks, register
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology


def ring_orders(layout: GroupLayout, topology: Topology) -> list[np.ndarray]:
    """Group-rank orders of the rings NCCL would run, one per channel."""
    if layout.num_nodes == 1:
        ranks = layout.by_node[0]
        n = ranks.size
        if topology.node_fabric == "p2p_mesh" and n > 2:
            strides = [s for s in range(1, n) if gcd(s, n) == 1]
            return [ranks[(np.arange(n) * s) % n] for s in strides]
        if topology.ring_order is not None and n > 2:
            # A wired node: its widest ring and the same ring reversed, which uses the other
            # direction of the same links.
            return [ranks, ranks[::-1]]
        return [ranks]
    channels = layout.num_channels(topology)
    orders = []
    for c in range(channels):
        parts = [np.roll(r, -(c * r.size // channels)) for r in layout.by_node]
        orders.append(np.concatenate(parts))
    return orders


def ring_step(devices: np.ndarray, orders: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sources and destinations of one ring step: every rank sends to its successor."""
    src = np.concatenate([devices[o] for o in orders])
    dst = np.concatenate([devices[np.roll(o, -1)] for o in orders])
    return src, dst


@register("ring", ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"))
def ring(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """Ring schedule of ``kind`` (see the module docstring)."""
    n = devices.size
    orders = ring_orders(GroupLayout.of(devices, topology), topology)
    channels = len(orders)
    if kind in ("broadcast", "reduce"):
        return Schedule((chain_phase(kind, devices, orders, size_bytes),))
    src, dst = ring_step(devices, orders)
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    return Schedule((Phase.of(src, dst, size_bytes / (n * channels), repeat=steps),))


def chain_phase(
    kind: str, devices: np.ndarray, orders: list[np.ndarray], size_bytes: float
) -> Phase:
    """Pipelined chain from group rank 0 along each ring (reversed for reduce)."""
    n = devices.size
    channels = len(orders)
    chunks = pipeline_chunks(size_bytes / channels)
    srcs, dsts = [], []
    for order in orders:
        chain = np.roll(order, -int(np.flatnonzero(order == 0)[0]))
        a, b = devices[chain[:-1]], devices[chain[1:]]
        srcs.append(a if kind == "broadcast" else b)
        dsts.append(b if kind == "broadcast" else a)
    return Phase.of(
        np.concatenate(srcs),
        np.concatenate(dsts),
        size_bytes / (channels * chunks),
        repeat=chunks + n - 2,
        latency_count=n - 1,
    )
