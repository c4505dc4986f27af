"""The SimPy core: replay a :class:`~simtrain.parallel.program.Program` and time every task.

One SimPy process runs per (rank, stream). It takes its tasks in program order and, for each,
waits for the task's dependencies (counted down as tasks finish, so a stream only sleeps when
it must), then (for a collective split into one task per member, as in replayed traces) for
every member to arrive, then holds for the task's duration.

The host thread that issues a rank's kernels (:mod:`simtrain.engine.host`) costs no event:
its durations follow from the program, and it only ever waits for tasks its compute stream
waits for too, so the rank's compute stream keeps the host's clock by arithmetic and starts
each task no earlier than the host has issued it. Host tasks become records only when a
timeline reads them (:class:`EngineResult`). A ``host`` stream given by the program itself
(kernel launches of a replayed Kineto trace) runs ahead on a clock of its own, taking an
event only at a synchronisation point. All run state lives in one ``simpy.Environment`` and
the local variables of :func:`execute`, so any number of simulations can run in one process
(sweeps, notebooks).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import simpy

from simtrain.engine.host import HOST_STREAM, HostPlan, HostTimes
from simtrain.errors import EngineDeadlock
from simtrain.parallel.program import Program


class EngineResult:
    """When each task ran.

    Attributes:
        start_s: start time of each task, indexed like ``program.tasks``.
        end_s: end time of each task.
        step_time_s: time at which the last task ended.
        num_events: SimPy events processed: timeouts, wake-ups of streams that waited for a
            dependency, rendezvous gates, and the start and end of every stream process.
        replay_wall_s: host seconds spent in the SimPy run itself.
        program: the program that was replayed, with its host tasks when a host issued it.
        replayed, replayed_start_s, replayed_end_s: the program as given (no host tasks)
            and the times of its tasks.
        host: when each rank's host issued its compute tasks (None without a host).

    Host tasks become records on first use of ``program``, ``start_s`` or ``end_s``: a
    caller that wants the step time, or the breakdown (from ``replayed*`` and
    ``host.intervals()``), never pays for them.
    """

    def __init__(
        self,
        start_s: np.ndarray,
        end_s: np.ndarray,
        step_time_s: float,
        num_events: int,
        replay_wall_s: float,
        program: Program,
        host: HostTimes | None = None,
    ) -> None:
        self.replayed_start_s, self.replayed_end_s, self.replayed = start_s, end_s, program
        self.step_time_s = step_time_s
        self.num_events = num_events
        self.replay_wall_s = replay_wall_s
        self.host = host
        self._issued: tuple[Program, np.ndarray, np.ndarray] | None = None

    @property
    def num_tasks(self) -> int:
        """Tasks replayed, host tasks included."""
        return len(self.replayed.tasks) + (self.host.num_tasks if self.host is not None else 0)

    def _all(self) -> tuple[Program, np.ndarray, np.ndarray]:
        if self.host is None:
            return self.replayed, self.replayed_start_s, self.replayed_end_s
        if self._issued is None:
            self._issued = self.host.issued_program(
                self.replayed, self.replayed_start_s, self.replayed_end_s
            )
        return self._issued

    @property
    def start_s(self) -> np.ndarray:
        """Start time of each task, indexed like ``program.tasks``."""
        return self._all()[1]

    @property
    def end_s(self) -> np.ndarray:
        """End time of each task."""
        return self._all()[2]

    @property
    def program(self) -> Program:
        """The replayed program, host tasks included."""
        return self._all()[0]


def execute(
    program: Program,
    durations_s: Sequence[float],
    contended_s: Sequence[float] | None = None,
    host: HostPlan | None = None,
) -> EngineResult:
    """Run ``program`` with the given per-task durations and return the task times.

    With ``contended_s`` (each compute task's duration while a collective kernel holds part
    of its device), compute that overlaps communication of its rank is slowed: a compute task
    runs ``contended/normal - 1`` longer per second of overlap with the communication tasks
    in flight on its rank, counted once per (compute, communication) pair — at the compute
    task's start for communication already in flight, at the communication's start for
    compute already running (paid when that compute task would have ended).

    With ``host`` (:func:`~simtrain.engine.host.host_plan`), each rank's compute stream
    keeps the clock of the host thread that issues it: before a compute task the host pays
    any carried issue time, waits for the task's synchronisation points (ended by then,
    since the compute task waits for them too), then issues the task, which may not start
    before the host is done. No event is spent on the host.

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
    if host is not None:
        for index, waits in host.waits.items():  # the host's sync points not already deps
            for dep in waits:
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
    host_start = [math.nan] * num_tasks if host is not None else []
    tail_start = [math.nan] * num_tasks if host is not None else []
    issue_s, tail_s, sync_of = (host.issue_s, host.tail_s, host.sync) if host else ([], [], [])

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
        """A host stream given by the program (replayed traces): runs ahead on its clock."""
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
            now = env.now
            if not_before[index] > now:
                holds += 1
                yield timeout(not_before[index] - now)
                now = env.now
            key = keys[index]
            if key:
                arrivals[key] -= 1
                gate = gates[key]
                if arrivals[key] == 0:
                    gate.succeed()
                else:
                    yield gate
                    now = env.now
            start[index] = now
            duration = durations_s[index]
            if contention is not None:
                contention.communicate(index, now, duration)
            if duration > 0:
                yield timeout(duration)
            now = end[index] = env.now
            finished(index, now)

    def compute_process(rank: int, indices: list[int]):
        """A compute stream, issued by its rank's host and slowed by collectives in flight."""
        nonlocal wakes, holds
        timeout = env.timeout
        clock = 0.0  # the host thread's time: it issued everything up to here by then
        for index in indices:
            if pending[index]:
                event = wake[index] = env.event()
                wakes += 1
                yield event
            ready = not_before[index]
            if issue_s:
                tail = tail_s[index]
                if tail > 0:
                    tail_start[index] = clock
                    clock += tail
                for dep in sync_of[index]:
                    if end[dep] > clock:
                        clock = end[dep]
                host_start[index] = clock
                clock += issue_s[index]
                if clock > ready:
                    ready = clock
            now = env.now
            if ready > now:
                holds += 1
                yield timeout(ready - now)
                now = env.now
            key = keys[index]
            if key:
                arrivals[key] -= 1
                gate = gates[key]
                if arrivals[key] == 0:
                    gate.succeed()
                else:
                    yield gate
                    now = env.now
            start[index] = now
            duration = durations_s[index]
            if contention is not None:
                duration = contention.compute(rank, index, now, duration)
            if duration > 0:
                yield timeout(duration)
            if contention is not None:
                owed = contention.settle(rank)
                while owed > 0:  # slowed further by collectives that started meanwhile
                    yield timeout(owed)
                    owed = contention.settle(rank)
            now = end[index] = env.now
            finished(index, now)

    contention = (
        _Contention(program, durations_s, contended_s, keys) if contended_s is not None else None
    )
    for (rank, stream), indices in streams.items():
        if stream == "compute" and (host is not None or contention is not None):
            env.process(compute_process(rank, indices))
        elif stream == HOST_STREAM:
            env.process(host_process(indices))
        else:
            env.process(stream_process(indices))
    began = time.perf_counter()
    env.run()
    replay_wall_s = time.perf_counter() - began
    start_s, end_s = np.array(start), np.array(end)
    timeouts = sum(
        1 for t, d in zip(tasks, durations_s, strict=True) if d > 0 and t.stream != HOST_STREAM
    )
    num_events = timeouts + holds + wakes + len(gates) + 2 * len(streams)
    if contention is not None:
        num_events += contention.owed

    unfinished = np.flatnonzero(np.isnan(end_s))
    if unfinished.size:
        stuck = ", ".join(
            f"rank {tasks[i].rank} {tasks[i].stream} '{tasks[i].label}'" for i in unfinished[:5]
        )
        raise EngineDeadlock(
            f"{unfinished.size} of {num_tasks} tasks never ran; first waiting: {stuck}"
        )
    step = float(end_s.max()) if num_tasks else 0.0
    # Host tasks end before the compute task they issue starts, so they never end the step.
    times = HostTimes(host, host_start, tail_start) if host is not None else None
    return EngineResult(start_s, end_s, step, num_events, replay_wall_s, program, times)


