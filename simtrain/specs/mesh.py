"""MeshSpec: a MaxText-style named device mesh (ICI axes inside a slice, DCN axes across).

GSPMD shards a JAX program over a named mesh; MaxText builds it from
``ici_{fsdp,tensor,data}_parallelism`` (axes inside one TPU slice, over ICI) and
``dcn_data_parallelism`` (across slices, over the data-centre network), with -1 meaning "fill
what the other axes leave" (``docs/references/tpu.md`` §4-5). simtrain maps the mesh onto its
own degrees, so the rest of the simulator sees an ordinary configuration:

- ``tp = ici_tp`` (tensor parallelism inside the slice), with ``sp`` on: MaxText's sharding
  rules split activations over the tensor axis as well, as sequence parallelism does;
- ``dp = ici_fsdp * ici_dp * dcn_dp`` with ``zero_stage = 3`` and ``zero_shard_group_size =
  ici_fsdp`` when ``ici_fsdp > 1``: parameters, gradients and optimizer states sharded over
  the FSDP axis (inside a slice: rank order keeps the tp x fsdp ranks of a slice together),
  gradients reduce-scattered there and all-reduced across the ici_dp x dcn_dp replicas.

The ICI axes must multiply to the chips of one slice and the DCN axis to the slices.

Examples:
    >>> mesh = {"ici_fsdp": -1, "ici_tp": 16, "dcn_dp": -1}
    >>> resolve_mesh_degrees(mesh, chips_per_slice=256, num_slices=4)
    {'ici_fsdp': 16, 'ici_tp': 16, 'ici_dp': 1, 'dcn_dp': 4}
"""

from __future__ import annotations

from typing import Any

from simtrain.specs.base import Spec, bounded

ICI_AXES = ("ici_fsdp", "ici_tp", "ici_dp")
DCN_AXES = ("dcn_dp",)


class MeshSpec(Spec):
    """Named device mesh as MaxText configures it (-1 fills the rest of its tier)."""

    ici_fsdp: int = bounded(-1, ge=-1, le=65536, why="-1 (fill) or at most a 65,536-chip slice")
    """FSDP (fully sharded data parallel) degree inside a slice; -1 fills the slice."""
    ici_tp: int = bounded(1, ge=-1, le=65536, why="-1 (fill) or at most a 65,536-chip slice")
    """Tensor-parallel degree inside a slice (MaxText ``ici_tensor_parallelism``)."""
    ici_dp: int = bounded(1, ge=-1, le=65536, why="-1 (fill) or at most a 65,536-chip slice")
    """Replicated data-parallel degree inside a slice (``ici_data_parallelism``)."""
    dcn_dp: int = bounded(-1, ge=-1, le=65536, why="-1 (fill) or at most 65,536 slices")
    """Data-parallel degree across slices over DCN; -1 uses every slice."""


def _fill(axes: dict[str, int], names: tuple[str, ...], total: int, tier: str) -> None:
    """Replace one -1 among ``names`` so that they multiply to ``total``, or raise."""
    shown = "*".join(f"{n}={axes[n]}" for n in names)
    where = "the chips of one slice" if tier == "ici" else "the number of slices"
    if any(axes[n] == 0 for n in names):
        raise ValueError(f"'parallel.mesh' axes must be positive or -1 (got {shown})")
    free = [n for n in names if axes[n] == -1]
    known = 1
    for n in names:
        if axes[n] != -1:
            known *= axes[n]
    if len(free) > 1:
        raise ValueError(f"'parallel.mesh' may fill at most one {tier} axis with -1 (got {shown})")
    if free:
        if total % known:
            raise ValueError(
                f"'parallel.mesh' {tier} axes {shown} must multiply to {where} = {total} "
                f"({known} does not divide {total})"
            )
        axes[free[0]] = total // known
    elif known != total:
        raise ValueError(
            f"'parallel.mesh' {tier} axes {shown} must multiply to {where} = {total} (got {known})"
        )


def resolve_mesh_degrees(
    mesh: dict[str, Any], chips_per_slice: int, num_slices: int
) -> dict[str, int]:
    """Mesh axes with every -1 filled, or a ValueError naming the axes and the sizes."""
    axes = {
        name: int(mesh.get(name, MeshSpec.model_fields[name].default))
        for name in (*ICI_AXES, *DCN_AXES)
    }
    _fill(axes, ICI_AXES, chips_per_slice, "ici")
    _fill(axes, DCN_AXES, num_slices, "dcn")
    return axes


def apply_mesh(data: dict[str, Any]) -> dict[str, Any]:
    """Fill ``parallel`` degrees of a raw experiment mapping from its ``parallel.mesh``.

    Leaves the mapping alone when there is no mesh (or sections are malformed: field
    validation reports those). Raises ValueError when the mesh does not fit the cluster or
    contradicts degrees set by hand.
    """
    par, clu = data.get("parallel"), data.get("cluster")
    if not (isinstance(par, dict) and isinstance(clu, dict)) or not isinstance(
        par.get("mesh"), dict
    ):
        return data
    topo = clu.get("topology") if isinstance(clu.get("topology"), dict) else {}
    try:
        num_gpus = int(clu["num_gpus"])
        slices = int(topo.get("num_slices", 1))
    except (KeyError, TypeError, ValueError, OverflowError):
        return data
    if slices < 1 or num_gpus % slices:
        return data  # the topology checks report it
    sizes = par["mesh"].values()
    if not all(type(v) is int and -1 <= v <= 65536 for v in sizes):
        return data  # field validation names the bad axis and its range
    axes = resolve_mesh_degrees(par["mesh"], num_gpus // slices, slices)
    fsdp = axes["ici_fsdp"]
    derived: dict[str, Any] = {
        "tp": axes["ici_tp"],
        "dp": fsdp * axes["ici_dp"] * axes["dcn_dp"],
    }
    if fsdp > 1:
        derived |= {"zero_stage": 3, "zero_shard_group_size": fsdp}
    if axes["ici_tp"] > 1:
        derived["sp"] = True  # GSPMD shards activations over the tensor axis too
    for key, value in derived.items():
        if key in par and par[key] is not None and par[key] != value:
            raise ValueError(
                f"'parallel.{key}' must be left out or equal {value} with parallel.mesh "
                f"(got {par[key]})"
            )
    return {**data, "parallel": {**par, **derived, "mesh": axes}}
