"""Fit an accelerator's compute calibration to the kernel times of a user's own profile.

``simtrain calibrate TRACE_DIR --accelerator NAME --out calib.yaml`` reads PyTorch profiler
(Kineto) or Chakra traces with measured durations, keeps every compute node whose ops the
compute model can time (GEMMs with their shapes, fused attention, memory-bound kernels with
their bytes) and fits, on the part's own calibration as a starting point:

- the GEMM ceiling at the trace's dtype (how close to peak well-shaped GEMMs get),
- the achieved HBM fraction of memory-bound kernels,
- the fixed per-kernel device cost,
- a common factor on the fused-attention efficiencies (when the trace has attention).

Shape terms (tile set, K-loop fill, split-K) stay those of the part's calibration: one
profile rarely spans enough shapes to pin them. Every fifth sample, in file order, is held out
and reported separately. The result is a complete calibration file that an experiment names
with ``cluster.calibration``, so a one-node profile predicts a thousand-node run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from simtrain.compute.fitting import from_unit, nelder_mead, to_unit
from simtrain.compute.roofline import RooflineComputeModel
from simtrain.errors import TraceFormatError
from simtrain.specs.calibration import ComputeCalibration, FitRecord
from simtrain.specs.hardware import AcceleratorSpec
from simtrain.traceio.model import RankTrace
from simtrain.workload.ops import Op

HOLD_OUT_EVERY = 5
FAMILIES = ("gemm", "attention", "memory")


@dataclass(frozen=True)
class KernelSample:
    """A compute node with a measured duration and ops the compute model can time."""

    ops: tuple[Op, ...]
    measured_s: float
    held_out: bool


@dataclass
class CalibrationFit:
    """What :func:`fit_calibration` found.

    Attributes:
        calibration: the fitted calibration (a complete, loadable calibration).
        families: per kernel family, counts and measured vs modelled seconds, before and
            after the fit, on the fit and held-out samples.
        fitted: the fitted constants.
    """

    calibration: ComputeCalibration
    families: dict[str, dict[str, float]]
    fitted: dict[str, float]


def family(ops: Sequence[Op]) -> str:
    """Kernel family of a sample: ``gemm``, ``attention`` or ``memory``."""
    kinds = {op.kind for op in ops}
    if "attention" in kinds:
        return "attention"
    return "gemm" if "gemm" in kinds else "memory"


def _timeable(op: Op) -> bool:
    if op.kind == "gemm":
        return op.m > 0 and op.n > 0 and op.k > 0
    if op.kind == "attention":
        return op.m > 0 and op.n > 0 and op.k > 0 and op.flops > 0
    return op.kind not in ("collective", "p2p") and op.bytes_accessed > 0


def kernel_samples(traces: Sequence[RankTrace]) -> list[KernelSample]:
    """Measured compute nodes whose every op can be timed, in file order."""
    samples: list[KernelSample] = []
    for trace in traces:
        for node in trace.nodes:
            if node.kind != "compute" or not node.ops or not node.duration_s:
                continue
            if node.stream == "host" or not all(_timeable(op) for op in node.ops):
                continue
            held = len(samples) % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1
            samples.append(KernelSample(node.ops, node.duration_s, held))
    return samples


def _with(base: ComputeCalibration, dtype: str, values: dict[str, float]) -> ComputeCalibration:
    gemm = base.gemm.model_copy(
        update={"ceiling": {**base.gemm.ceiling, dtype: values["gemm_ceiling"]}}
    )
    scale = values.get("attention_scale", 1.0)
    attention = {
        name: a.model_copy(
            update={
                "forward": {d: min(1.0, e * scale) for d, e in a.forward.items()},
                "backward": {d: min(1.0, e * scale) for d, e in a.backward.items()},
            }
        )
        for name, a in base.attention.items()
    }
    return base.model_copy(
        update={
            "gemm": gemm,
            "attention": attention,
            "memory_efficiency": values["memory_efficiency"],
            "kernel_overhead_s": values["kernel_overhead_s"],
        }
    )


def _model(
    accelerator: AcceleratorSpec, dtype: str, cal: ComputeCalibration, attention: str
) -> RooflineComputeModel:
    return RooflineComputeModel(accelerator, dtype, cal, attention_kernel=attention)


def fit_calibration(
    samples: Sequence[KernelSample],
    accelerator: AcceleratorSpec,
    dtype: str,
    base: ComputeCalibration,
    attention_kernel: str = "flash",
    source: str = "",
) -> CalibrationFit:
    """Fit the constants listed in the module docstring on the non-held-out samples.

    Raises:
        TraceFormatError: no sample the compute model can time.
    """
    if not samples:
        raise TraceFormatError(
            "the traces hold no compute kernel with a measured duration and a known shape or "
            "byte count (GEMMs with input shapes, attention, memory-bound kernels), so there "
            "is nothing to calibrate on"
        )
    fit_set = [s for s in samples if not s.held_out] or list(samples)
    has_attention = any(family(s.ops) == "attention" for s in fit_set)
    start = {
        "gemm_ceiling": base.gemm.ceiling.get(dtype, base.gemm.ceiling.get("bf16", 0.7)),
        "memory_efficiency": base.memory_efficiency,
        "kernel_overhead_s": max(base.kernel_overhead_s, 1e-7),
    }
    measured = np.array([s.measured_s for s in fit_set])

    def decode(x: np.ndarray) -> dict[str, float]:
        values = {
            "gemm_ceiling": to_unit(x[0]),
            "memory_efficiency": to_unit(x[1]),
            "kernel_overhead_s": math.exp(x[2]),
        }
        if has_attention:
            values["attention_scale"] = math.exp(x[3])
        return values

    def loss(x: np.ndarray) -> float:
        cal = _with(base, dtype, decode(x))
        model = _model(accelerator, dtype, cal, attention_kernel)
        modelled = np.array([model.task_time_s(s.ops) for s in fit_set])
        return float(np.mean(np.log(modelled / measured) ** 2))

    x0 = [
        from_unit(min(0.99, start["gemm_ceiling"])),
        from_unit(min(0.99, start["memory_efficiency"])),
        math.log(start["kernel_overhead_s"]),
    ]
    if has_attention:
        x0.append(0.0)
    values = decode(nelder_mead(loss, x0, step=0.2, max_iter=3000, tolerance=1e-14))
    fitted = _with(base, dtype, values).model_copy(
        update={
            "name": f"{accelerator.name.lower()}-profiled",
            "accelerators": [accelerator.name],
            "provenance": "fitted",
            "source": f"fitted by simtrain calibrate on measured kernels of {source or 'a trace'}",
            "fit": FitRecord(
                command=f"simtrain calibrate {source} --accelerator {accelerator.name}",
                dataset=f"{len(samples)} measured compute kernels of {source or 'a trace'}",
                fit_rows=f"{len(fit_set)} kernels (all but every {HOLD_OUT_EVERY}th in file order)",
                held_out_rows=f"{len(samples) - len(fit_set)} kernels (every "
                f"{HOLD_OUT_EVERY}th in file order)",
                date=date.today().isoformat(),
                error=_error_text(samples, accelerator, dtype, base, values, attention_kernel),
            ),
        }
    )
    families = _family_table(samples, accelerator, dtype, base, fitted, attention_kernel)
    return CalibrationFit(fitted, families, values)


def _error_text(samples, accelerator, dtype, base, values, attention_kernel) -> str:
    cal = _with(base, dtype, values)
    model = _model(accelerator, dtype, cal, attention_kernel)
    parts = []
    for held in (False, True):
        chosen = [s for s in samples if s.held_out == held]
        if chosen:
            errors = [abs(model.task_time_s(s.ops) / s.measured_s - 1) for s in chosen]
            name = "held out" if held else "fit"
            parts.append(f"{name}: mean |error| {np.mean(errors):.1%} over {len(chosen)}")
    return "; ".join(parts)


def _family_table(
    samples: Sequence[KernelSample],
    accelerator: AcceleratorSpec,
    dtype: str,
    base: ComputeCalibration,
    fitted: ComputeCalibration,
    attention_kernel: str,
) -> dict[str, dict[str, float]]:
    before = _model(accelerator, dtype, base, attention_kernel)
    after = _model(accelerator, dtype, fitted, attention_kernel)
    table: dict[str, dict[str, float]] = defaultdict(
        lambda: defaultdict(float)  # type: ignore[arg-type]
    )
    for s in samples:
        row = table[family(s.ops)]
        side = "held_out" if s.held_out else "fit"
        row[f"{side}_count"] += 1
        row[f"{side}_measured_s"] += s.measured_s
        row[f"{side}_before_s"] += before.task_time_s(s.ops)
        row[f"{side}_after_s"] += after.task_time_s(s.ops)
        row[f"{side}_abs_error_sum"] += abs(after.task_time_s(s.ops) / s.measured_s - 1)
    out = {}
    for name in FAMILIES:
        if name not in table:
            continue
        row = dict(table[name])
        for side in ("fit", "held_out"):
            count = row.get(f"{side}_count", 0)
            total = row.pop(f"{side}_abs_error_sum", 0.0)
            row[f"{side}_mean_abs_error"] = total / count if count else 0.0
        out[name] = row
    return out


def write_calibration(calibration: ComputeCalibration, path: Path) -> None:
    """Write ``calibration`` as a YAML file that ``cluster.calibration`` can name."""
    import yaml

    data = calibration.model_dump(mode="json")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
