"""Node wirings: which devices of a node are joined by how many links, at what bandwidth.

Most nodes are uniform (an NVSwitch star, or a full mesh of equal links), and the topology
layer builds them from one link. Some are not: an MI250X node joins its eight GCDs by
Infinity Fabric pairs of four, two or one links, and a GCD pair with one link moves a quarter
of what a pair with four does. A :class:`NodeWiring` lists such a node's pairs and the
measured bandwidth of a pair by its number of links.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.errors import SpecError

_AMD = "docs/references/amd.md"


@dataclass(frozen=True, eq=False)
class NodeWiring:
    """The point-to-point fabric of one node.

    Attributes:
        name: catalog name (the ``cluster.topology.node_fabric`` value that selects it).
        num_devices: devices per node.
        devices_per_package: devices sharing one package (and one NIC).
        pairs: ``(a, b, links)``: local devices a and b are joined by ``links`` links.
        pair_bandwidth_bytes_per_s: measured bandwidth of a pair, one direction, by links.
        source: where the wiring and the bandwidths come from.
    """

    name: str
    num_devices: int
    devices_per_package: int
    pairs: tuple[tuple[int, int, int], ...]
    pair_bandwidth_bytes_per_s: dict[int, float]
    source: str

    def bandwidth_bytes_per_s(self, links: int) -> float:
        """Measured one-direction bandwidth of a pair joined by ``links`` links."""
        return self.pair_bandwidth_bytes_per_s[links]


MI250X = NodeWiring(
    name="mi250x",
    num_devices=8,
    devices_per_package=2,
    # Quad links join the two GCDs of a package; every GCD also has one dual and one single
    # link to GCDs of other packages (amd.md §1.4).
    pairs=(
        (0, 1, 4),
        (2, 3, 4),
        (4, 5, 4),
        (6, 7, 4),
        (0, 6, 2),
        (1, 5, 2),
        (2, 4, 2),
        (3, 7, 2),
        (0, 2, 1),
        (1, 3, 1),
        (4, 6, 1),
        (5, 7, 1),
    ),
    # comm_scope GPUWrGPU at 1 GiB, LUMI ReFrame references from Pearson 2023 (amd.md §1.3).
    pair_bandwidth_bytes_per_s={4: 148e9, 2: 76e9, 1: 38e9},
    source=f"{_AMD} §1.3 (measured 148 / 76 / 38 GB/s for quad / dual / single pairs) and "
    "§1.4 (pairs as in the Frontier and LUMI-G node diagrams)",
)

NODE_WIRINGS: dict[str, NodeWiring] = {w.name: w for w in (MI250X,)}
"""Wired (non-uniform) node fabrics by name."""


def get_node_wiring(name: str) -> NodeWiring:
    """The wiring ``name``, or a SpecError listing the known ones."""
    if name not in NODE_WIRINGS:
        raise SpecError(
            f"'cluster.topology.node_fabric' must name a known wiring (got {name!r}; known: "
            f"{', '.join(NODE_WIRINGS)})"
        )
    return NODE_WIRINGS[name]
