"""NCCL's cost-model constants: protocols (LL, LL128, Simple) by algorithm family.

Numbers from NCCL's tuning model, ``src/graph/tuning.cc`` at commit b6475625 (about NCCL
2.19-2.20; ``docs/references/collectives.md`` §6.3, version A): the fixed cost of one
collective (``baseLat``), the latency of one step over a link class (``hwLat``), the share
of the Simple protocol's bus bandwidth each protocol reaches, the low-latency protocol's
bandwidth cap (``llMaxBws``) and the tree's correction factor by message size. Both network
models read them: the closed-form tuner (:mod:`simtrain.collectives.cost`) and the flow
model (:mod:`simtrain.network.flow_model`).

The catalog's link bandwidths are measured with large messages, where NCCL runs Simple; so
Simple keeps the full calibrated bus bandwidth and the other protocols take NCCL's factors
relative to it. Links of a class NCCL does not know (``ici``: TPU chips, XLA collectives)
keep the catalog latency and get no protocol effects.

Left out of NCCL's model: the per-channel bandwidth caps (the channel count is not
modelled), the Simple-ring "plateau" latency factor and the CPU-vendor dependence of the
LL caps (the Intel row is used for multi-node groups).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simtrain.topology.base import LINK_CLASSES

US = 1e-6

PROTOCOL_NAMES: tuple[str, ...] = ("ll", "ll128", "simple")
"""NCCL's protocols, fastest start first."""

BASE_LATENCY_S: dict[str, dict[str, float]] = {
    "ring": {"ll": 6.6 * US, "ll128": 14.0 * US, "simple": 8.4 * US},
    "tree": {"ll": 6.8 * US, "ll128": 14.0 * US, "simple": 0.0},
    "collnet": {"simple": 0.0},
    "nvls": {"simple": 0.0},
    "nvls_tree": {"simple": 0.0},
}
"""``baseLat``: fixed cost of one collective by family and protocol (§6.3 version A)."""

HW_LATENCY_S: dict[str, dict[str, dict[str, float]]] = {
    "ring": {
        "ll": {"nvlink": 0.6 * US, "pci": 1.0 * US, "net": 2.7 * US},
        "ll128": {"nvlink": 1.9 * US, "pci": 2.5 * US, "net": 4.0 * US},
        "simple": {"nvlink": 3.4 * US, "pci": 5.7 * US, "net": 14.0 * US},
    },
    "tree": {
        "ll": {"nvlink": 0.6 * US, "pci": 1.0 * US, "net": 5.0 * US},
        "ll128": {"nvlink": 1.25 * US, "pci": 1.9 * US, "net": 8.5 * US},
        "simple": {"nvlink": 28.0 * US, "pci": 28.0 * US, "net": 28.0 * US},
    },
    "collnet": {"simple": {"nvlink": 3.7 * US, "pci": 3.7 * US, "net": 31.0 * US}},
    "nvls": {"simple": {"nvlink": 23.0 * US, "pci": 0.0, "net": 18.0 * US}},
    "nvls_tree": {"simple": {"nvlink": 23.0 * US, "pci": 0.0, "net": 14.0 * US}},
}
"""``hwLat``: latency of one step over a link class, by family and protocol (§6.3 version A;
CollNet is CollNet Direct)."""

NET_OVERHEAD_S = 1.0 * US
"""Per-step network overhead on the host CPU (Intel; 2 µs on AMD), x3 under Simple; an
intra-node step of a multi-node ring costs at least this (§6.3)."""

LL_MAX_BUSBW_BYTES_PER_S = (87.7e9, 39.0e9, 20.4e9)
"""``llMaxBws``: the LL protocol's bus-bandwidth cap on 1 node (Ampere/Hopper), 2 nodes and
more (Intel hosts), §6.3."""

TREE_SHARE = 0.92
"""Tree bus bandwidth relative to the ring's: "Tree (any protocol) × 0.92" (§6.3)."""
TREE_PATTERN_SHARE = 0.85
""""Tree using the TREE pattern additional × 0.85" (§6.3)."""
TREE_EFFICIENCY = TREE_SHARE * TREE_PATTERN_SHARE
"""Both: the tree's share of the ring bandwidth. It matches the measured Tree/Ring ratio of
150/190 on 5 x 8 H100 (§6.2, NVIDIA/nccl#1368)."""

TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "ll": (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
           0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
              0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0),
    "simple": (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
               0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9),
}  # fmt: skip
"""Tree all-reduce bandwidth correction by log2(bytes / 64), buckets 64 B ... 256 MB (§6.3)."""

