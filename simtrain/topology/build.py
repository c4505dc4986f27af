"""``build_topology``: the one entry point from a ClusterSpec to a wired ``Topology``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from itertools import combinations

import numpy as np

from simtrain.catalog import cluster_links
from simtrain.errors import SpecError
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.hardware import LinkSpec
from simtrain.specs.topology import TopologySpec
from simtrain.topology.base import LinkTable, Topology
from simtrain.topology.dragonfly import (
    DragonflyRouter,
    build_dragonfly,
    dragonfly_bisection,
    dragonfly_shape,
)
from simtrain.topology.fat_tree import ClosFabric, build_clos, fat_tree_leaves
from simtrain.topology.multislice import MultiSliceRouter, build_dcn, dcn_bisection
from simtrain.topology.node_fabric import (
    NVLS_LINKS,
    NodeFabric,
    build_node_fabric,
    default_node_fabric,
    pair_bandwidths,
)
from simtrain.topology.rail import rail_leaves
from simtrain.topology.routing import ClusterRouter
from simtrain.topology.torus import build_torus

CLOS_FIELDS = (
    "oversubscription",
    "pod_oversubscription",
    "switch_radix",
    "num_tiers",
    "leaf_down_ports",
    "leaves_per_pod",
    "spines_per_pod",
    "clos_routing",
    "ecmp_flows_per_connection",
    "sharp",
)
"""TopologySpec fields read only by the Clos kinds."""
TORUS_FIELDS = ("torus_shape", "torus_wraparound", "num_slices")
"""TopologySpec fields read only by torus_3d."""
DRAGONFLY_FIELDS = (
    "num_groups",
    "switches_per_group",
    "nic_ports_per_switch",
    "links_per_group_pair",
    "routing",
)
"""TopologySpec fields read only by dragonfly."""


def build_topology(cluster: ClusterSpec, seed: int = 0) -> Topology:
    """Wire the devices, switches and links of ``cluster`` and set up its routing.

    ``seed`` (the experiment's) salts the ECMP hash that picks each flow's path on a Clos.

    Raises:
        SpecError: the cluster shape does not fit the topology kind (e.g. a torus shape that
            does not hold ``num_gpus`` chips, or a partial node in a multi-node cluster).

    Examples:
        >>> from simtrain.specs.cluster import ClusterSpec
        >>> topo = build_topology(ClusterSpec(accelerator="H100-SXM", num_gpus=16))
        >>> topo.num_devices, topo.num_nodes, topo.count_nodes()["leaf"]
        (16, 2, 1)
    """
    spec = cluster.topology
    up, out = cluster_links(cluster)
    check_domain(cluster, up)
    table = LinkTable()
    if spec.kind == "torus_3d":
        warn_unused(
            spec, (*CLOS_FIELDS, *DRAGONFLY_FIELDS, "node_fabric"), "topology.kind is torus_3d"
        )
        return _torus(cluster, table, up, out)
    warn_unused(spec, TORUS_FIELDS, f"topology.kind is {spec.kind}")
    if spec.kind == "dragonfly":
        warn_unused(spec, CLOS_FIELDS[:-1], "topology.kind is dragonfly")
    else:
        warn_unused(spec, DRAGONFLY_FIELDS, f"topology.kind is {spec.kind}")
    job = cluster.num_gpus
    cluster = whole_nodes(cluster)
    num_gpus = cluster.num_gpus
    g = min(cluster.gpus_per_node, num_gpus)
    num_nodes = num_gpus // g
    if spec.kind == "single_node" and num_nodes > 1:
        raise SpecError(
            f"'cluster.num_gpus' must be at most cluster.gpus_per_node={g} for "
            f"topology.kind=single_node (got {job})"
        )
    table.add_nodes([f"n{k}/gpu{a}" for k in range(num_nodes) for a in range(g)], "device")
    fabric_kind = (
        default_node_fabric(up.name, g) if spec.node_fabric == "auto" else spec.node_fabric
    )
    fabric = build_node_fabric(table, fabric_kind, num_nodes, g, up)
    nvls = fabric.switch if fabric_kind == "nvswitch" and up.name in NVLS_LINKS else None
    details = {"node fabric": fabric_summary(fabric, up)}
    if job < num_gpus:
        details["job"] = f"{job:,} of the {num_gpus:,} devices (the last node partly used)"
    nics = min(cluster.nics, g)
    clos = None
    if spec.kind == "dragonfly":
        return _dragonfly(cluster, table, fabric, fabric_kind, out, details)
    if num_nodes > 1:
        down_ports = spec.leaf_down_ports or spec.switch_radix // 2
        if spec.kind == "fat_tree":
            leaf, plane = fat_tree_leaves(num_nodes, nics, down_ports)
        else:
            leaf, plane = rail_leaves(num_nodes, nics, down_ports, spec.kind == "rail_only")
        owner = np.arange(num_nodes)[:, None] * g + -(-np.arange(nics)[None, :] * g // nics)
        clos, clos_details = build_clos(table, spec, leaf, plane, owner, out)
        details["scale-out"] = (
            f"{spec.kind}, {nics} x {out.name} per node "
            f"({out.effective_bandwidth_bytes_per_s / 1e9:.1f} GB/s each)"
        )
        details.update(clos_details)
        bisection = num_nodes * nics * out.effective_bandwidth_bytes_per_s / 2
        bisection *= clos.bisection_factor(spec)
    else:
        bisection = node_bisection(fabric, up)
    router = ClusterRouter(
        fabric,
        num_gpus,
        nics,
        clos,
        pxn=spec.kind != "fat_tree",
        salt=seed,
        adaptive=spec.clos_routing == "adaptive",
    )
    return _finish(
        table,
        spec.kind,
        num_gpus,
        g,
        router,
        bisection,
        nics if clos else 0,
        details,
        nvls=nvls,
        node_fabric=fabric_kind,
        sharp=clos if spec.sharp else None,
        clos=clos,
        ring_order=fabric.ring_order if fabric.wiring is not None else None,
    )


def check_domain(cluster: ClusterSpec, link: LinkSpec) -> None:
    """Reject a node larger than the scale-up fabric can join into one domain.

    Raises:
        SpecError: ``cluster.gpus_per_node`` exceeds the link's ``max_domain_devices``.
    """
    most = link.max_domain_devices
    if most is not None and min(cluster.gpus_per_node, cluster.num_gpus) > most:
        raise SpecError(
            f"'cluster.gpus_per_node' must be at most {most}, the largest {link.name} domain "
            f"(got {cluster.gpus_per_node})"
        )


def whole_nodes(cluster: ClusterSpec) -> ClusterSpec:
    """The cluster of whole nodes a job runs on: its last node may be partly used.

    A 256-GPU job on GB200 NVL72 racks (72-GPU NVLink domains) spans four racks, the last
    one partly; the topology holds the four racks and the job's ranks occupy the first 256
    devices (rank r on device r).

    Examples:
        >>> from simtrain.specs.cluster import ClusterSpec
        >>> whole_nodes(ClusterSpec(accelerator="GB200", num_gpus=256, gpus_per_node=72)).num_gpus
        288
    """
    g = cluster.gpus_per_node
    if cluster.num_gpus <= g or cluster.num_gpus % g == 0:
        return cluster
    return cluster.model_copy(update={"num_gpus": -(-cluster.num_gpus // g) * g})


def _dragonfly(
    cluster: ClusterSpec,
    table: LinkTable,
    fabric: NodeFabric,
    fabric_kind: str,
    link: LinkSpec,
    details: dict[str, str],
) -> Topology:
    """A dragonfly of switch groups above the node fabrics (``dragonfly.py``)."""
    spec = cluster.topology
    g = min(cluster.gpus_per_node, cluster.num_gpus)
    nics = min(cluster.nics, g)
    num_nodes = cluster.num_gpus // g
    shape = dragonfly_shape(spec, num_nodes, nics)
    links = build_dragonfly(table, shape, g, nics, link)
    bw = link.effective_bandwidth_bytes_per_s
    details["scale-out"] = f"dragonfly, {nics} x {link.name} per node ({bw / 1e9:.1f} GB/s each)"
    details["groups"] = (
        f"{shape.groups_used} used of {shape.num_groups}, {shape.nodes_per_group} nodes each "
        f"({shape.switches_per_group} switches x {shape.nic_ports_per_switch} NIC ports)"
    )
    pairs = shape.num_groups * (shape.num_groups - 1) // 2
    details["global links"] = (
        f"{shape.links_per_group_pair} per group pair, {pairs * shape.links_per_group_pair} "
        f"in all; routing {spec.routing}"
    )
    details["local links"] = f"all-to-all in each group, {shape.switches_per_group - 1} per switch"
    capacity = table.arrays()[2]
    router = DragonflyRouter(fabric, cluster.num_gpus, nics, shape, links, spec.routing, capacity)
    bisection = dragonfly_bisection(shape, nics, link)
    return _finish(
        table,
        "dragonfly",
        cluster.num_gpus,
        g,
        router,
        bisection,
        nics,
        details,
        node_fabric=fabric_kind,
        ring_order=fabric.ring_order if fabric.wiring is not None else None,
    )


def fabric_summary(fabric: NodeFabric, link: LinkSpec) -> str:
    """One line describing a node fabric for ``simtrain topology``."""
    if fabric.wiring is None:
        return (
            f"{fabric.kind} ({link.name}, {link.effective_bandwidth_bytes_per_s / 1e9:.0f} GB/s "
            "per device and direction)"
        )
    w = fabric.wiring
    by_links = sorted(w.pair_bandwidth_bytes_per_s.items(), reverse=True)
    pairs = ", ".join(
        f"{sum(1 for *_, n in w.pairs if n == links)} x {links}-link {bw / 1e9:.0f} GB/s"
        for links, bw in by_links
    )
    return f"{w.name} wiring: {pairs} pairs (per direction); ring " + "-".join(
        str(d) for d in fabric.ring_order(np.arange(w.num_devices))
    )


def node_bisection(fabric: NodeFabric, link: LinkSpec) -> float:
    """Bisection bandwidth of one node (per direction) for its fabric kind."""
    g = fabric.gpus_per_node
    half = g // 2
    bw = link.effective_bandwidth_bytes_per_s
    if fabric.wiring is not None:
        pair_bw = pair_bandwidths(fabric.wiring)
        cuts = (
            pair_bw[np.ix_(side, np.setdiff1d(np.arange(g), side))].sum()
            for side in (np.array(c) for c in combinations(range(g), half))
        )
        return float(min(cuts))
    return half * half * bw / (g - 1) if fabric.kind == "p2p_mesh" else half * bw


def _torus(cluster: ClusterSpec, table: LinkTable, link: LinkSpec, dcn: LinkSpec) -> Topology:
    """A torus_3d topology: ICI tori (one per slice), joined by DCN when there are several."""
    spec = cluster.topology
    shape = spec.torus_shape
    slices = spec.num_slices
    per_slice = int(np.prod(shape))
    if per_slice * slices != cluster.num_gpus:
        shown = "x".join(str(d) for d in shape)
        what = f"{slices} slices of {shown}" if slices > 1 else shown
        raise SpecError(
            f"'cluster.topology.torus_shape' must hold cluster.num_gpus={cluster.num_gpus} "
            f"chips (got {what} = {per_slice * slices})"
        )
    g = min(cluster.gpus_per_node, cluster.num_gpus)
    if slices > 1 and per_slice % g:
        raise SpecError(
            f"'cluster.gpus_per_node' must divide the {per_slice} chips of a slice (got {g})"
        )
    table.add_nodes([f"chip{i}" for i in range(cluster.num_gpus)], "device")
    torus, bisection = build_torus(table, shape, spec.torus_wraparound, link, slices)
    details = {
        "torus": "x".join(str(d) for d in shape)
        + (" with wrap-around" if spec.torus_wraparound else " (open mesh)"),
        "link": f"{link.name}, {link.effective_bandwidth_bytes_per_s / link.ports / 1e9:.1f} "
        f"GB/s per direction (chip bandwidth / {link.ports} ports)",
    }
    router: object = torus
    if slices > 1:
        ports = build_dcn(table, cluster.num_gpus, g, dcn)
        router = MultiSliceRouter(torus, per_slice, g, ports)
        bw = dcn.effective_bandwidth_bytes_per_s
        details["slices"] = f"{slices} slices of {per_slice} chips, joined by DCN"
        details["dcn"] = (
            f"{dcn.name}, {bw / 1e9:.1f} GB/s per host of {g} chips "
            f"({per_slice // g * bw * 8 / 1e12:.1f} Tb/s per slice)"
        )
        bisection = min(bisection * slices, dcn_bisection(cluster.num_gpus, g, dcn))
    torus_shape = shape if spec.torus_wraparound else None
    return _finish(
        table,
        "torus_3d",
        cluster.num_gpus,
        g,
        router,
        bisection,
        0,
        details,
        torus_shape=torus_shape,
        chips_per_slice=per_slice,
    )


def _finish(
    table: LinkTable,
    kind: str,
    num_devices: int,
    gpus_per_node: int,
    router: object,
    bisection: float,
    nics: int,
    details: dict[str, str],
    nvls: np.ndarray | None = None,
    node_fabric: str = "none",
    sharp: ClosFabric | None = None,
    torus_shape: tuple[int, int, int] | None = None,
    clos: ClosFabric | None = None,
    ring_order: Callable[[np.ndarray], np.ndarray] | None = None,
    chips_per_slice: int | None = None,
) -> Topology:
    """Freeze the link table into a Topology."""
    src, dst, bw, lat, cls = table.arrays()
    return Topology(
        kind=kind,
        num_devices=num_devices,
        gpus_per_node=gpus_per_node,
        node_names=tuple(table.node_names),
        node_kinds=tuple(table.node_kinds),
        link_src=src,
        link_dst=dst,
        link_bandwidth_bytes_per_s=bw,
        link_latency_s=lat,
        link_class=cls,
        router=router,  # type: ignore[arg-type]
        bisection_bandwidth_bytes_per_s=float(bisection),
        nics_per_node=nics,
        nvls_switch=nvls,
        node_fabric=node_fabric,
        sharp=sharp,
        clos=clos,
        torus_shape=torus_shape,
        details=details,
        ring_order=ring_order,
        chips_per_slice=chips_per_slice,
    )


def warn_unused(spec: TopologySpec, fields: tuple[str, ...], reason: str) -> None:
    """Warn about fields the user set that this wiring never reads (STYLE.md: warn on no-ops).

    A field set to its default value (as in a spec dumped and reloaded by a sweep) changes
    nothing either way and is not reported.
    """
    for name in fields:
        default = TopologySpec.model_fields[name].default
        if name in spec.model_fields_set and getattr(spec, name) != default:
            warnings.warn(
                f"cluster.topology.{name}={getattr(spec, name)} has no effect: {reason}",
                UserWarning,
                stacklevel=3,
            )
