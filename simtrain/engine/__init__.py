"""The engine: the only layer that imports SimPy. It replays programs and times them."""

from __future__ import annotations

from collections.abc import Mapping

from simtrain.compute.roofline import ComputeModel
from simtrain.engine.core import EngineResult, execute
from simtrain.engine.host import host_plan
from simtrain.engine.timing import (
    ContendedDurations,
    collective_choices,
    contended_durations,
    task_durations,
)
from simtrain.gcpause import without_cyclic_gc
from simtrain.network.base import NetworkModel
from simtrain.parallel.program import Program

__all__ = [
    "EngineResult",
    "collective_choices",
    "contended_durations",
    "execute",
    "run_program",
    "task_durations",
]


@without_cyclic_gc
def run_program(
    program: Program,
    compute: ComputeModel | None = None,
    network: NetworkModel | None = None,
    speed: Mapping[int, float] | None = None,
    host: bool = True,
    sync_on_p2p: bool | None = None,
    interference: bool = True,
) -> EngineResult:
    """Time every task of ``program`` and replay it.

    ``compute`` and ``network`` may be omitted when every task has a fixed ``duration_s``
    (abstract pipeline schedules, replayed traces). ``speed`` multiplies the compute tasks of
    each rank by its factor for this step (:mod:`simtrain.engine.variability`). With
    ``host`` (the default) each simulated rank also gets a host stream that issues its kernels
    (:mod:`simtrain.engine.host`) unless the compute model's execution mode costs the host
    nothing; the replayed program, host tasks included, is ``EngineResult.program``.
    ``sync_on_p2p`` defaults to synchronising on pipeline transfers in eager mode when the
    program's stack does (``Program.syncs_on_p2p``). With
    ``interference`` (the default), compute that overlaps communication runs on the SMs the
    collective kernels leave free (:func:`~simtrain.engine.core.execute`).
    """
    if compute is None or network is None:
        missing = [t.label for t in program.tasks if t.duration_s is None][:3]
        if missing:
            raise ValueError(f"tasks without a fixed duration need models: {missing}")
        fixed = [t.duration_s or 0.0 for t in program.tasks]
        return execute(program, _scaled(program, fixed, speed) if speed else fixed)
    durations = task_durations(program, compute, network)
    contended = contended_durations(program, compute) if interference else None
    if speed:
        durations = _scaled(program, durations, speed)
        if contended is not None:
            contended = contended.scaled(speed)
    if host and _issues_from_host(compute):
        mode = getattr(compute, "execution_mode", "eager")
        default = mode == "eager" and program.syncs_on_p2p
        sync = default if sync_on_p2p is None else sync_on_p2p
        plan = host_plan(program, durations, compute, sync)
        return execute(program, durations, contended, plan, _spread(contended, compute))
    return execute(program, durations, contended, transfer_contended_s=_spread(contended, compute))


def _spread(
    contended: ContendedDurations | None, compute: ComputeModel
) -> ContendedDurations | None:
    """The durations next to a point-to-point transfer (see ``contended_durations``).

    None (the same as next to a collective) unless the part's GEMMs are persistent.
    """
    calibration = getattr(compute, "calibration", None)
    if contended is None or not getattr(getattr(calibration, "gemm", None), "persistent", False):
        return None
    return contended.spread()


def _scaled(program: Program, durations: list[float], speed: Mapping[int, float]) -> list[float]:
    """Compute durations of each rank multiplied by its speed factor for this step."""
    return [
        d * speed[t.rank] if t.stream == "compute" else d
        for d, t in zip(durations, program.tasks, strict=True)
    ]


def _issues_from_host(compute: ComputeModel) -> bool:
    """Whether issuing kernels costs the host anything in the model's execution mode."""
    cost = getattr(compute, "host", None)
    return cost is not None and (cost.per_kernel_s > 0 or cost.per_collective_s > 0)
