"""Durations of a program's tasks from a compute model and a network model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from simtrain.compute.roofline import ComputeModel
from simtrain.network.base import DescribedNetwork, NetworkModel
from simtrain.parallel.program import Program, Task


def task_durations(program: Program, compute: ComputeModel, network: NetworkModel) -> list[float]:
    """Seconds of each task: a fixed duration, the sum of its compute ops, or its transfer.

    Compute ops of identical shape are timed once (the compute model caches by op), and so
    are collectives of identical kind, group and size (the network model caches). Tasks on
    the ``compute`` stream hold compute ops only, the other streams communication only.
    """
    durations = []
    # Builders share one ops tuple among all tasks cut from the same op sequence, so a
    # compute task's duration is computed once per distinct tuple; and one op object and one
    # group tuple among the collectives a rank repeats (every microbatch's), so a single-op
    # communication task is timed once per (op, group) object pair. Both models are pure.
    compute_cache: dict[int, float] = {}
    comm_cache: dict[tuple[int, int], float] = {}
    for task in program.tasks:
        if task.duration_s is not None:
            durations.append(task.duration_s)
            continue
        ops = task.ops
        if task.stream == "compute":
            cached = compute_cache.get(id(ops))
            if cached is None:
                cached = compute_cache[id(ops)] = compute.task_time_s(ops)
            durations.append(cached)
            continue
        if len(ops) == 1:
            key = (id(ops[0]), id(task.group))
            cached = comm_cache.get(key)
            if cached is None:
                cached = comm_cache[key] = _communication_s(task, network)
            durations.append(cached)
            continue
        durations.append(_communication_s(task, network))
    return durations


def _communication_s(task: Task, network: NetworkModel) -> float:
    """Seconds of a communication task: its ops one after another."""
    total = 0.0
    for op in task.ops:  # communication streams hold communication ops only
        if op.kind == "p2p":
            total += network.p2p_time_s(task.group[0], task.group[1], op.comm_bytes)
        else:
            total += network.collective_time_s(op.comm, task.group, op.comm_bytes)  # type: ignore[arg-type]
    return total


class ContendedDurations:
    """Each compute task's duration while a collective holds part of its device, on demand.

    Indexed like the program's tasks (0 for other tasks and for indices past its end, such
    as host tasks appended later). Only compute tasks that overlap communication ever need
    it, so each distinct ops tuple is timed the first time one does. With ``spread``, every
    GEMM is timed as launched for the SMs left free (its tiles spread over them), the way
    point-to-point transfers are priced (see :func:`contended_durations`).
    """

    def __init__(
        self,
        tasks: list[Task],
        compute: ComputeModel,
        speed: Mapping[int, float] | None = None,
        spread: bool = False,
    ) -> None:
        self._tasks = tasks
        self._compute = compute
        self._speed = speed
        self._spread = spread
        self._cache: dict[int, float] = {}

    def __getitem__(self, index: int) -> float:
        if index >= len(self._tasks):
            return 0.0
        task = self._tasks[index]
        if task.stream != "compute" or task.duration_s is not None:
            return 0.0
        seconds = self._cache.get(id(task.ops))
        if seconds is None:
            ops = task.ops
            if self._spread:
                ops = tuple(replace(op, sm_target=True) if op.kind == "gemm" else op for op in ops)
            seconds = self._cache[id(task.ops)] = self._compute.task_time_s(ops, contended=True)
        return seconds * self._speed[task.rank] if self._speed else seconds

    def scaled(self, speed: Mapping[int, float]) -> ContendedDurations:
        """The same durations with each rank's compute multiplied by its speed factor."""
        return ContendedDurations(self._tasks, self._compute, speed, self._spread)

    def spread(self) -> ContendedDurations:
        """The same tasks with every GEMM launched for the SMs the transfer leaves."""
        return ContendedDurations(self._tasks, self._compute, self._speed, spread=True)


def contended_durations(program: Program, compute: ComputeModel) -> ContendedDurations | None:
    """Each compute task's duration while a collective holds part of the device.

    None when the compute model has no interference (no SMs taken by collectives), so the
    engine can skip the bookkeeping. Other tasks read 0 (not used). A persistent GEMM launched
    for the whole device runs its displaced CTAs in a second round next to a collective
    (:mod:`simtrain.compute.gemm`); next to a point-to-point transfer the engine uses
    :meth:`ContendedDurations.spread` instead (``collective_sms`` is a collective's channel
    count; how many SMs NCCL's send and receive kernels hold is not in the reference set).
    """
    calibration = getattr(compute, "calibration", None)
    if calibration is None or not getattr(calibration, "collective_sms", 0):
        return None
    return ContendedDurations(program.tasks, compute)


def collective_choices(program: Program, network: NetworkModel) -> list[tuple[str, str]]:
    """(algorithm, protocol) of the communication of every task.

    Empty strings for compute and fixed-duration tasks, and when ``network`` does not
    describe its choices (:class:`~simtrain.network.base.DescribedNetwork`).
    A task of several communication ops lists each distinct choice, joined by ``+``.
    Lookups hit the network model's cache filled by :func:`task_durations`.
    """
    empty = ("", "")
    if not isinstance(network, DescribedNetwork):
        return [empty] * len(program.tasks)
    choices = []
    seen: dict[tuple[int, tuple[int, ...]], tuple[str, str]] = {}
    for task in program.tasks:
        if task.stream == "compute" or task.duration_s is not None or not task.ops:
            choices.append(empty)
            continue
        key = (id(task.ops), task.group)
        known = seen.get(key)
        if known is not None:
            choices.append(known)
            continue
        algorithms, protocols = [], []
        for op in task.ops:
            if op.kind == "p2p":
                timing = network.time_collective(
                    "send_recv", (task.group[0], task.group[1]), op.comm_bytes
                )
            else:
                timing = network.time_collective(op.comm, task.group, op.comm_bytes)
            if timing.algorithm not in algorithms:
                algorithms.append(timing.algorithm)
            if timing.protocol not in protocols:
                protocols.append(timing.protocol)
        choices.append(seen.setdefault(key, ("+".join(algorithms), "+".join(protocols))))
    return choices
