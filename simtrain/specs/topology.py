"""TopologySpec: the shape of the network, inside the nodes and between them.

One spec covers every family; each field says which kinds read it, and the topology builder
warns when a field is set that the chosen kind never reads. Fields of switch tiers that a
small cluster does not need (a preset scaled down to one pod) are ignored without a warning.
The defaults describe a full-bisection two- or three-tier fat-tree of 64-port switches
(NVIDIA Quantum-2 has 64 x 400G ports, ``docs/references/hardware.md`` §7.3).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simtrain.specs.base import Spec

TopologyKind = Literal["fat_tree", "rail_optimized", "rail_only", "torus_3d", "single_node"]
NodeFabricKind = Literal["auto", "nvswitch", "p2p_mesh", "pcie"]

TOPOLOGY_KINDS: tuple[str, ...] = TopologyKind.__args__  # type: ignore[attr-defined]


class TopologySpec(Spec):
    """Network shape: node fabric, scale-out family and its switch and torus parameters."""

    kind: TopologyKind = "fat_tree"
    """Network family: fat_tree (Clos), rail_optimized, rail_only, torus_3d or single_node."""
    node_fabric: NodeFabricKind = "auto"
    """Fabric inside a node: nvswitch, p2p_mesh (Infinity Fabric), pcie, or auto (from the
    scale-up link: NVLink -> nvswitch, Infinity Fabric -> p2p_mesh, PCIe -> pcie)."""
    oversubscription: float = Field(default=1.0, ge=1.0)
    """Ratio of downlink to uplink bandwidth above the leaf switches (1 = full bisection);
    Clos kinds only."""
    pod_oversubscription: float = Field(default=1.0, ge=1.0)
    """Ratio of downlink to uplink bandwidth above the spine (aggregation) switches of a pod,
    e.g. 7 for Llama 3's 1:7; three-tier Clos only."""
    switch_radix: int = Field(default=64, ge=2)
    """Ports per scale-out switch; sets the default ports per leaf and leaves per pod."""
    num_tiers: Literal[2, 3] | None = None
    """Switch tiers of the Clos (2 = leaf-spine, 3 = leaf-spine-core); omit for the
    smallest that holds the cluster."""
    leaf_down_ports: int | None = Field(default=None, gt=0)
    """NIC ports per leaf switch; omit for switch_radix / 2. For rail kinds this is the
    number of nodes per scalable unit (one leaf per rail per unit)."""
    leaves_per_pod: int | None = Field(default=None, gt=0)
    """Leaf switches joined by one pod's spines; omit for switch_radix (2 tiers) or
    switch_radix / 2 (3 tiers)."""
    spines_per_pod: int | None = Field(default=None, gt=0)
    """Spine switches per pod (and per rail plane for rail_only), each reached by one uplink
    of every leaf; omit for switch_radix / 2."""
    torus_shape: tuple[int, int, int] = (4, 4, 4)
    """X x Y x Z chips of a torus_3d slice (TPU v4 cube = 4x4x4; OCS joins cubes into
    larger shapes); torus_3d only. Its product must equal cluster.num_gpus."""
    torus_wraparound: bool = True
    """Wrap-around links in every dimension (a torus) rather than an open mesh."""
    sharp: bool = False
    """Scale-out switches reduce in-network (InfiniBand SHARP on Quantum-class switches),
    enabling the ``sharp`` all-reduce; Clos kinds only."""

    @model_validator(mode="after")
    def _check_shape(self) -> TopologySpec:
        """Cross-field rules of the shape."""
        if any(d < 1 for d in self.torus_shape):
            raise ValueError(
                f"'topology.torus_shape' must have positive sizes (got {list(self.torus_shape)})"
            )
        if self.switch_radix % 2:
            raise ValueError(f"'topology.switch_radix' must be even (got {self.switch_radix})")
        return self
