"""NCCL protocols (LL, LL128, Simple): per-hop latency, base latency and bandwidth share.

Constants from NCCL's cost model, ``src/graph/tuning.cc`` at commit b6475625 (about NCCL
2.19-2.20), as transcribed in ``docs/references/collectives.md`` §6.3. The catalog's link
bandwidths are calibrated on large messages, where NCCL runs Simple; so Simple keeps the
full calibrated bandwidth and the other protocols take NCCL's factors relative to it.

The catalog's link latencies are per ring step under Simple (NCCL's Simple ``hwLat`` for PCI
and NET; for NVLink a fit on vTrain's measured 8 x A100 all-reduce that already includes the
fixed cost), so the Simple ring takes them as they are and adds no separate base latency;
every other (family, protocol) pair uses NCCL's tables.

Left out of NCCL's model: per-channel bandwidth caps, the LL128 x0.7 single-rank-per-node
case and the Simple-ring "plateau" latency factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.collectives.base import Family
from simtrain.topology.base import LINK_CLASSES

US = 1e-6


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol's costs for each algorithm family."""

    name: str
    base_latency_s: dict[str, float]
    """Fixed cost of one collective, by family (NCCL ``baseLat``)."""
    hop_latency_s: dict[str, dict[str, float]]
    """Latency of one step over a link class, by family (NCCL ``hwLat``)."""

    def bandwidth_factor(self, family: Family, kind: str, multi_node: bool) -> float:
        """Share of the Simple protocol's bandwidth this protocol reaches (NCCL factors)."""
        if self.name == "simple" or family in ("nvls", "collnet"):
            return 1.0
        if self.name == "ll128":
            if family == "tree":
                return 120 / 128 if multi_node else 7 / 9
            return 0.92
        if family == "tree":
            return 1 / 3.8
        return 1 / 4 if multi_node or kind in ("all_reduce", "reduce") else 1 / 3

    def link_latency_s(
        self, family: Family, link_class: np.ndarray, base: np.ndarray
    ) -> np.ndarray:
        """Per-link latency under this protocol; links that add no latency keep none.

        Link classes missing from the table keep the topology's (catalog) latency: ICI links
        (TPU, not NCCL's) always, and every class for the Simple ring.
        """
        table = self.hop_latency_s[family]
        by_class = np.array([table.get(name, np.nan) for name in LINK_CLASSES])[link_class]
        return np.where((base > 0) & ~np.isnan(by_class), by_class, base)


PROTOCOLS: dict[str, Protocol] = {
    "ll": Protocol(
        "ll",
        base_latency_s={"ring": 6.6 * US, "tree": 6.8 * US},
        hop_latency_s={
            "ring": {"nvlink": 0.6 * US, "pci": 1.0 * US, "net": 2.7 * US},
            "tree": {"nvlink": 0.6 * US, "pci": 1.0 * US, "net": 5.0 * US},
        },
    ),
    "ll128": Protocol(
        "ll128",
        base_latency_s={"ring": 14.0 * US, "tree": 14.0 * US},
        hop_latency_s={
            "ring": {"nvlink": 1.9 * US, "pci": 2.5 * US, "net": 4.0 * US},
            "tree": {"nvlink": 1.25 * US, "pci": 1.9 * US, "net": 8.5 * US},
        },
    ),
    "simple": Protocol(
        "simple",
        base_latency_s={"ring": 0.0, "tree": 0.0, "nvls": 0.0, "collnet": 0.0},
        hop_latency_s={
            "ring": {},  # the catalog's per-step latencies (module docstring)
            "tree": {"nvlink": 28.0 * US, "pci": 28.0 * US, "net": 28.0 * US},
            "nvls": {"nvlink": 23.0 * US, "pci": 0.0, "net": 18.0 * US},
            "collnet": {"nvlink": 3.7 * US, "pci": 3.7 * US, "net": 31.0 * US},
        },
    ),
}
"""NCCL protocols by name."""

FAMILY_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "ring": ("ll", "ll128", "simple"),
    "tree": ("ll", "ll128", "simple"),
    "nvls": ("simple",),
    "collnet": ("simple",),
}
"""Protocols NCCL can run each family with (NVLS and CollNet (SHARP) are Simple only: their
LL/LL128 rows are empty). CollNet's NCCL bandwidth factors are left out."""
