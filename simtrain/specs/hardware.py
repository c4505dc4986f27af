"""AcceleratorSpec and LinkSpec: hardware descriptions held in the catalog."""

from __future__ import annotations

from typing import Literal

from simtrain.specs.base import MAX_BYTES, Spec, bounded


class AcceleratorSpec(Spec):
    """One accelerator device (one GPU, one MI250X GCD, one TPU chip) and its headline figures."""

    name: str
    """Catalog name, e.g. ``H100-SXM``."""
    vendor: Literal["nvidia", "amd", "google"]
    """Maker, which selects the family of collective libraries and kernels."""
    peak_flops: dict[str, float]
    """Dense peak FLOP/s per dtype (bf16, fp16, fp8, tf32); sparse figures are never used."""
    hbm_capacity_bytes: float = bounded(gt=0, le=MAX_BYTES, why="an exbibyte")
    """Device memory capacity."""
    hbm_bandwidth_bytes_per_s: float = bounded(gt=0, le=MAX_BYTES, why="an exbibyte per second")
    """Peak device memory bandwidth."""
    tdp_watts: float | None = bounded(None, gt=0, le=1e5, why="50x the most power-hungry part")
    """Board power limit; None where no source gives it."""
    num_compute_units: int = bounded(gt=0, le=1 << 20, why="1,000x the largest GPU (~200 SMs)")
    """Streaming multiprocessors (NVIDIA), compute units (AMD) or matrix units (TPU): the
    unit over which GEMM tiles are distributed in waves."""
    scale_up_link: str
    """Native scale-up fabric (a link name in the catalog)."""
    scale_out_link: str
    """Usual scale-out NIC paired with this accelerator (a link name in the catalog)."""
    source: str
    """Where the figures come from."""


class LinkSpec(Spec):
    """A kind of link: a scale-up fabric port group of one device, or one scale-out NIC."""

    name: str
    """Catalog name, e.g. ``nvlink4`` or ``ib-ndr``."""
    kind: Literal["scale_up", "scale_out"]
    """scale_up (inside a node or a TPU slice) or scale_out (between nodes)."""
    bandwidth_bytes_per_s: float = bounded(gt=0, le=MAX_BYTES, why="an exbibyte per second")
    """Line rate per direction: per device for scale-up fabrics, per NIC for scale-out."""
    latency_s: float = bounded(ge=0, le=1, why="a second per hop")
    """Per-hop latency of one transfer step (NCCL's hardware latency for the link type)."""
    efficiency: float = bounded(gt=0, le=1, why="a fraction")
    """Achievable fraction of the line rate for large collective transfers (measured)."""
    ports: int = bounded(1, ge=1, le=64, why="10x the ICI links of a TPU chip (6)")
    """Ports the bandwidth is split over: the ICI links of a TPU chip (6 in a 3D torus, 4 in
    v5e's 2D torus); 1 for a single port or a switched fabric seen as one port."""
    max_domain_devices: int | None = bounded(None, gt=0, le=1 << 14, why="as cluster.gpus_per_node")
    """Most devices one domain of this scale-up fabric can join (NVLink Switch System: 256
    Hopper GPUs; NVLink 5: 576); None where no limit is published. ``cluster.gpus_per_node``
    may not exceed it."""
    source: str
    """Where the figures come from."""

    @property
    def effective_bandwidth_bytes_per_s(self) -> float:
        """Bandwidth a large transfer actually achieves: line rate times efficiency."""
        return self.bandwidth_bytes_per_s * self.efficiency
