"""Direct algorithms: every rank exchanges with every other rank at once.

All-to-all is NCCL's only algorithm for it (one send and one receive per peer): each rank
sends S/n to each of the n-1 others. All-gather and reduce-scatter send each S/n shard
straight to (or from) its owner; all-reduce is their sequence; broadcast sends the whole
buffer from group rank 0 to every other rank.
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import Schedule, register
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology


def all_pairs(devices: np.ndarray, size_bytes: float) -> Phase:
    """Every ordered pair of distinct group ranks exchanges ``size_bytes``."""
    n = devices.size
    a, b = np.nonzero(~np.eye(n, dtype=bool))
    return Phase.of(devices[a], devices[b], size_bytes)


@register("direct", ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "broadcast"))
def direct(kind: str, devices: np.ndarray, size_bytes: float, topology: Topology) -> Schedule:
    """Direct schedule of ``kind`` (see the module docstring)."""
    n = devices.size
    if kind == "broadcast":
        return Schedule((Phase.of(np.full(n - 1, devices[0]), devices[1:], size_bytes),))
    pairs = all_pairs(devices, size_bytes / n)
    return Schedule((pairs, pairs) if kind == "all_reduce" else (pairs,))
