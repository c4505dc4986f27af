"""What the closed-form network model needs to know about a process group: ``GroupFabric``.

The default network model (:mod:`simtrain.network.nccl`) never routes flows. For each
process group it asks the topology, once, for a few effective figures: how many nodes the
group spans, the ring bus bandwidth the group reaches inside a node and across nodes, the
link classes that set NCCL's per-step latencies, and whether the fabric reduces in-network.
It then times every collective on the group in closed form, as NCCL's tuner does.

**The hook for topology kinds.** Every topology kind (``Topology.kind``) registers one
function with :func:`register_fabric_view`::

    @register_fabric_view("dragonfly")
    def dragonfly_view(topology: Topology, cluster: ClusterSpec, devices: np.ndarray)
        -> GroupFabric: ...

``devices[i]`` is the device of group rank i (after placement); the function returns the
group's :class:`GroupFabric`. It must be pure and cheap (it runs once per distinct group,
up to thousands of times for a 16K-GPU job in full mode), and it must describe the group
*as SPMD runs it*: every replica of the group (all data-parallel groups, all tensor-
parallel groups) communicates at the same moment, so a shared tier (a leaf's uplinks, a
dragonfly group's global links, a slice's DCN ports) is loaded by all of them. A "node" is
a scale-up domain: an NVLink server, a TPU slice (whose chips reach each other over ICI).

What the figures mean, so that new kinds agree with the built-in ones:

- ``intra.bandwidth_bytes_per_s``: the nccl-tests bus bandwidth of a large ring all-reduce
  over the group's ranks of one node (230 GB/s on 8 x A100, 370 GB/s on 8 x H100).
- ``inter.bandwidth_bytes_per_s``: the bus bandwidth the group's ring can reach across
  nodes, i.e. what one node's usable NICs carry per direction after every shared tier takes
  its toll (192 GB/s for 2 x DGX A100 with 8 HDR NICs: 8 x 24 GB/s), and after the group's
  replicas on the same node took their share of its NICs. The ring's bus bandwidth is
  ``min(intra, inter)``.
- ``inter.flow_bandwidth_bytes_per_s``: one point-to-point transfer between two nodes (one
  NIC, after the same tolls); ``intra.flow_bandwidth_bytes_per_s`` the same inside a node.
- ``latency_s`` and ``link_class``: the catalog's per-step latency of the tier's links and
  their class (``nvlink``, ``pci``, ``net``, ``ici``), which selects NCCL's latencies.

Built-in views: :mod:`simtrain.network.fabric_clos` (single node, fat-tree, rail-optimized,
rail-only), :mod:`simtrain.network.fabric_torus` (TPU slices and DCN) and
:mod:`simtrain.network.fabric_dragonfly` (dragonfly).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simtrain.specs.cluster import ClusterSpec
from simtrain.topology.base import Topology


@dataclass(frozen=True)
class Tier:
    """The links a group uses on one tier (inside nodes, or between them)."""

    bandwidth_bytes_per_s: float
    """Bus bandwidth of a large ring over the group on this tier (see the module docstring)."""
    latency_s: float
    """Catalog per-step latency of the tier's links."""
    link_class: str
    """Class of the tier's links (``LINK_CLASSES``): selects NCCL's latencies."""
    flow_bandwidth_bytes_per_s: float
    """Bandwidth of one point-to-point transfer on this tier."""
    exchange_bandwidth_bytes_per_s: float = 0.0
    """Per node, the bandwidth of an all-to-all among the group's nodes (every node sends to
    every other at once); 0 means ``bandwidth_bytes_per_s``."""

    @property
    def exchange_bytes_per_s(self) -> float:
        """All-to-all bandwidth per node (``exchange_bandwidth_bytes_per_s`` or the ring's)."""
        return self.exchange_bandwidth_bytes_per_s or self.bandwidth_bytes_per_s


@dataclass(frozen=True)
class MultiRing:
    """Rings along several torus dimensions at once (TPU ICI): more links per chip."""

    bandwidth_bytes_per_s: float
    """Bus bandwidth of the multi-dimensional ring all-reduce over the group."""
    steps: int
    """Sequential steps of one reduce-scatter pass (sum over dimensions of length - 1)."""


@dataclass(frozen=True)
class GroupFabric:
    """The effective fabric of one process group (see the module docstring)."""

    num_ranks: int
    """Ranks in the group."""
    num_nodes: int
    """Scale-up domains (nodes, TPU slices) the group spans."""
    ranks_per_node: int
    """Fewest group ranks on one of its nodes (NCCL opens that many channels at most)."""
    intra: Tier
    """Inside a node."""
    inter: Tier | None = None
    """Between nodes; None when the group sits in one node."""
    nvls: bool = False
    """The node's switch reduces in-network (NVLink SHARP, H100-class NVSwitch)."""
    collnet: bool = False
    """The scale-out switches reduce in-network (InfiniBand SHARP, NCCL's CollNet)."""
    multi_ring: MultiRing | None = None
    """Multi-dimensional rings the group can run (a full sub-box of a torus), if any."""
    cross_rail_via_scale_up: bool = False
    """Traffic between different rails first crosses the node fabric (NCCL's PXN on rail
    networks): it loads the scale-up links of all-to-all exchanges."""
    notes: dict[str, float] = field(default_factory=dict)
    """Factors applied on the way (e.g. ``oversubscription_share``), for reports."""

    @property
    def ring_bandwidth_bytes_per_s(self) -> float:
        """Bus bandwidth of a large ring over the whole group: the slower tier."""
        if self.inter is None:
            return self.intra.bandwidth_bytes_per_s
        return min(self.intra.bandwidth_bytes_per_s, self.inter.bandwidth_bytes_per_s)


FabricView = Callable[[Topology, ClusterSpec, np.ndarray], GroupFabric]
"""``view(topology, cluster, devices) -> GroupFabric``: one per topology kind."""

FABRIC_VIEWS: dict[str, FabricView] = {}
"""Registered views by topology kind (filled by :func:`register_fabric_view`)."""


def register_fabric_view(*kinds: str) -> Callable[[FabricView], FabricView]:
    """Decorator registering the view of the topology kinds ``kinds``."""

    def decorate(view: FabricView) -> FabricView:
        for kind in kinds:
            FABRIC_VIEWS[kind] = view
        return view

    return decorate


def group_fabric(topology: Topology, cluster: ClusterSpec, devices: np.ndarray) -> GroupFabric:
    """The :class:`GroupFabric` of the group on ``devices``, from its kind's view.

    A kind without a view of its own gets the node-fabric-plus-NICs view of the Clos kinds,
    which without a Clos (``Topology.clos``) sees the scale-out network as non-blocking.
    """
    # Importing the built-in views registers them (kept out of import time of this module).
    from simtrain.network import fabric_clos, fabric_dragonfly, fabric_torus  # noqa: F401

    view = FABRIC_VIEWS.get(topology.kind, fabric_clos.clos_view)
    return view(topology, cluster, np.asarray(devices, dtype=np.int64))
