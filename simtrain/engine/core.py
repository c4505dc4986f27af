"""The SimPy core: replay a :class:`~simtrain.parallel.program.Program` and time every task.

One SimPy process runs per (rank, stream). It takes its tasks in program order and, for each,
waits for the task's dependencies, then (for a collective) for every simulated member of the
collective to arrive, then holds for the task's duration. All run state lives in one
``simpy.Environment`` and the local variables of :func:`execute`, so any number of
simulations can run in one process (sweeps, notebooks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from simtrain.errors import EngineDeadlock
from simtrain.parallel.program import Program


@dataclass
class EngineResult:
    """When each task ran.

    Attributes:
        start_s: start time of each task, indexed like ``Program.tasks``.
        end_s: end time of each task.
        step_time_s: time at which the last task ended.
        num_events: SimPy events processed (timeouts, dependency and rendezvous events).
    """

    start_s: np.ndarray
    end_s: np.ndarray
    step_time_s: float
    num_events: int


def execute(program: Program, durations_s: Sequence[float]) -> EngineResult:
    """Run ``program`` with the given per-task durations and return the task times.

    Raises:
        EngineDeadlock: some tasks never started (a dependency cycle, or a collective whose
            members issue collectives in different orders).
    """
    tasks = program.tasks
    num_tasks = len(tasks)
    env = simpy.Environment()
    start = np.full(num_tasks, np.nan)
    end = np.full(num_tasks, np.nan)

    needed = {d for task in tasks for d in task.deps}
    done: dict[int, simpy.Event] = {i: env.event() for i in needed}
    arrivals: dict[str, int] = defaultdict(int)
    for task in tasks:
        if task.collective_key:
            arrivals[task.collective_key] += 1
    gates: dict[str, simpy.Event] = {key: env.event() for key in arrivals}

    streams: dict[tuple[int, str], list[int]] = defaultdict(list)
    for index, task in enumerate(tasks):
        streams[(task.rank, task.stream)].append(index)

    counter = [0]

    def stream_process(indices: list[int]):
        timeout = env.timeout
        for index in indices:
            task = tasks[index]
            for dep in task.deps:
                event = done[dep]
                if not event.triggered:
                    counter[0] += 1
                    yield event
            key = task.collective_key
            if key:
                arrivals[key] -= 1
                gate = gates[key]
                if arrivals[key] == 0:
                    gate.succeed()
                else:
                    counter[0] += 1
                    yield gate
            start[index] = env.now
            duration = durations_s[index]
            if duration > 0:
                counter[0] += 1
                yield timeout(duration)
            end[index] = env.now
            event = done.get(index)
            if event is not None:
                event.succeed()

    for indices in streams.values():
        env.process(stream_process(indices))
    env.run()

    unfinished = np.flatnonzero(np.isnan(end))
    if unfinished.size:
        stuck = ", ".join(
            f"rank {tasks[i].rank} {tasks[i].stream} '{tasks[i].label}'" for i in unfinished[:5]
        )
        raise EngineDeadlock(
            f"{unfinished.size} of {num_tasks} tasks never ran; first waiting: {stuck}"
        )
    step = float(end.max()) if num_tasks else 0.0
    return EngineResult(start, end, step, counter[0])
