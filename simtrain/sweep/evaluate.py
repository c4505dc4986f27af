"""The task an executor runs for one configuration: memory verdict, then one simulated step.

:func:`evaluate` takes the resolved spec as plain JSON data (cheap to pickle, and the same for
a local process and a Ray worker) and returns a flat row. It never raises for a bad
configuration: out of memory by the analytical estimate is the ``oom`` verdict (pruned, not
simulated), and any exception while simulating is recorded as ``error`` with its message, so
one broken configuration never stops a sweep.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from simtrain.api import simulate
from simtrain.catalog import get_accelerator
from simtrain.memory import estimate_memory
from simtrain.specs.experiment import ExperimentSpec

METRIC_COLUMNS: tuple[str, ...] = (
    "num_gpus",
    "step_time_s",
    "tokens_per_s",
    "mfu",
    "hfu",
    "tflops_per_gpu",
    "bubble_fraction",
    "exposed_comm_s",
    "peak_memory_bytes",
    "memory_capacity_bytes",
    "memory_headroom_bytes",
    "fits",
)
"""Result columns every evaluated row carries (None where not computed)."""

_GB = 1e9


def memory_columns(spec: ExperimentSpec, capacity: float) -> tuple[dict[str, Any], str]:
    """A configuration's memory columns, and why it does not fit ("" when it does)."""
    memory = estimate_memory(spec, capacity)
    columns = {
        "num_gpus": spec.cluster.num_gpus,
        "peak_memory_bytes": memory.peak_bytes,
        "memory_capacity_bytes": capacity,
        "memory_headroom_bytes": capacity - memory.peak_bytes,
        "fits": memory.fits,
    }
    if memory.fits:
        return columns, ""
    return columns, f"peak memory {memory.peak_bytes / _GB:.1f} GB > {capacity / _GB:.1f} GB"


def evaluate(spec_data: dict[str, Any]) -> dict[str, Any]:
    """Evaluate one configuration; returns ``status``, ``error``, the metrics and wall time.

    Status is ``ok`` (simulated), ``oom`` (pruned by the memory estimate) or ``error``.
    """
    began = time.perf_counter()
    row: dict[str, Any] = dict.fromkeys(METRIC_COLUMNS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no-effect warnings were seen when the sweep resolved
            spec = ExperimentSpec.model_validate(spec_data)
        columns, reason = memory_columns(
            spec, get_accelerator(spec.cluster.accelerator).hbm_capacity_bytes
        )
        row.update(columns)
        if reason:
            return {**row, "status": "oom", "error": reason, "wall_time_s": _since(began)}
        report = simulate(spec).summary()
        row.update({k: report[k] for k in METRIC_COLUMNS if k in report})
        return {**row, "status": "ok", "error": "", "wall_time_s": _since(began)}
    except Exception as exc:  # recorded, and the sweep goes on
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        return {**row, "status": "error", "error": message, "wall_time_s": _since(began)}


def _since(began: float) -> float:
    return time.perf_counter() - began
