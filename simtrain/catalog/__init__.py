"""The hardware catalog: built-in accelerators and links, looked up by name."""

from __future__ import annotations

from simtrain.catalog.accelerators import ACCELERATORS
from simtrain.catalog.links import LINKS
from simtrain.errors import SpecError
from simtrain.specs.hardware import AcceleratorSpec, LinkSpec

__all__ = ["ACCELERATORS", "LINKS", "get_accelerator", "get_link"]


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


def get_link(name: str, field: str = "cluster.scale_up_link") -> LinkSpec:
    """Return the catalog link ``name`` (case-insensitive), or a SpecError listing all."""
    return _lookup(LINKS, name, field, "link")
