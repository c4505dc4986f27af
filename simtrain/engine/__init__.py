"""The engine: the only layer that imports SimPy. It replays programs and times them."""

from __future__ import annotations

from collections.abc import Mapping

from simtrain.compute.roofline import ComputeModel
from simtrain.engine.core import EngineResult, execute
from simtrain.engine.timing import collective_choices, task_durations
from simtrain.network.base import NetworkModel
from simtrain.parallel.program import Program

__all__ = ["EngineResult", "collective_choices", "execute", "run_program", "task_durations"]


def run_program(
    program: Program,
    compute: ComputeModel | None = None,
    network: NetworkModel | None = None,
    speed: Mapping[int, float] | None = None,
) -> EngineResult:
    """Time every task of ``program`` and replay it.

    ``compute`` and ``network`` may be omitted when every task has a fixed ``duration_s``
    (abstract pipeline schedules, replayed traces). ``speed`` multiplies the compute tasks of
    each rank by its factor for this step (:mod:`simtrain.engine.variability`).
    """
    if compute is None or network is None:
        missing = [t.label for t in program.tasks if t.duration_s is None][:3]
        if missing:
            raise ValueError(f"tasks without a fixed duration need models: {missing}")
        durations = [t.duration_s or 0.0 for t in program.tasks]
    else:
        durations = task_durations(program, compute, network)
    if speed:
        durations = [
            d * speed[t.rank] if t.stream == "compute" else d
            for d, t in zip(durations, program.tasks, strict=True)
        ]
    return execute(program, durations)
