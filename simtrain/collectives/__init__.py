"""Collective algorithms: pure functions from a collective on a group to phases of flows.

One module per family (``ring``, ``tree``, ``hierarchical``, ``halving_doubling``,
``direct``, ``innetwork``, ``torus``); importing this package registers them all in ``ALGORITHMS``.
``protocols`` holds NCCL's LL/LL128/Simple costs.
"""

from simtrain.collectives import (
    direct,
    halving_doubling,
    hierarchical,
    innetwork,
    ring,
    torus,
    tree,
)
from simtrain.collectives.base import ALGORITHMS, Schedule, get_algorithm, register
from simtrain.collectives.protocols import FAMILY_PROTOCOLS, PROTOCOLS

__all__ = [
    "ALGORITHMS",
    "FAMILY_PROTOCOLS",
    "PROTOCOLS",
    "Schedule",
    "direct",
    "get_algorithm",
    "halving_doubling",
    "hierarchical",
    "innetwork",
    "register",
    "ring",
    "torus",
    "tree",
]
