"""The ``Topology`` value every builder returns, and the link table builders fill.

A topology is a directed graph: nodes are devices (GPUs, GCDs, TPU chips) followed by
switches; each directed link has a bandwidth per direction, a latency and a class (nvlink,
pci, net, ici) that selects NCCL's per-protocol latency. Links live in flat numpy arrays
indexed by link id, so the flow model can load thousands of routes at once; ``graph`` exposes
the same data as a networkx ``DiGraph`` for inspection, drawing and min-cut checks.

Latency convention: the link a transfer enters the fabric by (device to switch, NIC to leaf,
device to device) carries the per-step latency of the catalog link, which NCCL measures end to
end (``docs/references/collectives.md`` §6.3 ``hwLat``); switch-to-switch links carry none.
The latency of a route is the sum over its links.

Routes are rows of link ids padded with -1 (holes allowed anywhere), built in bulk by the
family's router from device (or switch) indices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

    from simtrain.topology.fat_tree import ClosFabric

LINK_CLASSES: tuple[str, ...] = ("nvlink", "pci", "net", "ici")
"""Link classes, indexed by the codes in ``Topology.link_class``."""


class Router(Protocol):
    """Routes flows in bulk: one row of link ids (padded with -1) per (src, dst) pair."""

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Return an int array of shape (len(src), hops) of link ids, -1 for no link."""
        ...


