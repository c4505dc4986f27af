"""TopologySpec: the shape of the network, inside the nodes and between them.

One spec covers every family; each field says which kinds read it, and the topology builder
warns when a field is set that the chosen kind never reads. Fields of switch tiers that a
small cluster does not need (a preset scaled down to one pod) are ignored without a warning.
The defaults describe a full-bisection two- or three-tier fat-tree of 64-port switches
(NVIDIA Quantum-2 has 64 x 400G ports, ``docs/references/hardware.md`` §7.3).
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from simtrain.specs.base import Spec, bounded

TopologyKind = Literal[
    "fat_tree", "rail_optimized", "rail_only", "torus_3d", "dragonfly", "single_node"
]
NodeFabricKind = Literal["auto", "nvswitch", "p2p_mesh", "pcie", "mi250x"]

TOPOLOGY_KINDS: tuple[str, ...] = TopologyKind.__args__  # type: ignore[attr-defined]


class TopologySpec(Spec):
    """Network shape: node fabric, scale-out family and its switch and torus parameters."""

    kind: TopologyKind = "fat_tree"
    """Network family: fat_tree (Clos), rail_optimized, rail_only, torus_3d, dragonfly (HPE
    Slingshot) or single_node."""
    node_fabric: NodeFabricKind = "auto"
    """Fabric inside a node: nvswitch, p2p_mesh (equal links between all pairs), pcie, mi250x
    (the 8 GCDs of 4 MI250X joined by 4-, 2- or 1-link Infinity Fabric pairs), or auto (from
    the scale-up link: NVLink -> nvswitch, MI250X Infinity Fabric on 8-GCD nodes -> mi250x,
    other Infinity Fabric -> p2p_mesh, PCIe -> pcie)."""
    oversubscription: float = bounded(
        1.0, ge=1.0, le=1024, why="one uplink per 1,024 downlinks is no longer a fabric"
    )
    """Ratio of downlink to uplink bandwidth above the leaf switches (1 = full bisection);
    Clos kinds only."""
    pod_oversubscription: float = bounded(1.0, ge=1.0, le=1024, why="as oversubscription")
    """Ratio of downlink to uplink bandwidth above the spine (aggregation) switches of a pod,
    e.g. 7 for Llama 3's 1:7; three-tier Clos only."""
    switch_radix: int = bounded(
        64, ge=2, le=4096, why="8x the largest switch radix shipped (512 ports)"
    )
    """Ports per scale-out switch; sets the default ports per leaf and leaves per pod."""
    num_tiers: Literal[2, 3] | None = None
    """Switch tiers of the Clos (2 = leaf-spine, 3 = leaf-spine-core); omit for the
    smallest that holds the cluster."""
    leaf_down_ports: int | None = bounded(
        None, gt=0, le=4096, why="8x the largest switch radix shipped (512 ports)"
    )
    """NIC ports per leaf switch; omit for switch_radix / 2. For rail kinds this is the
    number of nodes per scalable unit (one leaf per rail per unit)."""
    leaves_per_pod: int | None = bounded(
        None, gt=0, le=4096, why="8x the largest switch radix shipped (512 ports)"
    )
    """Leaf switches joined by one pod's spines; omit for switch_radix (2 tiers) or
    switch_radix / 2 (3 tiers)."""
    spines_per_pod: int | None = bounded(
        None, gt=0, le=4096, why="8x the largest switch radix shipped (512 ports)"
    )
    """Spine switches per pod (and per rail plane for rail_only), each reached by one uplink
    of every leaf; omit for switch_radix / 2."""
    clos_routing: Literal["ecmp", "adaptive"] | None = None
    """How flows spread over equal-cost spines and cores: ecmp (a hash of each flow's ends,
    salted with the experiment's seed, picks its path, so flows collide as on a real fabric)
    or adaptive (each flow takes the least-loaded path, as adaptive routing does); Clos kinds
    only. Omit for each network model's default: the flow model hashes (ecmp), the default
    closed-form model spreads load evenly (adaptive). Set ecmp to have the closed-form model
    charge the expected collision loss too (``simtrain/network/fabric_clos.py``)."""
    ecmp_flows_per_connection: int = bounded(
        1, ge=1, le=256, why="16x Llama 3's 16 flows per GPU pair"
    )
    """Flows (RDMA queue pairs) each connection is split into, each hashed onto its own
    path (NCCL_IB_QPS_PER_CONNECTION; Llama 3's enhanced ECMP: 16,
    docs/references/variability.md §3.1). More flows spread load more evenly; read by the
    closed-form model when clos_routing is ecmp (the flow model hashes one flow per
    connection)."""
    torus_shape: tuple[int, int, int] = (4, 4, 4)
    """X x Y x Z chips of a torus_3d slice (TPU v4 cube = 4x4x4; OCS joins cubes into
    larger shapes; a 2D v5e pod is 16x16x1); torus_3d only."""
    torus_wraparound: bool = True
    """Wrap-around links in every dimension (a torus) rather than an open mesh."""
    num_slices: int = bounded(1, ge=1, le=4096, why="100x the largest multi-slice jobs (~50)")
    """TPU slices of torus_shape each, joined by the data-centre network (DCN: the cluster's
    scale-out link, one port per host of gpus_per_node chips); torus_3d only.
    cluster.num_gpus must equal num_slices times the chips of torus_shape."""
    num_groups: int | None = bounded(None, ge=1, le=4096, why="50x Frontier's 74 groups")
    """Dragonfly groups of the machine (Frontier: 74, LUMI-G: 20); omit for the fewest that
    hold the cluster. Groups beyond the cluster's still carry Valiant detours; dragonfly only."""
    switches_per_group: int = bounded(32, ge=1, le=1024, why="30x a Cray EX cabinet's 32 switches")
    """Switches in a dragonfly group, all-to-all connected (a Cray EX cabinet: 32)."""
    nic_ports_per_switch: int = bounded(
        16, ge=1, le=1024, why="60x a Cray EX switch's 16 NIC ports"
    )
    """NIC ports of each dragonfly switch (Cray EX: 16); a multiple of the NICs per node."""
    links_per_group_pair: int = bounded(4, ge=1, le=1024, why="250x Frontier's 4 links per arc")
    """Global links between every pair of dragonfly groups ("links per arc"; Frontier: 4)."""
    routing: Literal["minimal", "valiant", "ugal"] = "ugal"
    """Dragonfly routing in the flow model: minimal, valiant (detour through a random group)
    or ugal (adaptive: detour the share of flows that balances minimal and Valiant load)."""
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
        for name in ("leaf_down_ports", "spines_per_pod"):
            value = getattr(self, name)
            if value is not None and value > self.switch_radix:
                raise ValueError(
                    f"'topology.{name}'={value} must be at most topology.switch_radix="
                    f"{self.switch_radix} (a switch has no more ports)"
                )
        return self
