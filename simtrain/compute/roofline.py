"""Time of a compute op on an accelerator, and of issuing it from the host.

Device time, per op kind:

- **GEMMs** by shape (:mod:`simtrain.compute.gemm`): tile choice, wave quantisation, K-loop
  fill and split-K under the part's measured GEMM ceiling, never faster than streaming the
  operands through HBM. FP8 GEMMs with split accumulation (the backward GEMMs of
  TransformerEngine's and torchao's per-tensor recipes) run at the part's
  ``gemm.split_accumulator_speed`` of the fast-accumulation GEMMs the ceiling is measured on.
- **Fused attention** by kernel family, sequence, head dimension and mask
  (:mod:`simtrain.compute.attention_kernels`). Unfused attention is not an op of its own: the
  workload lists its batched GEMMs and softmax/dropout kernels.
- **Everything else** (norms, activations, dropout, embedding, loss, optimizer) is
  memory-bound: bytes at the calibrated fraction of HBM bandwidth, and PyTorch's generic
  kernel for non-contiguous (strided or broadcast) elementwise ops at a fraction of that.

Each kernel also pays a fixed device-side cost (launch latency, prologue, tail). Host time is
separate (:meth:`RooflineComputeModel.host_time_s`): the framework dispatches and launches every
op from the CPU, at a cost that depends on the execution mode (eager PyTorch, CUDA graphs,
compiled XLA) and, in eager mode, on who issues it: the model's Python code (forward,
recomputation, optimizer) or the autograd engine's C++ threads (backward). The engine runs it
on a host stream that may run ahead of the device, so it only costs time when kernels are
shorter than their issue (small per-GPU work).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from simtrain.compute.attention_kernels import attention_efficiency, executed_fraction
from simtrain.compute.calibration import calibration_for
from simtrain.compute.gemm import gemm_time_s
from simtrain.errors import SpecError
from simtrain.specs.calibration import (
    UNFUSED_KERNELS,
    AttentionKernel,
    ComputeCalibration,
    ExecutionMode,
)
from simtrain.specs.hardware import AcceleratorSpec
from simtrain.workload.ops import Op

BACKWARD_PHASES = frozenset(("bwd_input", "bwd_weight"))
"""Op phases the autograd engine issues (the backward graph), not the model's Python code."""


class ComputeModel(Protocol):
    """Times compute ops on one device, and their issue on its host."""

    def op_time_s(self, op: Op) -> float:
        """Seconds the op keeps the device busy."""
        ...

    def task_time_s(self, ops: Sequence[Op], contended: bool = False) -> float:
        """Device seconds of a run of ops issued back to back.

        ``contended``: while a collective kernel occupies part of the device.
        """
        ...

    def host_time_s(self, ops: Sequence[Op]) -> float:
        """Host seconds to issue a run of ops (kernels and collectives)."""
        ...


def check_dtype(accelerator: AcceleratorSpec, dtype: str) -> None:
    """Reject a training dtype the accelerator has no peak for, listing the ones it has."""
    if dtype not in accelerator.peak_flops:
        valid = ", ".join(k for k in accelerator.peak_flops if k != "tf32")
        raise SpecError(
            f"'training.dtype' must be supported by {accelerator.name} "
            f"(got {dtype!r}; valid: {valid})"
        )


def sixteen_bit(accelerator: AcceleratorSpec, dtype: str) -> str:
    """The 16-bit dtype an FP8 recipe keeps for attention and other non-GEMM math."""
    if dtype in ("bf16", "fp16"):
        return dtype
    return "bf16" if "bf16" in accelerator.peak_flops else "fp16"


