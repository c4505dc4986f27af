"""Fat-tree / folded-Clos scale-out networks of 2 or 3 switch tiers, with oversubscription.

The same wiring serves the three Clos families; they differ only in which leaf each NIC
plugs into and in whether rails share spines (``rail.py``):

- tier 1, leaves: ``leaf_down_ports`` NIC ports each (default radix/2);
- tier 2, spines: each pod of ``leaves_per_pod`` leaves has ``spines_per_pod`` spines and
  every leaf has one uplink to each of them;
- tier 3, cores (only when the leaves do not fit in one pod): spine ``s`` of every pod
  connects to the same group of radix/2 core switches, one uplink to each.

Oversubscription r divides the uplink capacity of a tier by r (a leaf with 32 x 400G down
and r = 2 has 32 x 200G of uplink capacity). For the fluid model this equals having fewer
full-rate uplinks, except for how ECMP collisions fall.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simtrain.errors import SpecError
from simtrain.specs.hardware import LinkSpec
from simtrain.specs.topology import TopologySpec
from simtrain.topology.base import LinkTable


@dataclass(frozen=True)
class ClosFabric:
    """Link ids and switch nodes of a Clos, as index arrays (wiring: module docstring).

    ``nic_up[node, nic]`` / ``nic_down[node, nic]`` join a NIC and its leaf;
    ``leaf_up[leaf, s]`` / ``leaf_down[leaf, s]`` join a leaf and spine ``s`` of its spine
    group (a pod, or a pod of one rail plane); ``spine_up[group, s, c]`` /
    ``spine_down[group, s, c]`` join spine ``s`` of a group and core ``c`` of core group ``s``.
    ``leaf_node``, ``spine_node[group, s]`` and ``core_node[plane, s, c]`` are the switches'
    graph indices (each tier a contiguous range).
    """

    nic_up: np.ndarray
    nic_down: np.ndarray
    leaf_of_nic: np.ndarray
    group_of_leaf: np.ndarray
    leaf_node: np.ndarray
    leaf_up: np.ndarray | None = None
    leaf_down: np.ndarray | None = None
    spine_node: np.ndarray | None = None
    spine_up: np.ndarray | None = None
    spine_down: np.ndarray | None = None
    core_node: np.ndarray | None = None

    def bisection_factor(self, spec: TopologySpec) -> float:
        """Share of the NIC bandwidth of half the cluster that can cross to the other half."""
        factor = 1.0
        if self.leaf_up is not None:
            factor /= spec.oversubscription
        if self.spine_up is not None:
            factor /= spec.pod_oversubscription
        return factor

    def reduction_tree(
        self, devices: np.ndarray, gpus_per_node: int, nics: int, tree: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(child, parent) graph nodes of a switch aggregation tree over ``devices``.

        Each device joins the leaf of its NIC; the leaves join spine ``tree mod S`` of their
        group, which is the root when one group holds them all; otherwise those spines join
        core ``tree mod C`` of that spine's core group. Different ``tree`` values (one per
        rail) spread the trees over different spines, as the subnet manager does.
        """
        node, local = np.divmod(devices, gpus_per_node)
        leaf = self.leaf_of_nic[node, local * nics // gpus_per_node]
        child, parent = [devices], [self.leaf_node[leaf]]
        leaves = np.unique(leaf)
        if leaves.size > 1 and self.leaf_up is not None and self.spine_node is not None:
            spine = tree % self.leaf_up.shape[1]
            groups = self.group_of_leaf[leaves]
            child.append(self.leaf_node[leaves])
            parent.append(self.spine_node[groups, spine])
            top = np.unique(groups)
            if top.size > 1 and self.spine_up is not None and self.core_node is not None:
                core = tree % self.spine_up.shape[2]
                child.append(self.spine_node[top, spine])
                parent.append(self.core_node[top % self.core_node.shape[0], spine, core])
        return np.concatenate(child), np.concatenate(parent)

    def switch_routes(
        self, src: np.ndarray, dst: np.ndarray, gpus_per_node: int, nics: int
    ) -> np.ndarray:
        """One-link routes between adjacent tiers: device-leaf, leaf-spine, spine-core.

        Used by in-network reduction flows, whose ends are switches; the two ends must be
        wired to each other.
        """
        out = np.full(src.size, -1, dtype=np.int64)
        leaf0 = int(self.leaf_node[0])
        spine0 = int(self.spine_node.flat[0]) if self.spine_node is not None else np.inf
        core0 = int(self.core_node.flat[0]) if self.core_node is not None else np.inf

        def tier(x: np.ndarray) -> np.ndarray:
            return (x >= leaf0).astype(int) + (x >= spine0) + (x >= core0)

        src_tier, dst_tier = tier(src), tier(dst)
        for lower, upper in ((src, dst), (dst, src)):
            going_up = lower is src
            low_tier, high_tier = (src_tier, dst_tier) if going_up else (dst_tier, src_tier)
            nic = (low_tier == 0) & (high_tier == 1)
            node, local = np.divmod(lower[nic], gpus_per_node)
            table = self.nic_up if going_up else self.nic_down
            out[nic] = table[node, local * nics // gpus_per_node]
            if self.leaf_up is not None and self.leaf_down is not None:
                mid = (low_tier == 1) & (high_tier == 2)
                num_spines = self.leaf_up.shape[1]
                spine = (upper[mid] - spine0).astype(np.int64) % num_spines
                table = self.leaf_up if going_up else self.leaf_down
                out[mid] = table[lower[mid] - leaf0, spine]
            if self.spine_up is not None and self.spine_down is not None:
                top = (low_tier == 2) & (high_tier == 3)
                group, spine = np.divmod((lower[top] - spine0).astype(np.int64), num_spines)
                core = (upper[top] - core0).astype(np.int64) % self.spine_up.shape[2]
                table = self.spine_up if going_up else self.spine_down
                out[top] = table[group, spine, core]
        return out[:, None]


def build_clos(
    table: LinkTable,
    spec: TopologySpec,
    leaf_of_nic: np.ndarray,
    plane_of_leaf: np.ndarray,
    nic_owner: np.ndarray,
    nic_link: LinkSpec,
) -> tuple[ClosFabric, dict[str, str]]:
    """Add leaves, spines and cores above the given NIC -> leaf assignment.

    Args:
        table: link table; NIC ports are the edges (node, nic) -> leaf.
        spec: the topology spec (radix, ports, oversubscription, tiers).
        leaf_of_nic: leaf index of every NIC, shape (num_nodes, nics_per_node).
        plane_of_leaf: plane of every leaf; leaves of different planes never share spines.
        nic_owner: graph node (device) each NIC port starts from, shape like leaf_of_nic.
        nic_link: the scale-out link (NIC ports and switch-to-switch links alike).

    Returns:
        The fabric and human-readable facts about it.
    """
    radix = spec.switch_radix
    num_leaves = int(leaf_of_nic.max()) + 1
    num_planes = int(plane_of_leaf.max()) + 1
    bw = nic_link.effective_bandwidth_bytes_per_s
    leaves = table.add_nodes([f"leaf{i}" for i in range(num_leaves)], "leaf")
    # A NIC is the edge between its device and its leaf: NICs are not graph nodes, since the
    # PCIe hop from a GPU to its NIC is never the bottleneck of a collective.
    nic_up = table.add_links(nic_owner, leaves[leaf_of_nic], bw, nic_link.latency_s, "net")
    nic_down = table.add_links(leaves[leaf_of_nic], nic_owner, bw, 0.0, "net")

    # Index of each leaf among the leaves of its plane, in id order.
    index_in_plane = np.zeros(num_leaves, dtype=np.int64)
    leaves_per_plane = 0
    for plane in range(num_planes):
        members = np.flatnonzero(plane_of_leaf == plane)
        index_in_plane[members] = np.arange(members.size)
        leaves_per_plane = max(leaves_per_plane, members.size)

    down_ports = spec.leaf_down_ports or radix // 2
    tiers = spec.num_tiers or (2 if leaves_per_plane <= (spec.leaves_per_pod or radix) else 3)
    per_pod = spec.leaves_per_pod or (radix if tiers == 2 else radix // 2)
    if tiers == 2 and leaves_per_plane > per_pod:
        raise SpecError(
            f"'cluster.topology.num_tiers' must be 3 for {leaves_per_plane} leaves per plane "
            f"(got 2; a 2-tier pod holds leaves_per_pod={per_pod})"
        )
    details = {"leaves": str(num_leaves), "tiers": str(tiers if leaves_per_plane > 1 else 1)}
    if leaves_per_plane == 1:
        single = ClosFabric(nic_up, nic_down, leaf_of_nic, np.zeros(num_leaves, int), leaves)
        return single, details

    num_pods = -(-leaves_per_plane // per_pod)
    if tiers == 3 and num_pods > radix:
        raise SpecError(
            f"'cluster.topology.switch_radix'={radix} must be at least the {num_pods} pods its "
            f"core switches join (a 3-tier fat-tree of radix k holds k^3/4 NICs at full "
            f"bisection; got {int(leaf_of_nic.size):,} NICs): use larger switches"
        )
    group_of_leaf = (index_in_plane // per_pod) * num_planes + plane_of_leaf
    num_groups = num_pods * num_planes
    if spec.spines_per_pod is not None:
        spines_per_group, cabled_ports = spec.spines_per_pod, down_ports
    else:
        # A leaf-spine tier sized to the cluster: every leaf has one uplink to each spine, as
        # many uplinks as its cabled NIC ports need (4 DGX nodes on 8 rail leaves: 4 spines,
        # not the 32 of a full pod); full leaves give the full fat tree, radix / 2 spines.
        cabled_ports = int(np.bincount(leaf_of_nic.ravel()).max())
        spines_per_group = min(radix // 2, uplinks_per_leaf(cabled_ports, spec.oversubscription))
    spines = table.add_nodes(
        [f"spine{grp}.{s}" for grp in range(num_groups) for s in range(spines_per_group)], "spine"
    ).reshape(num_groups, spines_per_group)
    uplink_bw = cabled_ports * bw / (spec.oversubscription * spines_per_group)
    leaf_ids = np.arange(num_leaves)[:, None]
    spine_of = spines[group_of_leaf][:, :]
    leaf_up = table.add_links(
        leaves[leaf_ids].repeat(spines_per_group, 1), spine_of, uplink_bw, 0.0, "net"
    )
    leaf_down = table.add_links(
        spine_of, leaves[leaf_ids].repeat(spines_per_group, 1), uplink_bw, 0.0, "net"
    )
    details["spines"] = str(spines.size)
    details["leaf uplink"] = f"{uplink_bw / 1e9:,.1f} GB/s x {spines_per_group}"
    if num_pods == 1:
        fabric = ClosFabric(
            nic_up, nic_down, leaf_of_nic, group_of_leaf, leaves, leaf_up, leaf_down, spines
        )
        return fabric, details

    cores_per_group = radix // 2
    cores = table.add_nodes(
        [
            f"core{p}.{s}.{c}"
            for p in range(num_planes)
            for s in range(spines_per_group)
            for c in range(cores_per_group)
        ],
        "core",
    ).reshape(num_planes, spines_per_group, cores_per_group)
    spine_bw = per_pod * uplink_bw / (spec.pod_oversubscription * cores_per_group)
    group_plane = np.arange(num_groups) % num_planes
    spine_nodes = np.broadcast_to(
        spines[:, :, None], (num_groups, spines_per_group, cores_per_group)
    )
    core_nodes = cores[group_plane]
    spine_up = table.add_links(spine_nodes, core_nodes, spine_bw, 0.0, "net")
    spine_down = table.add_links(core_nodes, spine_nodes, spine_bw, 0.0, "net")
    details["pods"] = str(num_pods)
    details["cores"] = str(cores.size)
    details["spine uplink"] = f"{spine_bw / 1e9:,.1f} GB/s x {cores_per_group}"
    fabric = ClosFabric(
        nic_up,
        nic_down,
        leaf_of_nic,
        group_of_leaf,
        leaves,
        leaf_up,
        leaf_down,
        spines,
        spine_up,
        spine_down,
        cores,
    )
    return fabric, details


def uplinks_per_leaf(cabled_ports: int, oversubscription: float) -> int:
    """Uplinks a leaf with ``cabled_ports`` NIC ports needs at ``oversubscription`` (at least 1).

    Examples:
        >>> uplinks_per_leaf(32, 1.0), uplinks_per_leaf(4, 1.0), uplinks_per_leaf(32, 4.0)
        (32, 4, 8)
    """
    return max(1, int(np.ceil(cabled_ports / oversubscription)))


def fat_tree_leaves(num_nodes: int, nics: int, down_ports: int) -> tuple[np.ndarray, np.ndarray]:
    """NIC -> leaf map of a plain fat-tree: NIC ports fill leaves in node order.

    Examples:
        >>> fat_tree_leaves(4, 2, 4)[0].tolist()
        [[0, 0], [0, 0], [1, 1], [1, 1]]
    """
    ports = np.arange(num_nodes * nics).reshape(num_nodes, nics)
    leaf = ports // down_ports
    return leaf, np.zeros(int(leaf.max()) + 1, dtype=np.int64)