FAMILY_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "ring": PROTOCOL_NAMES,
    "tree": PROTOCOL_NAMES,
    "nvls": ("simple",),
    "nvls_tree": ("simple",),
    "collnet": ("simple",),
}
"""Protocols NCCL can run each family with (NVLS, NVLS-tree and CollNet are Simple only:
their LL/LL128 rows are empty in §6.3)."""


def uses_catalog_latency(family: str, protocol: str) -> bool:
    """Whether a step takes the catalog link's latency rather than NCCL's ``hwLat``.

    The catalog's per-step latency of a link is NCCL's Simple-ring ``hwLat`` for its class
    (NVLink 3.4 µs, PCI 5.7 µs, NET 14 µs) unless a measurement fitted it (Slingshot-11):
    the Simple ring uses it, so that a fitted link keeps its fit; the other protocols and
    families use NCCL's table.
    """
    return family == "ring" and protocol == "simple"


def tree_correction(protocol: str, size_bytes: float) -> float:
    """NCCL's tree correction factor, interpolated between size buckets.

    NCCL applies one factor per power-of-two bucket, a step function under which a bigger
    message can finish sooner (the factor rises from one bucket to the next by up to 25 %).
    Interpolating linearly in log2(size) between bucket centres keeps the factor's
    logarithmic slope below one, so time stays non-decreasing in size.

    Examples:
        >>> tree_correction("simple", 64 * 2**11.5), tree_correction("ll", 1.0)
        (0.5, 1.0)
    """
    table = TREE_CORRECTION[protocol]
    position = math.log2(max(size_bytes, 1.0) / 64) - 0.5
    if position <= 0:
        return table[0]
    if position >= len(table) - 1:
        return table[-1]
    low = int(position)
    return table[low] + (table[low + 1] - table[low]) * (position - low)


def bandwidth_factor(
    family: str, protocol: str, kind: str, num_nodes: int, ranks_per_node: int
) -> float:
    """Share of the Simple protocol's bus bandwidth that ``protocol`` reaches (§6.3).

    Ring LL: 1/4 across nodes or for all-reduce and reduce, else 1/3; ring LL128: 0.92, or
    0.7 with one rank per node; tree LL: 1/3.8; tree LL128: 7/9 in one node, 120/128 across
    nodes. NVLS, NVLS-tree and CollNet run Simple only.
    """
    if protocol == "simple" or family not in ("ring", "tree"):
        return 1.0
    if family == "tree":
        if protocol == "ll":
            return 1 / 3.8
        return 7 / 9 if num_nodes == 1 else 120 / 128
    if protocol == "ll":
        return 1 / 4 if num_nodes > 1 or kind in ("all_reduce", "reduce") else 1 / 3
    return 0.7 if ranks_per_node < 2 else 0.92


def ll_cap_bytes_per_s(num_nodes: int) -> float:
    """The LL protocol's bus-bandwidth cap for a group over ``num_nodes`` nodes."""
    return LL_MAX_BUSBW_BYTES_PER_S[0 if num_nodes <= 1 else 1 if num_nodes == 2 else 2]


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol's costs for each algorithm family, as the flow model applies them."""

    name: str

    @property
    def base_latency_s(self) -> dict[str, float]:
        """Fixed cost of one collective, by family (NCCL ``baseLat``)."""
        return {f: table[self.name] for f, table in BASE_LATENCY_S.items() if self.name in table}

    def bandwidth_factor(self, family: str, kind: str, multi_node: bool) -> float:
        """Share of the Simple protocol's bandwidth this protocol reaches (NCCL factors)."""
        return bandwidth_factor(family, self.name, kind, 2 if multi_node else 1, 2)

    def link_latency_s(self, family: str, link_class: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Per-link latency under this protocol; links that add no latency keep none.

        Link classes missing from NCCL's table (``ici``) keep the catalog latency, and so
        does every link under the Simple ring (see :func:`uses_catalog_latency`).
        """
        if uses_catalog_latency(family, self.name):
            return base
        table = HW_LATENCY_S[family][self.name]
        by_class = np.array([table.get(name, np.nan) for name in LINK_CLASSES])[link_class]
        return np.where((base > 0) & ~np.isnan(by_class), by_class, base)


PROTOCOLS: dict[str, Protocol] = {name: Protocol(name) for name in PROTOCOL_NAMES}
"""NCCL protocols by name."""
