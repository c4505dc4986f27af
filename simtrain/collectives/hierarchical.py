"""Hierarchical collectives: inside nodes, then across nodes, then inside nodes again.

All-reduce on m nodes of k ranks: ring reduce-scatter inside every node (k-1 steps of S/k),
then k concurrent ring all-reduces across nodes, one per local rank, each on its S/k shard
(2(m-1) steps of S/(k·m)), then ring all-gather inside every node. Reduce-scatter keeps the
first two parts; all-gather runs the inter-node all-gather first, then the intra-node one.
The inter-node rings join ranks of the same local index, so on rail networks they never
leave their rail. The three parts run one after another, without the chunk-level overlap of
a pipelined implementation: an upper bound on the time.
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import GroupLayout, Schedule, register, require_uniform
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology


def intra_node_ring(
    devices: np.ndarray, layout: GroupLayout, size_bytes: float, steps: int
) -> Phase:
    """One ring per node over its group ranks, all nodes at once."""
    src = np.concatenate([devices[r] for r in layout.by_node])
    dst = np.concatenate([devices[np.roll(r, -1)] for r in layout.by_node])
    return Phase.of(src, dst, size_bytes, repeat=steps)


def inter_node_rings(
    devices: np.ndarray, layout: GroupLayout, size_bytes: float, steps: int
) -> Phase:
    """One ring across nodes per local rank index, all at once."""
    grid = np.stack(layout.by_node)  # (nodes, ranks per node)
    return Phase.of(devices[grid], devices[np.roll(grid, -1, axis=0)], size_bytes, repeat=steps)


@register("hierarchical", ("all_reduce", "reduce_scatter", "all_gather"))
def hierarchical(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """Hierarchical schedule of ``kind`` (see the module docstring)."""
    layout = GroupLayout.of(devices, topology)
    k = require_uniform(layout, "hierarchical")
    m = layout.num_nodes
    intra = intra_node_ring(devices, layout, size_bytes / k, k - 1)
    if kind == "all_reduce":
        inter = inter_node_rings(devices, layout, size_bytes / (k * m), 2 * (m - 1))
        return Schedule((intra, inter, intra))
    inter = inter_node_rings(devices, layout, size_bytes / (k * m), m - 1)
    return Schedule((intra, inter) if kind == "reduce_scatter" else (inter, intra))
