"""ClusterSpec and TopologySpec: the machines a job runs on and how they are wired."""

from __future__ import annotations

from simtrain.specs.base import MAX_DEVICES, MAX_DEVICES_WHY, Spec, bounded
from simtrain.specs.topology import TopologySpec


class ClusterSpec(Spec):
    """A homogeneous cluster of accelerators in nodes, with a scale-up and a scale-out fabric."""

    accelerator: str
    """Accelerator name from the catalog, e.g. ``A100-80GB`` (``simtrain list accelerators``)."""
    num_gpus: int = bounded(gt=0, le=MAX_DEVICES, why=MAX_DEVICES_WHY)
    """Accelerators used by the job."""
    gpus_per_node: int = bounded(
        8, gt=0, le=1 << 14, why="the largest scale-up domains (TPU v5p pod: 8,960 chips)"
    )
    """Accelerators per node, joined by the scale-up fabric."""
    scale_up_link: str | None = None
    """Scale-up link name (``simtrain list links``); omit for the accelerator's native fabric."""
    scale_out_link: str | None = None
    """Scale-out (NIC) link name; omit for the accelerator's usual NIC."""
    nics_per_node: int | None = bounded(
        None, gt=0, le=1 << 10, why="32x the most NICs per node shipped (32)"
    )
    """Scale-out NICs per node; omit for one per accelerator."""
    topology: TopologySpec = TopologySpec()
    """Shape of the scale-out network."""
    calibration: str | None = None
    """Compute calibration file to use instead of the catalog's (e.g. one written by
    ``simtrain calibrate`` from a profile of your own nodes); a path relative to the
    experiment file that sets it."""

    @property
    def num_nodes(self) -> int:
        """Nodes used by the job (a partial node counts as one)."""
        return -(-self.num_gpus // self.gpus_per_node)

    @property
    def nics(self) -> int:
        """Scale-out NICs per node after applying the default."""
        return self.nics_per_node or self.gpus_per_node
