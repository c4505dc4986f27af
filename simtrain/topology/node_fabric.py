"""Node fabrics: how the devices of one node reach each other.

Three families, all built for every node of a cluster at once:

- ``nvswitch``: every device has one port group to a non-blocking switch plane (DGX/HGX A100
  with 6 NVSwitches, H100 with 4; modelled as one switch node per server). Any device can
  send at its full NVLink bandwidth to any other; H100-class switches reduce in-network
  (NVLS, ``docs/references/hardware.md`` §7.2: "NVSwitch gen 3 ... SHARP (NVLS)").
- ``p2p_mesh``: a direct link between every pair of devices (AMD Infinity Fabric; an MI250X
  node holds 8 GCDs), each carrying 1/(g-1) of the device's fabric bandwidth.
- ``pcie``: devices hang off one PCIe switch (a star like ``nvswitch``, at PCIe rates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.errors import SpecError
from simtrain.specs.hardware import LinkSpec
from simtrain.topology.base import LinkTable

NVLS_LINKS = frozenset({"nvlink4", "nvlink5"})
"""Scale-up links whose switches reduce in-network (NVSwitch gen 3 and later,
docs/references/hardware.md §7.2); NVSwitch gen 2 (A100, nvlink3) cannot."""

NODE_FABRICS: tuple[str, ...] = ("nvswitch", "p2p_mesh", "pcie")


def default_node_fabric(scale_up_link: str) -> str:
    """Node fabric implied by a scale-up link name.

    Examples:
        >>> default_node_fabric("nvlink4"), default_node_fabric("infinity-fabric-mi250x")
        ('nvswitch', 'p2p_mesh')
    """
    if scale_up_link.startswith("nvlink"):
        return "nvswitch"
    if scale_up_link.startswith("infinity-fabric"):
        return "p2p_mesh"
    if scale_up_link.startswith("pcie"):
        return "pcie"
    raise SpecError(
        f"'cluster.topology.node_fabric' must be set for scale-up link {scale_up_link!r} "
        f"(valid: {', '.join(NODE_FABRICS)})"
    )


@dataclass(frozen=True)
class NodeFabric:
    """Link ids of the fabric inside every node.

    For star fabrics (nvswitch, pcie) ``up[d]`` and ``down[d]`` join device ``d`` and its
    node's switch ``switch[node]``; for the mesh ``pair[node, a, b]`` joins local devices
    ``a -> b`` (-1 on the diagonal).
    """

    kind: str
    gpus_per_node: int
    up: np.ndarray | None = None
    down: np.ndarray | None = None
    switch: np.ndarray | None = None
    pair: np.ndarray | None = None

    def routes(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Routes between devices of one node, or a device and its node's switch."""
        same = src == dst
        if self.pair is not None:
            g = self.gpus_per_node
            ids = self.pair[src // g, src % g, dst % g]
            return np.where(same, -1, ids)[:, None]
        assert self.up is not None and self.down is not None  # star fabric by construction
        # Either end may be the node's switch itself (in-network reduction flows).
        n = self.up.size
        first = np.where((src < n) & ~same, self.up[np.minimum(src, n - 1)], -1)
        second = np.where((dst < n) & ~same, self.down[np.minimum(dst, n - 1)], -1)
        return np.column_stack([first, second])


def build_node_fabric(
    table: LinkTable, kind: str, num_nodes: int, gpus_per_node: int, link: LinkSpec
) -> NodeFabric:
    """Add the switches and links of ``kind`` for every node; devices must be nodes 0..N-1."""
    g = gpus_per_node
    devices = np.arange(num_nodes * g)
    bw = link.effective_bandwidth_bytes_per_s
    link_class = "pci" if kind == "pcie" else "nvlink"
    if kind == "p2p_mesh":
        pair = np.full((num_nodes, g, g), -1, dtype=np.int64)
        if g > 1:
            a, b = np.nonzero(~np.eye(g, dtype=bool))
            src = (np.arange(num_nodes)[:, None] * g + a[None, :]).ravel()
            dst = (np.arange(num_nodes)[:, None] * g + b[None, :]).ravel()
            ids = table.add_links(src, dst, bw / (g - 1), link.latency_s, link_class)
            pair[:, a, b] = ids.reshape(num_nodes, -1)
        return NodeFabric(kind, g, pair=pair)
    if kind not in NODE_FABRICS:
        raise SpecError(
            f"'cluster.topology.node_fabric' must be one of {', '.join(NODE_FABRICS)} "
            f"(got {kind!r})"
        )
    switch_kind = "nvswitch" if kind == "nvswitch" else "pcie_switch"
    switch = table.add_nodes([f"n{k}/{switch_kind}" for k in range(num_nodes)], switch_kind)
    node = devices // g
    up = table.add_links(devices, switch[node], bw, link.latency_s, link_class)
    down = table.add_links(switch[node], devices, bw, 0.0, link_class)
    return NodeFabric(kind, g, up=up, down=down, switch=switch)
