"""``build_topology``: the one entry point from a ClusterSpec to a wired ``Topology``."""

from __future__ import annotations

import warnings

import numpy as np

from simtrain.catalog import get_accelerator, get_link
from simtrain.errors import SpecError
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.hardware import LinkSpec
from simtrain.specs.topology import TopologySpec
from simtrain.topology.base import LinkTable, Topology
from simtrain.topology.fat_tree import ClosFabric, build_clos, fat_tree_leaves
from simtrain.topology.node_fabric import NVLS_LINKS, build_node_fabric, default_node_fabric
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
    "sharp",
)
"""TopologySpec fields read only by the Clos kinds."""
TORUS_FIELDS = ("torus_shape", "torus_wraparound")
"""TopologySpec fields read only by torus_3d."""


def cluster_links(cluster: ClusterSpec) -> tuple[LinkSpec, LinkSpec]:
    """Scale-up and scale-out links of a cluster, defaulting to the accelerator's own."""
    acc = get_accelerator(cluster.accelerator)
    up = get_link(cluster.scale_up_link or acc.scale_up_link, "cluster.scale_up_link")
    out = get_link(cluster.scale_out_link or acc.scale_out_link, "cluster.scale_out_link")
    return up, out


def build_topology(cluster: ClusterSpec) -> Topology:
    """Wire the devices, switches and links of ``cluster`` and set up its routing.

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
    num_gpus = cluster.num_gpus
    up, out = cluster_links(cluster)
    table = LinkTable()
    if spec.kind == "torus_3d":
        warn_unused(spec, (*CLOS_FIELDS, "node_fabric"), "topology.kind is torus_3d")
        return _torus(cluster, table, up)
    warn_unused(spec, TORUS_FIELDS, f"topology.kind is {spec.kind}")
    g = min(cluster.gpus_per_node, num_gpus)
    if num_gpus % g:
        raise SpecError(
            f"'cluster.num_gpus' must be a multiple of cluster.gpus_per_node={g} when it "
            f"spans nodes (got {num_gpus})"
        )
    num_nodes = num_gpus // g
    if spec.kind == "single_node" and num_nodes > 1:
        raise SpecError(
            f"'cluster.num_gpus' must be at most cluster.gpus_per_node={g} for "
            f"topology.kind=single_node (got {num_gpus})"
        )
    table.add_nodes([f"n{k}/gpu{a}" for k in range(num_nodes) for a in range(g)], "device")
    fabric_kind = default_node_fabric(up.name) if spec.node_fabric == "auto" else spec.node_fabric
    fabric = build_node_fabric(table, fabric_kind, num_nodes, g, up)
    nvls = fabric.switch if fabric_kind == "nvswitch" and up.name in NVLS_LINKS else None
    details = {
        "node fabric": f"{fabric_kind} ({up.name}, {up.effective_bandwidth_bytes_per_s / 1e9:.0f} "
        "GB/s per device and direction)",
    }
    nics = min(cluster.nics, g)
    clos = None
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
        bw = up.effective_bandwidth_bytes_per_s
        half = g // 2
        bisection = half * half * bw / (g - 1) if fabric_kind == "p2p_mesh" else half * bw
    router = ClusterRouter(fabric, num_gpus, nics, clos, pxn=spec.kind != "fat_tree")
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
    )


def _torus(cluster: ClusterSpec, table: LinkTable, link: LinkSpec) -> Topology:
    """A torus_3d topology: the scale-up link (ICI) joins chips; hosts only group them."""
    spec = cluster.topology
    shape = spec.torus_shape
    if int(np.prod(shape)) != cluster.num_gpus:
        shown = "x".join(str(d) for d in shape)
        raise SpecError(
            f"'cluster.topology.torus_shape' must hold cluster.num_gpus={cluster.num_gpus} "
            f"chips (got {shown} = {int(np.prod(shape))})"
        )
    table.add_nodes([f"chip{i}" for i in range(cluster.num_gpus)], "device")
    router, bisection = build_torus(table, shape, spec.torus_wraparound, link)
    details = {
        "torus": "x".join(str(d) for d in shape)
        + (" with wrap-around" if spec.torus_wraparound else " (open mesh)"),
        "link": f"{link.name}, {link.effective_bandwidth_bytes_per_s / 6e9:.1f} GB/s per "
        "direction (chip bandwidth / 6)",
    }
    g = min(cluster.gpus_per_node, cluster.num_gpus)
    torus = shape if spec.torus_wraparound else None
    return _finish(
        table, "torus_3d", cluster.num_gpus, g, router, bisection, 0, details, torus_shape=torus
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
