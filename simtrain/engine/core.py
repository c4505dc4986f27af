"""The SimPy core: replay a :class:`~simtrain.parallel.program.Program` and time every task.

One SimPy process runs per (rank, stream). It takes its tasks in program order and, for each,
waits for the task's dependencies (counted down as tasks finish, so a stream only sleeps when
it must), then (for a collective split into one task per member, as in replayed traces) for
every member to arrive, then holds for the task's duration. A ``host`` stream (the CPU
thread issuing a rank's kernels, :mod:`simtrain.engine.host`) runs ahead on a clock of its
own: a host task whose dependencies have ended is timed by arithmetic, without an event,
and the task it issues may not start before it ends; the stream only waits in simulated
time for a synchronisation point (a dependency still running). All run state lives in one
``simpy.Environment`` and the local variables of :func:`execute`, so any number of
simulations can run in one process (sweeps, notebooks).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from simtrain.engine.host import HOST_STREAM
from simtrain.errors import EngineDeadlock
from simtrain.parallel.program import Program


@dataclass
class EngineResult:
    """When each task ran.

    Attributes:
        start_s: start time of each task, indexed like ``Program.tasks``.
        end_s: end time of each task.
        step_time_s: time at which the last task ended.
        num_events: SimPy events processed: timeouts, wake-ups of streams that waited for a
            dependency, rendezvous gates, and the start and end of every stream process.
        replay_wall_s: host seconds spent in the SimPy run itself.
        program: the program that was replayed (with its host stream, when one was added).
    """

    start_s: np.ndarray
    end_s: np.ndarray
    step_time_s: float
    num_events: int
    replay_wall_s: float = 0.0
    program: Program | None = None


def execute(
    program: Program,
    durations_s: Sequence[float],
    contended_s: Sequence[float] | None = None,
) -> EngineResult:
    """Run ``program`` with the given per-task durations and return the task times.

    With ``contended_s`` (each compute task's duration while a collective kernel holds part
    of its device), compute that overlaps communication of its rank is slowed: a compute task
    runs ``contended/normal - 1`` longer per second of overlap with the communication tasks
    in flight on its rank, counted once per (compute, communication) pair — at the compute
    task's start for communication already in flight, at the communication's start for
    compute already running (paid when that compute task would have ended).

    Raises:
        EngineDeadlock: some tasks never started (a dependency cycle, or a collective whose
            members issue collectives in different orders).
    """
    tasks = program.tasks
    num_tasks = len(tasks)
    env = simpy.Environment()
    start = [math.nan] * num_tasks
    end = [math.nan] * num_tasks

    # Dependencies are counted down as tasks finish; a stream only yields (and only then
    # creates an event) when its next task still waits for something.
    pending = [0] * num_tasks
    dependents: dict[int, list[int]] = defaultdict(list)
    arrivals: dict[str, int] = defaultdict(int)
    streams: dict[tuple[int, str], list[int]] = defaultdict(list)
    keyed: list[int] = []
    for index, task in enumerate(tasks):
        streams[(task.rank, task.stream)].append(index)
        if task.collective_key:
            arrivals[task.collective_key] += 1
            keyed.append(index)
        deps = task.deps
        for dep in deps if len(deps) < 2 else set(deps):
            pending[index] += 1
            dependents[dep].append(index)
    # Only collectives with several tasks (one per simulated member) need a rendezvous.
    keys = [""] * num_tasks
    for index in keyed:
        key = tasks[index].collective_key
        if arrivals[key] > 1:
            keys[index] = key
    gates: dict[str, simpy.Event] = {key: env.event() for key in set(keys) if key}
    wake: dict[int, simpy.Event] = {}
    wakes = 0
    holds = 0
    # A task issued by a host task that ran ahead may not start before that host task ends.
    not_before = [0.0] * num_tasks

    def finished(index: int, at: float) -> None:
        for waiter in dependents.get(index, ()):
            pending[waiter] -= 1
            if at > not_before[waiter]:
                not_before[waiter] = at
            if not pending[waiter]:
                event = wake.pop(waiter, None)
                if event is not None:
                    event.succeed()

    def host_process(indices: list[int]):
        nonlocal wakes, holds
        timeout = env.timeout
        clock = 0.0  # the host's own time, at or ahead of the simulation's
        for index in indices:
            if pending[index]:
                if clock > env.now:
                    holds += 1
                    yield timeout(clock - env.now)
                if pending[index]:
                    event = wake[index] = env.event()
                    wakes += 1
                    yield event
                clock = max(clock, env.now, not_before[index])
            start[index] = clock
            clock += durations_s[index]
            end[index] = clock
            finished(index, clock)

    def stream_process(indices: list[int]):
        nonlocal wakes, holds
        timeout = env.timeout
        for index in indices:
            if pending[index]:
                event = wake[index] = env.event()
                wakes += 1
                yield event
            if not_before[index] > env.now:
                holds += 1
                yield timeout(not_before[index] - env.now)
            key = keys[index]
            if key:
                arrivals[key] -= 1
                gate = gates[key]
                if arrivals[key] == 0:
                    gate.succeed()
                else:
                    yield gate
            start[index] = env.now
            duration = durations_s[index]
            if contention is not None:
                duration = contention.begin(index, duration)
            if duration > 0:
                yield timeout(duration)
            if contention is not None and is_compute[index]:
                owed = contention.settle(index)
                while owed > 0:  # slowed further by collectives that started meanwhile
                    yield timeout(owed)
                    owed = contention.settle(index)
            end[index] = env.now
            finished(index, env.now)

    contention = (
        _Contention(env, program, durations_s, contended_s, keys)
        if contended_s is not None
        else None
    )
    is_compute = contention.is_compute if contention is not None else ()
    for (_, stream), indices in streams.items():
        process = host_process if stream == HOST_STREAM else stream_process
        env.process(process(indices))
    began = time.perf_counter()
    env.run()
    replay_wall_s = time.perf_counter() - began
    start_s, end_s = np.array(start), np.array(end)
    timeouts = sum(
        1 for t, d in zip(tasks, durations_s, strict=True) if d > 0 and t.stream != HOST_STREAM
    )
    num_events = timeouts + holds + wakes + len(gates) + 2 * len(streams)

    unfinished = np.flatnonzero(np.isnan(end_s))
    if unfinished.size:
        stuck = ", ".join(
            f"rank {tasks[i].rank} {tasks[i].stream} '{tasks[i].label}'" for i in unfinished[:5]
        )
        raise EngineDeadlock(
            f"{unfinished.size} of {num_tasks} tasks never ran; first waiting: {stuck}"
        )
    step = float(end_s.max()) if num_tasks else 0.0
    return EngineResult(start_s, end_s, step, num_events, replay_wall_s, program)


class _Contention:
    """Compute slowed by the collectives in flight on its rank (see :func:`execute`).

    A compute task's slowdown rate and a collective's simulated members are worked out the
    first time they matter (most compute never overlaps a collective).
    """

    def __init__(
        self,
        env: simpy.Environment,
        program: Program,
        durations_s: Sequence[float],
        contended_s: Sequence[float],
        replicated: Sequence[str],
    ) -> None:
        self.env = env
        self.tasks = program.tasks
        self.durations_s = durations_s
        self.contended_s = contended_s
        self.replicated = replicated
        self.simulated = set(program.simulated_ranks)
        self.is_compute = [t.stream == "compute" for t in program.tasks]
        self.in_flight: dict[int, list[tuple[float, float]]] = defaultdict(list)
        self.running: dict[int, tuple[float, int]] = {}  # rank -> (planned end, task index)
        self.debt: dict[int, float] = {}

    def sigma(self, index: int) -> float:
        """Extra seconds per second of overlap for compute task ``index``."""
        d, c = self.durations_s[index], self.contended_s[index]
        return c / d - 1.0 if d > 0 and c > d else 0.0

    def members(self, index: int) -> tuple[int, ...]:
        """Simulated ranks communication task ``index`` occupies.

        Its issuer when every member has a copy of the collective (replayed traces), else its
        simulated group members.
        """
        task = self.tasks[index]
        if self.replicated[index]:
            return (task.rank,)
        return tuple(r for r in task.group if r in self.simulated) or (task.rank,)

    def begin(self, index: int, duration: float) -> float:
        """Start task ``index`` now; how long it holds its stream before any later debt."""
        now = self.env.now
        if self.is_compute[index]:
            rank = self.tasks[index].rank
            extra = 0.0
            flights = self.in_flight.get(rank)
            if flights:
                flights = self.in_flight[rank] = [iv for iv in flights if iv[1] > now]
                if flights:
                    sigma = self.sigma(index)
                    if sigma:
                        for _, until in flights:
                            extra += sigma * max(0.0, min(until, now + duration) - now)
            self.running[rank] = (now + duration + extra, index)
            return duration + extra
        for rank in self.members(index):
            self.in_flight[rank].append((now, now + duration))
            running = self.running.get(rank)
            if running is not None:
                planned_end, compute = running
                sigma = self.sigma(compute)
                if sigma:
                    owed = sigma * max(0.0, min(planned_end, now + duration) - now)
                    self.debt[rank] = self.debt.get(rank, 0.0) + owed
        return duration

    def settle(self, index: int) -> float:
        """The slowdown compute task ``index`` still owes (0 once it may end; then it ends)."""
        rank = self.tasks[index].rank
        owed = self.debt.pop(rank, 0.0)
        if owed <= 0:
            del self.running[rank]
        return owed
