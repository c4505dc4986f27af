"""Topology layer: pure builders that wire a cluster into a ``Topology`` (graph + routing).

Entry point: :func:`build_topology` (ClusterSpec -> Topology). Families live one per module:
``node_fabric`` (NVSwitch, P2P mesh, PCIe), ``fat_tree`` (2/3-tier Clos), ``rail``
(rail-optimized, rail-only), ``torus`` (3D torus); ``routing`` holds ECMP and PXN.
"""

from simtrain.topology.base import LINK_CLASSES, Topology
from simtrain.topology.build import build_topology, cluster_links

__all__ = ["LINK_CLASSES", "Topology", "build_topology", "cluster_links"]