class LinkTable:
    """Accumulates nodes and directed links while a builder wires a topology."""

    def __init__(self) -> None:
        self.node_names: list[str] = []
        self.node_kinds: list[str] = []
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._bw: list[np.ndarray] = []
        self._lat: list[np.ndarray] = []
        self._cls: list[np.ndarray] = []
        self.num_links = 0

    def add_nodes(self, names: list[str], kind: str) -> np.ndarray:
        """Append nodes of one kind; return their indices."""
        start = len(self.node_names)
        self.node_names.extend(names)
        self.node_kinds.extend([kind] * len(names))
        return np.arange(start, start + len(names))

    def add_links(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        bandwidth_bytes_per_s: float | np.ndarray,
        latency_s: float,
        link_class: str,
    ) -> np.ndarray:
        """Append directed links ``src[i] -> dst[i]``; return their ids (same shape as src)."""
        src = np.asarray(src)
        n = src.size
        self._src.append(src.ravel())
        self._dst.append(np.asarray(dst).ravel())
        self._bw.append(np.broadcast_to(bandwidth_bytes_per_s, src.shape).ravel().astype(float))
        self._lat.append(np.full(n, latency_s))
        self._cls.append(np.full(n, LINK_CLASSES.index(link_class)))
        ids = np.arange(self.num_links, self.num_links + n).reshape(src.shape)
        self.num_links += n
        return ids

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(src, dst, bandwidth, latency, class) of every link, by link id."""
        if not self._src:
            empty = np.zeros(0)
            return empty.astype(int), empty.astype(int), empty, empty, empty.astype(int)
        return tuple(
            np.concatenate(parts)
            for parts in (self._src, self._dst, self._bw, self._lat, self._cls)
        )


@dataclass(frozen=True, eq=False)
class Topology:
    """A wired cluster: devices, switches, directed links, routing and headline figures.

    Device ``i`` sits on node ``i // gpus_per_node``; the placement of global ranks on devices
    is chosen by the user of the topology (the network model takes a rank -> device map).
    """

    kind: str
    """Family that built it (fat_tree, rail_optimized, rail_only, torus_3d, single_node)."""
    num_devices: int
    """Accelerators; they are graph nodes 0 .. num_devices - 1."""
    gpus_per_node: int
    """Devices per node (per host for a torus)."""
    node_names: tuple[str, ...]
    """Name of every graph node, devices first."""
    node_kinds: tuple[str, ...]
    """Kind of every graph node: device, nvswitch, pcie_switch, leaf, spine, core."""
    link_src: np.ndarray
    """Source node of every link."""
    link_dst: np.ndarray
    """Destination node of every link."""
    link_bandwidth_bytes_per_s: np.ndarray
    """Achievable bandwidth of every link in its direction (line rate x efficiency)."""
    link_latency_s: np.ndarray
    """Latency added by every link (see the module docstring)."""
    link_class: np.ndarray
    """Class code of every link, an index into ``LINK_CLASSES``."""
    router: Router
    """Bulk router of the family."""
    bisection_bandwidth_bytes_per_s: float
    """Bandwidth across the worst cut into two halves of the nodes, per direction."""
    nics_per_node: int
    """Scale-out NICs per node (0 for a single node or a torus)."""
    node_fabric: str = "none"
    """Fabric inside a node: nvswitch, p2p_mesh, pcie, or none (torus chips)."""
    sharp: ClosFabric | None = None
    """The scale-out Clos when its switches reduce in-network (InfiniBand SHARP)."""
    clos: ClosFabric | None = None
    """The scale-out Clos (leaves, spines, cores), whether or not it reduces; None for a
    single node or a torus."""
    torus_shape: tuple[int, int, int] | None = None
    """X x Y x Z of a torus with wrap-around (device i at x + X(y + Yz)); None otherwise."""
    nvls_switch: np.ndarray | None = None
    """Per node, the graph index of its NVSwitch when it can reduce in-network (NVLS)."""
    details: dict[str, str] = field(default_factory=dict)
    """Human-readable facts (tiers, switch counts, links used) for ``simtrain topology``."""
    chips_per_slice: int | None = None
    """Chips of one ICI slice of a torus_3d topology (slice s holds chips s*C .. s*C+C-1);
    None for other kinds."""
    ring_order: Callable[[np.ndarray], np.ndarray] | None = None
    """Given local device indices of one node, the order a ring should visit them in (a
    wired node's widest ring); None when any order is as good (switched or uniform fabrics)."""

    @property
    def num_nodes(self) -> int:
        """Nodes (hosts) holding the devices."""
        return -(-self.num_devices // self.gpus_per_node)

    @property
    def num_links(self) -> int:
        """Directed links."""
        return int(self.link_src.size)

    def routes(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Link ids of the route of each (src, dst) pair, padded with -1."""
        return self.router(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))

    def count_nodes(self) -> dict[str, int]:
        """Number of graph nodes of each kind."""
        kinds, counts = np.unique(np.array(self.node_kinds), return_counts=True)
        return {str(k): int(c) for k, c in zip(kinds, counts, strict=True)}

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The topology as a networkx DiGraph (built on first use; O(links))."""
        import networkx as nx  # inspection only: timing a network never needs it

        g = nx.DiGraph(kind=self.kind)
        for i, (name, kind) in enumerate(zip(self.node_names, self.node_kinds, strict=True)):
            g.add_node(i, name=name, kind=kind)
        for lid in range(self.num_links):
            g.add_edge(
                int(self.link_src[lid]),
                int(self.link_dst[lid]),
                link_id=lid,
                bandwidth_bytes_per_s=float(self.link_bandwidth_bytes_per_s[lid]),
                latency_s=float(self.link_latency_s[lid]),
                link_class=LINK_CLASSES[int(self.link_class[lid])],
            )
        return g


def pad_columns(*columns: np.ndarray) -> np.ndarray:
    """Stack route fragments (1-D columns or 2-D blocks, -1 = no link) side by side."""
    return np.column_stack([c.reshape(len(c), -1) for c in columns]).astype(np.int64)


def ecmp_hash(src: np.ndarray, dst: np.ndarray, salt: int) -> np.ndarray:
    """Deterministic per-flow hash of (src, dst), as a switch hashes a flow's header.

    A splitmix64-style mix: the same pair always takes the same path (no reordering), and
    different pairs spread over the equal-cost paths, colliding as real ECMP does.

    Examples:
        >>> h = ecmp_hash(np.array([0, 1]), np.array([5, 5]), salt=1)
        >>> bool((h == ecmp_hash(np.array([0, 1]), np.array([5, 5]), salt=1)).all())
        True
    """
    x = src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= dst.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(salt)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return x