class RooflineComputeModel:
    """Compute model of one accelerator at one training dtype (see the module docstring).

    Args:
        accelerator: the catalog part.
        dtype: training dtype (ops may name another in ``op.dtype``).
        calibration: efficiency constants; defaults to the part's calibration file.
        attention_kernel: fused attention family that ``attention`` ops run as.
        execution_mode: how the framework issues kernels (sets the host cost per op).
    """

    def __init__(
        self,
        accelerator: AcceleratorSpec,
        dtype: str = "bf16",
        calibration: ComputeCalibration | None = None,
        attention_kernel: AttentionKernel = "flash",
        execution_mode: ExecutionMode = "eager",
    ) -> None:
        check_dtype(accelerator, dtype)
        self.accelerator = accelerator
        self.dtype = dtype
        self.calibration = calibration or calibration_for(accelerator.name)
        cal = self.calibration
        # unfused kernels have no attention op of their own; the fused family is unused
        family = "flash" if attention_kernel in UNFUSED_KERNELS else attention_kernel
        if family not in cal.attention:
            known = ", ".join([*sorted(UNFUSED_KERNELS), *cal.attention])
            raise SpecError(
                f"'training.attention_kernel' must be a kernel {accelerator.name} runs "
                f"(got {attention_kernel!r}; valid: {known})"
            )
        self.attention = cal.attention[family]
        self.attention_peak_flops = accelerator.peak_flops[sixteen_bit(accelerator, dtype)]
        self.memory_bytes_per_s = accelerator.hbm_bandwidth_bytes_per_s * cal.memory_efficiency
        self.host = cal.host[execution_mode]
        self.execution_mode = execution_mode
        self._cache: dict[tuple, float] = {}

    def op_time_s(self, op: Op, reserved_sms: int = 0) -> float:
        """Seconds for ``op`` on this device (cached per shape: layers share their timing).

        ``reserved_sms`` SMs are held by a concurrent collective kernel: GEMM and attention
        tiles spread over the rest (memory-bound kernels are limited by HBM, not SMs), except
        that a persistent GEMM launched for the whole device runs its displaced CTAs in a
        second round (:mod:`simtrain.compute.gemm`).
        """
        if op.kind == "gemm":
            key = (
                "g",
                op.m,
                op.n,
                op.k,
                op.batch,
                op.dtype,
                op.bytes_accessed,
                reserved_sms,
                op.sm_target,
                op.split_accumulator,
            )
        elif op.kind == "attention":
            key = (
                "a",
                op.phase in ("fwd", "recompute"),
                op.causal,
                op.m,
                op.n,
                op.k,
                op.batch,
                op.window,
                op.flops,
                op.bytes_accessed,
                reserved_sms,
            )
        else:
            key = ("m", op.bytes_accessed, op.strided)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        time_s = self.calibration.kernel_overhead_s + self._busy_s(op, reserved_sms)
        self._cache[key] = time_s
        return time_s

    def _busy_s(self, op: Op, reserved_sms: int) -> float:
        """Device seconds of ``op`` without the fixed per-kernel cost."""
        cal, acc = self.calibration, self.accelerator
        sms = max(1, acc.num_compute_units - reserved_sms)
        # The peak scales with the SMs left, and a full training step sustains only part of
        # the throughput short kernel benchmarks reach (clocks at the power limit).
        share = sms / acc.num_compute_units * cal.sustained_compute_fraction
        if op.kind == "gemm":
            dtype = op.dtype or self.dtype
            peak = (acc.peak_flops.get(dtype) or acc.peak_flops[self.dtype]) * share
            if op.split_accumulator:  # slower than the fast-accumulation benchmark GEMMs
                peak *= cal.gemm.split_accumulator_speed
            return gemm_time_s(
                cal.gemm,
                dtype,
                sms,
                peak,
                self.memory_bytes_per_s,
                op.m,
                op.n,
                op.k,
                op.batch,
                op.bytes_accessed,
                # launched for the whole device unless told the SMs the collective leaves
                sms if op.sm_target else acc.num_compute_units,
            )
        if op.kind == "attention":
            backward = op.phase not in ("fwd", "recompute")
            keys = min(op.n, op.window) if op.window else op.n
            eff = attention_efficiency(
                self.attention, backward, op.causal, op.m, keys, op.k, op.batch, sms
            )
            executed = op.flops * executed_fraction(op.causal, op.m, op.window)
            return max(
                executed / (self.attention_peak_flops * share * eff),
                op.bytes_accessed / self.memory_bytes_per_s,
            )
        if op.strided:  # ATen's generic (non-vectorised) elementwise loop
            return op.bytes_accessed / (self.memory_bytes_per_s * cal.strided_memory_fraction)
        return op.bytes_accessed / self.memory_bytes_per_s

    def task_time_s(self, ops: Sequence[Op], contended: bool = False) -> float:
        """Device seconds for ``ops`` run back to back.

        ``contended``: while a collective kernel holds ``calibration.collective_sms`` SMs.
        """
        if not contended:
            return sum(self.op_time_s(op) for op in ops)
        reserved = self.calibration.collective_sms
        return sum(self.op_time_s(op, reserved) for op in ops)

    def host_time_s(self, ops: Sequence[Op]) -> float:
        """Host seconds to issue ``ops``: a dispatch per kernel, more per collective.

        Backward operators cost ``backward_per_kernel_s``: the autograd engine issues them
        from C++, without the model's Python code that the forward and recomputation run.
        """
        host = self.host
        forward = host.per_kernel_s
        backward = forward if host.backward_per_kernel_s is None else host.backward_per_kernel_s
        collective = host.per_collective_s
        return sum(
            collective if op.is_comm else backward if op.phase in BACKWARD_PHASES else forward
            for op in ops
        )
