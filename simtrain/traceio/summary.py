"""The report of a replayed trace, with the keys of ``simtrain run --json``.

A trace records what ran, not the model that produced it, so some keys have no value:
``memory`` (traces do not record allocations), ``num_params``, ``model_flops_per_token``
(per FLOP convention, a property of the model), ``cost`` and, without an
experiment file, ``tokens_per_step``, ``tokens_per_s`` and ``spec`` are ``null``
(:func:`~simtrain.traceio.run.replay_directory` fills ``spec``, ``simtrain_version`` and the
wall time). FLOPs are
summed from the trace's ops (GEMM and attention FLOPs; recomputation counts for HFU only), so
MFU is 0 for traces that record durations only (Kineto). The extra ``replay`` section says
where the trace came from and how ``--retarget`` changed it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from simtrain.engine.core import EngineResult
from simtrain.metrics.flops import StepFlops
from simtrain.metrics.timeline import RankTime, rank_times
from simtrain.parallel.program import Program
from simtrain.specs.hardware import AcceleratorSpec
from simtrain.traceio.model import HOST_STREAM


def trace_flops(program: Program) -> StepFlops:
    """Model and hardware FLOPs of the whole job, from the ops of the simulated ranks."""
    model = hardware = 0.0
    for task in program.tasks:
        if task.stream != "compute":
            continue
        weight = program.weights.get(task.rank, 1)
        for op in task.ops:
            if op.is_matmul:
                hardware += weight * op.flops
                if op.phase != "recompute":
                    model += weight * op.flops
    return StepFlops(model=model, hardware=hardware)


def per_rank_times(program: Program, engine: EngineResult) -> list[RankTime]:
    """:func:`rank_times` of a replay, counting each member's copy of a collective once.

    Replayed collectives are one task per member; the metrics count a shared task for all
    its members, so each copy is narrowed to its own rank first. Kernel launches (the
    ``host`` stream of Kineto traces) are host time, neither compute nor communication. A
    trace the modelled host issued (simtrain's own export) has its host intervals
    accounted as a run's are, so its idle time splits into exposed host and bubble alike.
    """
    copies = Counter(t.collective_key for t in program.tasks if t.collective_key)
    kept = [i for i, t in enumerate(program.tasks) if t.stream != HOST_STREAM]
    view = dataclasses.replace(
        program,
        tasks=[
            dataclasses.replace(t, group=(t.rank,)) if copies[t.collective_key] > 1 else t
            for t in (program.tasks[i] for i in kept)
        ],
    )
    host = engine.host.intervals() if engine.host is not None else None
    return rank_times(
        view, engine.replayed_start_s[kept], engine.replayed_end_s[kept], engine.step_time_s, host
    )


def replay_summary(
    name: str,
    program: Program,
    engine: EngineResult,
    accelerator: AcceleratorSpec,
    dtype: str,
    replay_info: dict[str, Any],
    tokens_per_step: int | None = None,
    calibration: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The report dict (see the module docstring for the keys that stay ``null``)."""
    step = engine.step_time_s
    ranks = per_rank_times(program, engine)
    weights = {r.rank: program.weights.get(r.rank, 1) for r in ranks}
    total = sum(weights.values())

    def mean(attribute: str) -> float:
        return sum(weights[r.rank] * getattr(r, attribute) for r in ranks) / total

    breakdown: dict[str, float] = {}
    for r in ranks:
        for category, seconds in r.by_category_s.items():
            breakdown[category] = breakdown.get(category, 0.0) + weights[r.rank] * seconds / total
    exposed: dict[str, float] = {}
    for r in ranks:
        for category, seconds in r.exposed_by_category_s.items():
            exposed[category] = exposed.get(category, 0.0) + weights[r.rank] * seconds / total
    flops = trace_flops(program)
    gpus, peak = program.world_size, accelerator.peak_flops[dtype]
    bubble = mean("bubble_s")
    return {
        "name": name,
        "step_time_s": step,
        "tokens_per_s": tokens_per_step / step if tokens_per_step and step else None,
        "tflops_per_gpu": flops.hardware / step / gpus / 1e12 if step else 0.0,
        "model_tflops_per_gpu": flops.model / step / gpus / 1e12 if step else 0.0,
        "mfu": flops.model / (step * gpus * peak) if step else 0.0,
        "hfu": flops.hardware / (step * gpus * peak) if step else 0.0,
        "exposed_comm_s": mean("exposed_comm_s"),
        "exposed_comm_by_category_s": dict(sorted(exposed.items())),
        "exposed_host_s": mean("exposed_host_s"),
        "compute_calibration": dict(calibration or {}),
        "bubble_s": bubble,
        "bubble_fraction": bubble / step if step else 0.0,
        "compute_s": mean("busy_s"),
        "breakdown_s": dict(sorted(breakdown.items())),
        "memory": None,
        "cost": None,
        "num_gpus": gpus,
        "num_params": None,
        "tokens_per_step": tokens_per_step,
        "model_flops_per_step": flops.model,
        "hardware_flops_per_step": flops.hardware,
        "model_flops_per_token": None,
        "simulation": {
            "wall_time_s": engine.replay_wall_s,
            "events": engine.num_events,
            "replay_wall_s": engine.replay_wall_s,
            "events_per_s": engine.num_events / engine.replay_wall_s
            if engine.replay_wall_s
            else 0.0,
            "simulated_ranks": len(ranks),
            "tasks": len(program.tasks),
        },
        "spec": None,
        "simtrain_version": "",
        "replay": replay_info,
    }
