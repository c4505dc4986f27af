"""TopologySpec: the shape of the scale-out network (owned by the topology layer)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simtrain.specs.base import Spec

TopologyKind = Literal["fat_tree", "rail_optimized", "rail_only", "torus_3d", "single_node"]


class TopologySpec(Spec):
    """Scale-out network shape between nodes."""

    kind: TopologyKind = "fat_tree"
    """Network family: fat_tree (Clos), rail_optimized, rail_only, torus_3d or single_node."""
    oversubscription: float = Field(default=1.0, ge=1.0)
    """Ratio of downlink to uplink bandwidth above the leaf switches (1 = full bisection)."""
