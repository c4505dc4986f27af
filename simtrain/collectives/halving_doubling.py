"""Recursive halving and doubling (Rabenseifner): log2(n) steps, for n a power of two.

Reduce-scatter by recursive halving: at step i every rank exchanges half of what it still
holds, S/2^(i+1), with the rank n/2^(i+1) away. All-gather by recursive doubling mirrors it
(S/n, then 2S/n, ... with partners 1, 2, 4, ... away). All-reduce is the two in sequence:
the same 2(n-1)/n · S bytes per rank as a ring, in 2·log2(n) steps instead of 2(n-1).
"""

from __future__ import annotations

import numpy as np

from simtrain.collectives.base import Schedule, register
from simtrain.errors import SpecError
from simtrain.network.flow import Phase
from simtrain.topology.base import Topology


def _exchange(devices: np.ndarray, distance: int, size_bytes: float) -> Phase:
    """Every rank swaps ``size_bytes`` with the rank ``distance`` away (rank XOR distance)."""
    ranks = np.arange(devices.size)
    return Phase.of(devices, devices[ranks ^ distance], size_bytes)


@register("halving_doubling", ("all_reduce", "reduce_scatter", "all_gather"))
def halving_doubling(
    kind: str, devices: np.ndarray, size_bytes: float, topology: Topology
) -> Schedule:
    """Halving-doubling schedule of ``kind`` (see the module docstring)."""
    n = devices.size
    if n & (n - 1):
        raise SpecError(f"'algo' halving_doubling needs a power-of-two group (got {n} ranks)")
    steps = n.bit_length() - 1
    halving = [_exchange(devices, n >> (i + 1), size_bytes / 2 ** (i + 1)) for i in range(steps)]
    doubling = [_exchange(devices, 1 << i, size_bytes * 2**i / n) for i in range(steps)]
    if kind == "reduce_scatter":
        return Schedule(tuple(halving))
    if kind == "all_gather":
        return Schedule(tuple(doubling))
    return Schedule(tuple(halving + doubling))
