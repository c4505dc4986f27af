"""Durations of a program's tasks from a compute model and a network model."""

from __future__ import annotations

from simtrain.compute.roofline import ComputeModel
from simtrain.network.base import NetworkModel
from simtrain.parallel.program import Program


def task_durations(program: Program, compute: ComputeModel, network: NetworkModel) -> list[float]:
    """Seconds of each task: a fixed duration, the sum of its compute ops, or its transfer.

    Compute ops of identical shape are timed once (the compute model caches by op), and so
    are collectives of identical kind, group and size (the network model caches). Tasks on
    the ``compute`` stream hold compute ops only, the other streams communication only.
    """
    durations = []
    # Builders share one ops tuple among all tasks cut from the same op sequence, so a
    # compute task's duration is computed once per distinct tuple.
    compute_cache: dict[int, float] = {}
    for task in program.tasks:
        if task.duration_s is not None:
            durations.append(task.duration_s)
            continue
        if task.stream == "compute":
            cached = compute_cache.get(id(task.ops))
            if cached is None:
                cached = compute_cache[id(task.ops)] = compute.task_time_s(task.ops)
            durations.append(cached)
            continue
        total = 0.0
        for op in task.ops:  # communication streams hold communication ops only
            if op.kind == "p2p":
                total += network.p2p_time_s(task.group[0], task.group[1], op.comm_bytes)
            else:
                total += network.collective_time_s(op.comm, task.group, op.comm_bytes)  # type: ignore[arg-type]
        durations.append(total)
    return durations
