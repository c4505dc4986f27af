"""Ring algorithms (NCCL's default for large messages), with one ring per NIC (channel).

All-reduce = reduce-scatter + all-gather around a ring: 2(n-1) steps, each moving S/n per
rank to its successor; reduce-scatter and all-gather take n-1 such steps. On n ranks of
bandwidth B and per-step latency α, an uncontended all-reduce takes
2(n-1)/n · S/B + 2(n-1)·α (DESIGN.md).

Channels: a group spanning nodes opens one ring per NIC its nodes can use (NCCL's channels),
each carrying 1/C of the data. Ring c enters every node at the c-th of its ranks, so each
NIC sends and receives exactly one ring. Inside one node there is a single ring, except on
a point-to-point mesh where n - 1 rings that share no directed link use all of them (rings of
every stride coprime with n where no such split exists), and
a wired node (MI250X), where its widest ring runs in both directions.

Broadcast and reduce stream pipelined chunks down a chain in ring order from group rank 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from math import gcd

import numpy as np

from simtrain.collectives.base import GroupLayout, Schedule, pipelined_phases, register
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology


def ring_orders(layout: GroupLayout, topology: Topology) -> list[np.ndarray]:
    """Group-rank orders of the rings NCCL would run, one per channel."""
    if layout.num_nodes == 1:
        ranks = layout.by_node[0]
        n = ranks.size
        if topology.node_fabric == "p2p_mesh" and n > 2:
            cycles = disjoint_rings(n)
            if cycles:
                return [ranks[list(c)] for c in cycles]
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


MAX_MESH_RINGS_SEARCH = 8
"""Largest mesh for which :func:`disjoint_rings` searches a decomposition (a node)."""


@lru_cache(maxsize=16)
def disjoint_rings(n: int) -> tuple[tuple[int, ...], ...]:
    """Rings (n - 1 of them) over n mesh peers that never share a directed link, or ().

    The complete directed graph on n vertices splits into n - 1 arc-disjoint Hamiltonian
    cycles for every n except 4 and 6 (Tillson, "A Hamiltonian decomposition of K*_2m,
    2m >= 8", J. Combin. Theory B 29, 1980). On a full mesh (MI300X: 7 Infinity Fabric links
    per GPU) rings on all of them use every link, which RCCL's rings do to reach 7 links'
    worth of bus bandwidth. Found by a small backtracking search, for n <= 8.

    Examples:
        >>> len(disjoint_rings(8)), disjoint_rings(4)
        (7, ())
    """
    if n > MAX_MESH_RINGS_SEARCH or n < 3:
        return ()
    used: set[tuple[int, int]] = set()
    cycles: list[tuple[int, ...]] = []

    def extend(path: list[int]) -> Iterator[tuple[int, ...]]:
        if len(path) == n:
            if (path[-1], path[0]) not in used:
                yield tuple(path)
            return
        for v in range(n):
            if v not in path and (path[-1], v) not in used:
                path.append(v)
                yield from extend(path)
                path.pop()

    def solve() -> bool:
        if len(cycles) == n - 1:
            return True
        for cycle in extend([0]):
            arcs = set(zip(cycle, (*cycle[1:], cycle[0]), strict=True))
            used.update(arcs)
            cycles.append(cycle)
            if solve():
                return True
            used.difference_update(arcs)
            cycles.pop()
        return False

    return tuple(cycles) if solve() else ()


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
        return Schedule(chain_phases(kind, devices, orders, size_bytes))
    src, dst = ring_step(devices, orders)
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    return Schedule((Phase.of(src, dst, size_bytes / (n * channels), repeat=steps),))


def chain_phases(
    kind: str, devices: np.ndarray, orders: list[np.ndarray], size_bytes: float
) -> tuple[Phase, Phase]:
    """Pipelined chain from group rank 0 along each ring (reversed for reduce)."""
    n = devices.size
    channels = len(orders)
    srcs, dsts = [], []
    for order in orders:
        chain = np.roll(order, -int(np.flatnonzero(order == 0)[0]))
        a, b = devices[chain[:-1]], devices[chain[1:]]
        srcs.append(a if kind == "broadcast" else b)
        dsts.append(b if kind == "broadcast" else a)
    return pipelined_phases(
        np.concatenate(srcs),
        np.concatenate(dsts),
        size_bytes / channels,
        depth=n - 1,
        latency_count=n - 1,
    )
