"""Node fabrics: how the devices of one node reach each other.

Four families, all built for every node of a cluster at once:

- ``nvswitch``: every device has one port group to a non-blocking switch plane (DGX/HGX A100
  with 6 NVSwitches, H100 with 4; modelled as one switch node per server). Any device can
  send at its full NVLink bandwidth to any other; H100-class switches reduce in-network
  (NVLS, ``docs/references/hardware.md`` §7.2: "NVSwitch gen 3 ... SHARP (NVLS)").
- ``p2p_mesh``: a direct link between every pair of devices (AMD Infinity Fabric; an MI250X
  node holds 8 GCDs), each carrying 1/(g-1) of the device's fabric bandwidth.
- ``pcie``: devices hang off one PCIe switch (a star like ``nvswitch``, at PCIe rates).
- a wired node (``mi250x``, from ``simtrain.catalog.node_wirings``): only the wired pairs have
  links, each at the measured bandwidth of its number of lanes (an MI250X GCD pair with four
  Infinity Fabric links moves 148 GB/s, with one 38 GB/s). Devices without a direct link reach
  each other over the fewest hops, preferring the widest path; collectives order a node's
  devices along the ring of widest bottleneck (:meth:`NodeFabric.ring_order`), as RCCL's ring
  search does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise, permutations

import numpy as np

from simtrain.catalog.node_wirings import NODE_WIRINGS, NodeWiring
from simtrain.errors import SpecError
from simtrain.specs.hardware import LinkSpec
from simtrain.topology.base import LinkTable

NVLS_LINKS = frozenset({"nvlink4", "nvlink4-h800", "nvlink5"})
"""Scale-up links whose switches reduce in-network (NVSwitch gen 3 and later,
docs/references/hardware.md §7.2); NVSwitch gen 2 (A100, nvlink3) cannot."""

NODE_FABRICS: tuple[str, ...] = ("nvswitch", "p2p_mesh", "pcie", *NODE_WIRINGS)
WIRED_LINKS: dict[str, str] = {"infinity-fabric-mi250x": "mi250x"}
"""Scale-up links whose nodes have a catalog wiring (used by ``auto`` for full nodes)."""


def default_node_fabric(scale_up_link: str, gpus_per_node: int = 0) -> str:
    """Node fabric implied by a scale-up link name (and the node size, for wired nodes).

    Examples:
        >>> default_node_fabric("nvlink4"), default_node_fabric("infinity-fabric-mi250x", 8)
        ('nvswitch', 'mi250x')
        >>> default_node_fabric("infinity-fabric-mi300x", 8)
        'p2p_mesh'
    """
    wiring = WIRED_LINKS.get(scale_up_link)
    if wiring is not None and NODE_WIRINGS[wiring].num_devices == gpus_per_node:
        return wiring
    if scale_up_link.startswith("nvlink"):
        return "nvswitch"
    if scale_up_link.startswith(("infinity-fabric", "ici")):
        # TPU chips of one host outside a torus slice reach each other over ICI directly.
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
    node's switch ``switch[node]``; for point-to-point fabrics (a mesh or a wired node)
    ``path[node, a, b]`` lists the link ids from local device ``a`` to ``b`` (-1 padded).
    """

    kind: str
    gpus_per_node: int
    up: np.ndarray | None = None
    down: np.ndarray | None = None
    switch: np.ndarray | None = None
    path: np.ndarray | None = None
    wiring: NodeWiring | None = field(default=None, compare=False)

    def routes(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Routes between devices of one node, or a device and its node's switch."""
        same = src == dst
        if self.path is not None:
            g = self.gpus_per_node
            ids = self.path[src // g, src % g, dst % g]
            return np.where(same[:, None], -1, ids)
        assert self.up is not None and self.down is not None  # star fabric by construction
        # Either end may be the node's switch itself (in-network reduction flows).
        n = self.up.size
        first = np.where((src < n) & ~same, self.up[np.minimum(src, n - 1)], -1)
        second = np.where((dst < n) & ~same, self.down[np.minimum(dst, n - 1)], -1)
        return np.column_stack([first, second])

    def ring_order(self, local: np.ndarray) -> np.ndarray:
        """``local`` device indices in the order a ring over them should visit them.

        Uniform fabrics keep the given order; a wired node returns the cycle whose narrowest
        hop is widest (see :func:`widest_ring`).
        """
        if self.wiring is None or local.size <= 2:
            return local
        return np.asarray(widest_ring(self.wiring, tuple(int(d) for d in local)))


def pair_bandwidths(wiring: NodeWiring) -> np.ndarray:
    """(g, g) one-direction bandwidth of the direct link of every pair (0 = no link)."""
    bw = np.zeros((wiring.num_devices, wiring.num_devices))
    for a, b, links in wiring.pairs:
        bw[a, b] = bw[b, a] = wiring.bandwidth_bytes_per_s(links)
    return bw


def wired_paths(wiring: NodeWiring) -> dict[tuple[int, int], list[int]]:
    """Device path for every ordered pair: fewest hops, then the widest bottleneck.

    Examples:
        >>> from simtrain.catalog.node_wirings import MI250X
        >>> wired_paths(MI250X)[(0, 6)], wired_paths(MI250X)[(0, 3)]
        ([0, 6], [0, 1, 3])
    """
    import networkx as nx  # wired nodes only (MI250X); most runs never import it

    bw = pair_bandwidths(wiring)
    graph = nx.Graph()
    graph.add_nodes_from(range(wiring.num_devices))
    graph.add_edges_from((a, b) for a, b, _ in wiring.pairs)
    paths = {}
    for a in range(wiring.num_devices):
        for b in range(wiring.num_devices):
            if a == b:
                continue
            candidates = sorted(nx.all_shortest_paths(graph, a, b))
            paths[a, b] = max(candidates, key=lambda p: min(bw[x, y] for x, y in pairwise(p)))
    return paths


@lru_cache(maxsize=256)
def widest_ring(wiring: NodeWiring, local: tuple[int, ...]) -> tuple[int, ...]:
    """The cycle through ``local`` whose narrowest hop is widest (first found on ties).

    A hop between devices without a direct link counts at its path's bottleneck divided by
    its hops (it loads several links). Exhaustive over (n-1)! cycles: n is at most the 8
    devices of a node.

    Examples:
        >>> from simtrain.catalog.node_wirings import MI250X
        >>> widest_ring(MI250X, tuple(range(8)))
        (0, 1, 5, 4, 2, 3, 7, 6)
    """
    bw = pair_bandwidths(wiring)
    paths = wired_paths(wiring)
    hop_bw = np.zeros_like(bw)
    for (a, b), path in paths.items():
        hops = list(pairwise(path))
        hop_bw[a, b] = min(bw[x, y] for x, y in hops) / len(hops)
    first, rest = local[0], local[1:]
    best, best_score = local, -1.0
    for perm in permutations(rest):
        cycle = (first, *perm)
        score = min(hop_bw[x, y] for x, y in zip(cycle, (*cycle[1:], first), strict=True))
        if score > best_score:
            best, best_score = cycle, score
    return best


def build_node_fabric(
    table: LinkTable, kind: str, num_nodes: int, gpus_per_node: int, link: LinkSpec
) -> NodeFabric:
    """Add the switches and links of ``kind`` for every node; devices must be nodes 0..N-1."""
    g = gpus_per_node
    devices = np.arange(num_nodes * g)
    bw = link.effective_bandwidth_bytes_per_s
    link_class = "pci" if kind == "pcie" else "nvlink"
    if kind == "p2p_mesh":
        path = np.full((num_nodes, g, g, 1), -1, dtype=np.int64)
        if g > 1:
            a, b = np.nonzero(~np.eye(g, dtype=bool))
            src = (np.arange(num_nodes)[:, None] * g + a[None, :]).ravel()
            dst = (np.arange(num_nodes)[:, None] * g + b[None, :]).ravel()
            ids = table.add_links(src, dst, bw / (g - 1), link.latency_s, link_class)
            path[:, a, b, 0] = ids.reshape(num_nodes, -1)
        return NodeFabric(kind, g, path=path)
    if kind in NODE_WIRINGS:
        return _wired(table, NODE_WIRINGS[kind], num_nodes, g, link)
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


def _wired(
    table: LinkTable, wiring: NodeWiring, num_nodes: int, gpus_per_node: int, link: LinkSpec
) -> NodeFabric:
    """Links of a catalog wiring in every node, each pair at its measured bandwidth."""
    if gpus_per_node != wiring.num_devices:
        raise SpecError(
            f"'cluster.gpus_per_node' must be {wiring.num_devices} for "
            f"node_fabric={wiring.name} (got {gpus_per_node})"
        )
    g = gpus_per_node
    ends = [(a, b, n) for a, b, n in wiring.pairs] + [(b, a, n) for a, b, n in wiring.pairs]
    slot = {(a, b): i for i, (a, b, _) in enumerate(ends)}
    local_src = np.array([a for a, _, _ in ends])
    local_dst = np.array([b for _, b, _ in ends])
    bw = np.array([wiring.bandwidth_bytes_per_s(n) for _, _, n in ends])
    base = np.arange(num_nodes)[:, None] * g
    ids = table.add_links(
        (base + local_src).ravel(),
        (base + local_dst).ravel(),
        np.tile(bw, num_nodes),
        link.latency_s,
        "nvlink",
    ).reshape(num_nodes, len(ends))
    paths = wired_paths(wiring)
    hops = max(len(p) - 1 for p in paths.values())
    local_path = np.full((g, g, hops), -1, dtype=np.int64)
    for (a, b), path in paths.items():
        for h, (x, y) in enumerate(pairwise(path)):
            local_path[a, b, h] = slot[x, y]
    path = np.where(local_path[None] >= 0, ids[:, np.maximum(local_path, 0)], -1)
    return NodeFabric(wiring.name, g, path=path, wiring=wiring)