class _Contention:
    """Compute slowed by the collectives in flight on its rank (see :func:`execute`).

    A compute task's slowdown rate and a collective's simulated members are worked out the
    first time they matter (most compute never overlaps a collective).
    """

    def __init__(
        self,
        program: Program,
        durations_s: Sequence[float],
        contended_s: Sequence[float],
        replicated: Sequence[str],
    ) -> None:
        self.tasks = program.tasks
        self.durations_s = durations_s
        self.contended_s = contended_s
        self.replicated = replicated
        self.simulated = set(program.simulated_ranks)
        self.in_flight: dict[int, list[tuple[float, float]]] = defaultdict(list)
        self.running: dict[int, tuple[float, int]] = {}  # rank -> (planned end, task index)
        self.debt: dict[int, float] = {}
        self.owed = 0  # extra timeouts paid for debt
        self._members: dict[tuple[int, ...], tuple[int, ...]] = {}

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
        members = self._members.get(task.group)
        if members is None:
            simulated = self.simulated
            members = self._members[task.group] = tuple(r for r in task.group if r in simulated)
        return members or (task.rank,)

    def compute(self, rank: int, index: int, now: float, duration: float) -> float:
        """Start compute task ``index`` now; how long it holds its stream before any debt."""
        flights = self.in_flight.get(rank)
        if flights:
            flights = self.in_flight[rank] = [iv for iv in flights if iv[1] > now]
            if flights:
                sigma = self.sigma(index)
                if sigma:
                    extra = 0.0
                    for _, until in flights:
                        extra += sigma * max(0.0, min(until, now + duration) - now)
                    self.running[rank] = (now + duration + extra, index)
                    return duration + extra
        self.running[rank] = (now + duration, index)
        return duration

    def communicate(self, index: int, now: float, duration: float) -> None:
        """Start communication task ``index`` now: the compute it overlaps owes more time."""
        for rank in self.members(index):
            self.in_flight[rank].append((now, now + duration))
            running = self.running.get(rank)
            if running is not None:
                planned_end, compute = running
                sigma = self.sigma(compute)
                if sigma:
                    owed = sigma * max(0.0, min(planned_end, now + duration) - now)
                    self.debt[rank] = self.debt.get(rank, 0.0) + owed

    def settle(self, rank: int) -> float:
        """The slowdown the compute task running on ``rank`` still owes (0: it ends now)."""
        owed = self.debt.pop(rank, 0.0)
        if owed > 0:
            self.owed += 1
        else:
            del self.running[rank]
        return owed
