"""Time of a compute op on an accelerator: a roofline with GEMM and attention efficiencies.

time = kernel overhead + max(FLOPs / achievable FLOP/s, bytes / achievable bytes/s)

Achievable FLOP/s of a GEMM is the dense peak at the training dtype times three factors:
the calibrated large-GEMM efficiency, the *wave efficiency* (the last wave of output tiles
leaves SMs idle: ``tiles / (waves * SMs)``), and a pipeline-fill factor ``K / (K + k_half)``
that penalises short reductions. Fused attention uses its own forward/backward efficiencies;
a causal kernel skips the masked upper triangle, so it executes about half of the counted
FLOPs (plus the diagonal blocks). Everything else is memory-bound at a calibrated fraction of
HBM bandwidth. A run of ops also cannot go faster than the host issues its kernels: eager
frameworks launch one kernel at a time from Python, so runs of tiny kernels are host-bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from simtrain.compute.calibration import ComputeCalibration, calibration_for
from simtrain.errors import SpecError
from simtrain.specs.hardware import AcceleratorSpec
from simtrain.workload.ops import Op

ATTENTION_BLOCK = 128  # query/key block of flash-attention kernels


class ComputeModel(Protocol):
    """Times compute ops on one device."""

    def op_time_s(self, op: Op) -> float:
        """Seconds the op keeps the device busy."""
        ...

    def task_time_s(self, ops: Sequence[Op]) -> float:
        """Seconds a run of ops issued back to back takes (device and host together)."""
        ...


def check_dtype(accelerator: AcceleratorSpec, dtype: str) -> None:
    """Reject a training dtype the accelerator has no peak for, listing the ones it has."""
    if dtype not in accelerator.peak_flops:
        valid = ", ".join(k for k in accelerator.peak_flops if k != "tf32")
        raise SpecError(
            f"'training.dtype' must be supported by {accelerator.name} "
            f"(got {dtype!r}; valid: {valid})"
        )


class RooflineComputeModel:
    """Roofline compute model of one accelerator at one dtype (see the module docstring)."""

    def __init__(
        self,
        accelerator: AcceleratorSpec,
        dtype: str = "bf16",
        calibration: ComputeCalibration | None = None,
    ) -> None:
        check_dtype(accelerator, dtype)
        self.accelerator = accelerator
        self.calibration = calibration or calibration_for(accelerator.name)
        self.peak_flops = accelerator.peak_flops[dtype]
        # FP8 recipes (Transformer Engine) run the linear layers in FP8 but keep the fused
        # attention kernels in 16 bits.
        self.attention_peak_flops = accelerator.peak_flops.get(
            "bf16" if dtype == "fp8" else dtype, self.peak_flops
        )
        self.memory_bytes_per_s = (
            accelerator.hbm_bandwidth_bytes_per_s * self.calibration.memory_efficiency
        )
        self._cache: dict[Op, float] = {}

    def gemm_efficiency(self, m: int, n: int, k: int, batch: int = 1) -> float:
        """Fraction of peak reached by a GEMM of output M x N, reduction K (``batch`` of them)."""
        cal = self.calibration
        tiles = math.ceil(m / cal.tile_m) * math.ceil(n / cal.tile_n) * batch
        sms = self.accelerator.num_compute_units
        wave = tiles / (math.ceil(tiles / sms) * sms)
        # Tiles smaller than the full tile waste the MMA units in proportion.
        fill_m = m / (math.ceil(m / cal.tile_m) * cal.tile_m)
        fill_n = n / (math.ceil(n / cal.tile_n) * cal.tile_n)
        return cal.gemm_efficiency * wave * fill_m * fill_n * k / (k + cal.gemm_k_half)

    def op_time_s(self, op: Op) -> float:
        """Seconds for ``op`` on this device (cached per op shape)."""
        cached = self._cache.get(op)
        if cached is not None:
            return cached
        cal = self.calibration
        memory_s = op.bytes_accessed / self.memory_bytes_per_s
        if op.kind == "gemm":
            eff = self.gemm_efficiency(op.m, op.n, op.k, op.batch)
            compute_s = op.flops / (self.peak_flops * eff)
        elif op.kind == "attention":
            eff = (
                cal.attention_fwd_efficiency
                if op.phase in ("fwd", "recompute")
                else cal.attention_bwd_efficiency
            )
            executed = op.flops
            if op.causal:
                blocks = max(1, math.ceil(op.m / ATTENTION_BLOCK))
                executed *= 0.5 + 0.5 / blocks
            compute_s = executed / (self.attention_peak_flops * eff)
        else:
            compute_s = 0.0
        time_s = cal.kernel_overhead_s + max(compute_s, memory_s)
        self._cache[op] = time_s
        return time_s

    def task_time_s(self, ops: Sequence[Op]) -> float:
        """Seconds for ``ops`` issued back to back by one host thread.

        The host issues a kernel every ``host_issue_s`` and may run ahead of the device, so
        a run of ops takes the longer of the device's total and the host's.
        """
        device_s = sum(map(self.op_time_s, ops))
        return max(device_s, len(ops) * self.calibration.host_issue_s)
