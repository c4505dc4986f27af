"""Replay a trace directory on a cluster: read, assemble, optionally retarget, simulate, report."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simtrain.api import simtrain_version
from simtrain.catalog import get_accelerator
from simtrain.compute.roofline import ComputeModel, RooflineComputeModel
from simtrain.engine import run_program
from simtrain.errors import EngineDeadlock, SpecError, TraceFormatError
from simtrain.network.base import NetworkModel
from simtrain.specs.hardware import AcceleratorSpec
from simtrain.traceio.model import HOST_STREAM
from simtrain.traceio.readers import read_traces
from simtrain.traceio.replay import build_program, retarget
from simtrain.traceio.summary import replay_summary


@dataclass(frozen=True)
class ReplayTarget:
    """The simulated cluster a trace is replayed on.

    Attributes:
        name: report name (the experiment's, or the topology's).
        accelerator: the cluster's accelerator.
        dtype: training dtype, for the compute model and MFU.
        num_gpus: devices in the cluster; the trace's world size must fit.
        network: the cluster's network model.
        tokens_per_step: tokens per step if an experiment says so, else None.
        spec: the resolved experiment (JSON form) when replaying on an experiment's cluster.
        compute: the experiment's compute model (calibration, attention kernel, execution
            mode); None for the accelerator's catalog calibration in eager mode.
    """

    name: str
    accelerator: AcceleratorSpec
    dtype: str
    num_gpus: int
    network: NetworkModel
    tokens_per_step: int | None = None
    spec: dict[str, Any] | None = None
    compute: ComputeModel | None = None


def replay_directory(
    directory: Path,
    target: ReplayTarget,
    retime: bool = False,
    source_accelerator: str | None = None,
    max_nodes: int | None = None,
) -> dict[str, Any]:
    """Replay every rank file of ``directory`` on ``target`` and return the report.

    Args:
        directory: per-rank Chakra or Kineto traces.
        target: the cluster to replay on.
        retime: re-time measured compute for ``target.accelerator`` (``--retarget``).
        max_nodes: most nodes per rank file (``--max-trace-nodes``).
        source_accelerator: the accelerator the trace was recorded on; defaults to the one
            the trace names.

    Raises:
        TraceFormatError: a malformed trace, or ranks whose collectives never meet.
        SpecError: the trace needs more ranks than the cluster has, or ``retime`` without a
            known source accelerator.
    """
    began = time.perf_counter()
    fmt, traces = read_traces(directory, max_nodes)
    program = build_program(traces)
    if program.world_size > target.num_gpus:
        raise SpecError(
            f"'cluster.num_gpus' must be at least the trace's world size "
            f"{program.world_size} (got {target.num_gpus})"
        )
    recorded = source_accelerator or next((t.accelerator for t in traces if t.accelerator), "")
    info: dict[str, Any] = {
        "trace_dir": str(directory),
        "format": fmt,
        "num_rank_files": len(traces),
        "accelerator": target.accelerator.name,
        "source_accelerator": recorded or None,
        "measured_durations_kept": not retime,
    }
    if retime:
        if not recorded:
            raise SpecError(
                "'--source-accelerator' must name the accelerator the trace was recorded on "
                "(the trace does not say)"
            )
        source = get_accelerator(recorded)
        peak = source.peak_flops.get(target.dtype, max(source.peak_flops.values()))
        note = retarget(program, peak, target.accelerator.peak_flops[target.dtype])
        info["retarget"] = {
            "num_reestimated": note.num_reestimated,
            "num_scaled": note.num_scaled,
            "scale": note.scale,
            "scaled_names": list(note.scaled_names),
        }
        if note.num_reestimated + note.num_scaled == 0:
            # simtrain's own exports carry ops, not measured times: the compute model already
            # times every task for the target, so there is nothing to re-time.
            info["retarget"]["note"] = (
                f"nothing to re-time: the trace has no measured compute durations, so every "
                f"compute task is already timed by the compute model of "
                f"{target.accelerator.name}"
            )
    compute = target.compute or RooflineComputeModel(target.accelerator, target.dtype)
    # Measured traces keep the pacing they were recorded with (their kernel durations, and
    # the host thread where Kineto records it); only a trace with nothing measured, such as
    # simtrain's own export, is issued by the modelled host.
    host = not any(
        task.stream == HOST_STREAM or (task.stream == "compute" and task.duration_s is not None)
        for task in program.tasks
    )
    try:
        engine = run_program(program, compute, target.network, host=host)
    except EngineDeadlock as exc:
        raise TraceFormatError(
            f"{directory}: the rank files issue their collectives or transfers in orders "
            f"that cannot all be met ({exc})"
        ) from None
    report = replay_summary(
        target.name,
        engine.program or program,
        engine,
        target.accelerator,
        target.dtype,
        info,
        target.tokens_per_step,
        _calibration_info(compute),
    )
    report["spec"] = target.spec
    report["simtrain_version"] = simtrain_version()
    report["simulation"]["wall_time_s"] = time.perf_counter() - began
    return report


def _calibration_info(compute: ComputeModel) -> dict[str, str]:
    """Name, provenance and source of the compute model's constants (report key)."""
    cal = getattr(compute, "calibration", None)
    if cal is None:
        return {}
    return {"name": cal.name, "provenance": cal.provenance, "source": cal.source}
