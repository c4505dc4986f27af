"""The hardware catalog: built-in accelerators and links, looked up by name."""

from __future__ import annotations

from simtrain.catalog.accelerators import ACCELERATORS
from simtrain.catalog.links import LINKS
from simtrain.errors import SpecError
from simtrain.specs.cluster import ClusterSpec
from simtrain.specs.hardware import AcceleratorSpec, LinkSpec

__all__ = ["ACCELERATORS", "LINKS", "cluster_links", "get_accelerator", "get_link"]


def _lookup(table: dict, name: str, field: str, what: str):
    if name in table:
        return table[name]
    folded = {key.lower().replace("_", "-"): value for key, value in table.items()}
    key = name.lower().replace("_", "-")
    if key in folded:
        return folded[key]
    known = ", ".join(table)
    raise SpecError(f"'{field}' must be a known {what} (got {name!r}; known: {known})")


def get_accelerator(name: str, field: str = "cluster.accelerator") -> AcceleratorSpec:
    """Return the catalog accelerator ``name`` (case-insensitive), or a SpecError listing all."""
    return _lookup(ACCELERATORS, name, field, "accelerator")


def get_link(name: str, field: str = "cluster.scale_up_link", kind: str | None = None) -> LinkSpec:
    """Return the catalog link ``name`` (case-insensitive), or a SpecError listing all.

    With ``kind`` (``scale_up`` or ``scale_out``), a link of the other role is an error that
    lists the links of the right role: an NVLink port is no NIC, and a NIC no node fabric.
    """
    link = _lookup(LINKS, name, field, "link")
    if kind is not None and link.kind != kind:
        valid = ", ".join(n for n, spec in LINKS.items() if spec.kind == kind)
        raise SpecError(
            f"'{field}' must be a {kind.replace('_', '-')} link (got {name!r}, a "
            f"{link.kind.replace('_', '-')} link; valid: {valid})"
        )
    return link


def cluster_links(cluster: ClusterSpec) -> tuple[LinkSpec, LinkSpec]:
    """Scale-up and scale-out links of a cluster; a link the cluster names must fit its role.

    Links left out default to the accelerator's own.

    Raises:
        SpecError: an unknown accelerator or link, or a link in the wrong role.
    """
    acc = get_accelerator(cluster.accelerator)
    # Roles are checked for links the user names; an accelerator's own pair is catalog data
    # (a TPU's "scale-out" is its ICI torus, which the torus topology reads instead).
    up_role = "scale_up" if cluster.scale_up_link else None
    out_role = "scale_out" if cluster.scale_out_link else None
    up = get_link(cluster.scale_up_link or acc.scale_up_link, "cluster.scale_up_link", up_role)
    out = get_link(cluster.scale_out_link or acc.scale_out_link, "cluster.scale_out_link", out_role)
    return up, out
