"""NCCL's double binary tree, pipelined: latency grows with log2 of the node count.

Across nodes the group's nodes form a binary tree (heap order: node p's parent is node
(p-1)//2); the second tree is its mirror (node p sits where node m-1-p sat), so that most
leaves of one tree are inner vertices of the other, and each tree carries half the data.
Inside a node the ranks form a chain whose head joins the tree. As for rings, one tree runs
per NIC (channel), alternating the two shapes, each entering a node at a different rank.

All-reduce reduces up and broadcasts down at the same time, streaming chunks through a
pipeline 2d hops deep (d hops up, d down): the whole message plus 2d - 1 chunks to fill and
drain the pipe, paying the hop latency 2d times; the chunk is sized to the message, the
channels and the depth (``base.pipelined_phases``), so time grows with the message.
Bandwidth: NCCL models the tree at 0.92 x 0.85 of the ring's bus bandwidth
(``docs/references/collectives.md`` §6.3, ``protocols.TREE_EFFICIENCY``), which matches the
measured Tree/Ring ratio of 150/190 on 5 x 8 H100 (§6.2, NVIDIA/nccl#1368).
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import GroupLayout, Schedule, pipelined_phases, register
from simtrain.collectives.protocols import TREE_EFFICIENCY
from simtrain.topology.base import LINK_CLASSES, Topology


def tree_edges(
    layout: GroupLayout, channel: int, channels: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """(child, parent) group ranks of one channel's tree and its depth in hops."""
    heads, children, parents = [], [], []
    longest_chain = 1
    for ranks in layout.by_node:
        chain = np.roll(ranks, -(channel * ranks.size // channels))
        heads.append(chain[0])
        children.append(chain[1:])
        parents.append(chain[:-1])
        longest_chain = max(longest_chain, chain.size)
    m = layout.num_nodes
    position = np.arange(m) if channel % 2 == 0 else m - 1 - np.arange(m)
    heads_arr = np.array(heads)[position]
    children.append(heads_arr[1:])
    parents.append(heads_arr[(np.arange(1, m) - 1) // 2])
    depth = (longest_chain - 1) + int(np.floor(np.log2(m)))
    return np.concatenate(children), np.concatenate(parents), depth


@register("tree", ("all_reduce", "broadcast", "reduce"))
def tree(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """Double-binary-tree schedule of ``kind`` (see the module docstring)."""
    layout = GroupLayout.of(devices, topology)
    channels = max(layout.num_channels(topology), 2) if layout.num_nodes > 1 else 1
    srcs, dsts, depth = [], [], 0
    for c in range(channels):
        child, parent, d = tree_edges(layout, c, channels)
        depth = max(depth, d)
        if kind in ("all_reduce", "reduce"):
            srcs.append(devices[child])
            dsts.append(devices[parent])
        if kind in ("all_reduce", "broadcast"):
            srcs.append(devices[parent])
            dsts.append(devices[child])
    passes = 2 if kind == "all_reduce" else 1
    phases = pipelined_phases(
        np.concatenate(srcs),
        np.concatenate(dsts),
        size_bytes / channels,
        depth=passes * depth,
        latency_count=passes * depth,
    )
    efficiency = tuple((name, TREE_EFFICIENCY) for name in LINK_CLASSES)
    return Schedule(phases, family="tree", efficiency=efficiency)
