"""Rail-optimized and rail-only networks: NIC ``r`` of every node plugs into rail ``r``.

Nodes are grouped into scalable units of ``leaf_down_ports`` nodes (32 in a DGX H100
SuperPOD SU); each unit has one leaf per rail, so the NIC ``r`` of the unit's nodes share
leaf ``(unit, r)``. Traffic between GPUs of the same local index never leaves its rail.

- rail_optimized: spines join the leaves of every rail (NVIDIA DGX SuperPOD). Cross-rail
  traffic may cross the spines, but NCCL's PXN moves it to the right rail over NVLink first.
- rail_only (Wang et al., "How to Build Low-cost Networks for Large Language Models (without
  Sacrificing Performance)", 2023): each rail is its own network (its own spines); there is
  no path between rails, so cross-rail traffic is forwarded through the node's NVLink.

Both share the Clos wiring of ``fat_tree.py``; rail_only gives each rail its own plane.
"""

from __future__ import annotations

import numpy as np


def rail_leaves(
    num_nodes: int, nics: int, nodes_per_unit: int, separate_planes: bool
) -> tuple[np.ndarray, np.ndarray]:
    """NIC -> leaf map and leaf -> plane map of a rail network.

    Args:
        num_nodes: nodes of the cluster.
        nics: NICs (rails) per node.
        nodes_per_unit: nodes per scalable unit (= NIC ports per leaf).
        separate_planes: True for rail_only (no spine shared between rails).

    Examples:
        >>> leaf, plane = rail_leaves(4, 2, 2, separate_planes=True)
        >>> leaf.tolist(), plane.tolist()
        ([[0, 1], [0, 1], [2, 3], [2, 3]], [0, 1, 0, 1])
    """
    unit = np.arange(num_nodes)[:, None] // nodes_per_unit
    leaf = unit * nics + np.arange(nics)[None, :]
    num_leaves = int(leaf.max()) + 1
    plane = np.arange(num_leaves) % nics if separate_planes else np.zeros(num_leaves, np.int64)
    return leaf, plane
