"""The SimPy core: replay a :class:`~simtrain.parallel.program.Program` and time every task.

Each (rank, stream) takes its tasks in program order and, for each, waits for the task's
dependencies (counted down as tasks finish), then (for a collective split into one task per
member, as in replayed traces) for every member to arrive, then holds for the task's
duration. A stream is a small state machine driven by the callbacks of SimPy events
rather than a SimPy process, so no generator is resumed per event: a timeout's callback
ends a task and starts the stream's next one; a stream parked on a dependency is resumed by
a zero-delay timeout scheduled when that dependency ends, behind whatever else is due at
that instant (where a process's wake-up event would be queued), and the members of a
collective by one rendezvous event. Streams thus advance in the same order, and tasks get
the same times, as with one process per stream.

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
from collections.abc import Callable, Sequence

import numpy as np
import simpy

from simtrain.engine.host import HOST_STREAM, HostPlan, HostTimes
from simtrain.errors import EngineDeadlock
from simtrain.parallel.program import Program

Advance = Callable[[simpy.Event | None], None]  # a stream's step, also an event callback
# A stream's step and the function that breaks the reference cycle of its callbacks (each
# refers to itself), so that a run's state is freed as soon as :func:`execute` returns.
Stream = tuple[Advance, Callable[[], None]]


class EngineResult:
    """When each task ran.

    Attributes:
        start_s: start time of each task, indexed like ``program.tasks``.
        end_s: end time of each task.
        step_time_s: time at which the last task ended.
        num_events: SimPy events processed: one timeout per task with a duration, one per
            hold (a task waiting for its host, or for a host task that ran ahead), one per
            wake-up of a stream parked on a dependency, one per collective rendezvous, and
            one per slowdown owed to a collective that started while a compute task ran.
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
    transfer_contended_s: Sequence[float] | None = None,
) -> EngineResult:
    """Run ``program`` with the given per-task durations and return the task times.

    With ``contended_s`` (each compute task's duration while a collective kernel holds part
    of its device), compute that overlaps communication of its rank is slowed: a compute task
    runs ``contended/normal - 1`` longer per second of overlap with the communication tasks
    in flight on its rank, counted once per (compute, communication) pair — at the compute
    task's start for communication already in flight, at the communication's start for
    compute already running (paid when that compute task would have ended).
    ``transfer_contended_s`` (default ``contended_s``) is the same next to a point-to-point
    transfer.

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
    timeout = env.timeout
    start = [math.nan] * num_tasks
    end = [math.nan] * num_tasks

    # Dependencies are counted down as tasks finish; a stream whose next task still waits
    # for one parks until the count reaches zero.
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
        if len(deps) == 1:
            pending[index] = 1
            dependents[deps[0]].append(index)
        elif deps:
            deps = set(deps)
            pending[index] = len(deps)
            for dep in deps:
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
    parked: dict[int, Advance] = {}  # task index -> the stream waiting for it
    wakes = holds = 0
    # A task issued by a host task that ran ahead may not start before that host task ends.
    not_before = [0.0] * num_tasks
    host_start = [math.nan] * num_tasks if host is not None else []
    tail_start = [math.nan] * num_tasks if host is not None else []
    issue_s, tail_s, sync_of = (host.issue_s, host.tail_s, host.sync) if host else ([], [], [])
    contention = (
        _Contention(program, durations_s, contended_s, keys, transfer_contended_s)
        if contended_s is not None
        else None
    )

    def finished(index: int, at: float) -> None:
        nonlocal wakes
        for waiter in dependents.get(index, ()):
            pending[waiter] -= 1
            if at > not_before[waiter]:
                not_before[waiter] = at
            if not pending[waiter]:
                stream = parked.pop(waiter, None)
                if stream is not None:
                    wakes += 1
                    timeout(0).callbacks.append(stream)  # behind what is already due now

    def rendezvous(key: str, stream: Advance) -> bool:
        """Arrive at collective ``key``; True for the last member (the others go with it)."""
        arrivals[key] -= 1
        gate = gates[key]
        if arrivals[key]:
            gate.callbacks.append(stream)
            return False
        gate.succeed()
        return True

    def host_stream(indices: list[int]) -> Stream:
        """A host stream given by the program (replayed traces): runs ahead on its clock."""
        position, count = 0, len(indices)
        clock = 0.0  # the host's own time, at or ahead of the simulation's
        blocked = False  # stopped at the current task (held to its clock, or parked)

        def advance(_: simpy.Event | None = None) -> None:
            nonlocal position, clock, blocked, holds
            while position < count:
                index = indices[position]
                if blocked or pending[index]:
                    now = env.now
                    if not blocked:
                        blocked = True
                        if clock > now:
                            holds += 1
                            timeout(clock - now).callbacks.append(advance)
                            return
                    if pending[index]:
                        parked[index] = advance
                        return
                    blocked = False
                    clock = max(clock, now, not_before[index])
                start[index] = clock
                clock += durations_s[index]
                end[index] = clock
                finished(index, clock)
                position += 1

        def close() -> None:
            nonlocal advance
            del advance

        return advance, close

    def stream(indices: list[int]) -> Stream:
        """A stream that runs its tasks one after another, each when its dependencies end."""
        position, count = 0, len(indices)
        stage = 0  # of the current task: 0 new, 1 may start (held if it had to), 2 met peers

        def advance(_: simpy.Event | None = None) -> None:
            nonlocal position, stage, holds
            now = env.now
            while position < count:
                index = indices[position]
                if not stage:
                    if pending[index]:
                        parked[index] = advance
                        return
                    stage = 1
                    if not_before[index] > now:
                        holds += 1
                        timeout(not_before[index] - now).callbacks.append(advance)
                        return
                if stage == 1 and keys[index]:
                    stage = 2
                    if not rendezvous(keys[index], advance):
                        return
                start[index] = now
                duration = durations_s[index]
                if contention is not None:
                    contention.communicate(index, now, duration)
                if duration > 0:
                    timeout(duration).callbacks.append(done)
                    return
                end[index] = now
                finished(index, now)
                position += 1
                stage = 0

        def done(_: simpy.Event) -> None:
            nonlocal position, stage
            index = indices[position]
            now = end[index] = env.now
            finished(index, now)
            position += 1
            stage = 0
            advance()

        def close() -> None:
            nonlocal advance, done
            del advance, done

        return advance, close

    def compute_stream(rank: int, indices: list[int]) -> Stream:
        """A compute stream, issued by its rank's host and slowed by collectives in flight."""
        position, count = 0, len(indices)
        stage = 0  # as in stream()
        clock = 0.0  # the host thread's time: it issued everything up to here by then

        def advance(_: simpy.Event | None = None) -> None:
            nonlocal position, stage, clock, holds
            now = env.now
            while position < count:
                index = indices[position]
                if not stage:
                    if pending[index]:
                        parked[index] = advance
                        return
                    stage = 1
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
                    if ready > now:
                        holds += 1
                        timeout(ready - now).callbacks.append(advance)
                        return
                if stage == 1 and keys[index]:
                    stage = 2
                    if not rendezvous(keys[index], advance):
                        return
                start[index] = now
                duration = durations_s[index]
                if contention is not None:
                    duration = contention.compute(rank, index, now, duration)
                if duration > 0:
                    timeout(duration).callbacks.append(done)
                    return
                if contention is not None:
                    owed = contention.settle(rank)
                    if owed > 0:
                        timeout(owed).callbacks.append(done)
                        return
                end[index] = now
                finished(index, now)
                position += 1
                stage = 0

        def done(_: simpy.Event) -> None:
            nonlocal position, stage
            if contention is not None:
                owed = contention.settle(rank)
                if owed > 0:  # slowed further by collectives that started meanwhile
                    timeout(owed).callbacks.append(done)
                    return
            index = indices[position]
            now = end[index] = env.now
            finished(index, now)
            position += 1
            stage = 0
            advance()

        def close() -> None:
            nonlocal advance, done
            del advance, done

        return advance, close

    made: list[Stream] = []
    for (rank, name), indices in streams.items():
        if name == "compute" and (host is not None or contention is not None):
            made.append(compute_stream(rank, indices))
        elif name == HOST_STREAM:
            made.append(host_stream(indices))
        else:
            made.append(stream(indices))
    num_gates = len(gates)
    began = time.perf_counter()
    try:
        for advance, _ in made:  # each stream's first tasks, in program order of the streams
            advance()
        env.run()
    finally:  # free the run's state by reference counting, deadlocked or not
        for _, close in made:
            close()
        parked.clear()
        gates.clear()
    replay_wall_s = time.perf_counter() - began
    start_s, end_s = np.array(start), np.array(end)
    durations = np.asarray(durations_s, dtype=float)
    timeouts = int(np.count_nonzero(durations > 0))
    for (_, name), indices in streams.items():
        if name == HOST_STREAM:  # a host stream runs ahead by arithmetic, without timeouts
            timeouts -= int(np.count_nonzero(durations[indices] > 0))
    num_events = timeouts + holds + wakes + num_gates
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
        transfer_contended_s: Sequence[float] | None = None,
    ) -> None:
        self.tasks = program.tasks
        self.durations_s = durations_s
        self.contended_s = contended_s
        self.transfer_contended_s = transfer_contended_s or contended_s
        self.same_for_transfers = self.transfer_contended_s is contended_s
        self.replicated = replicated
        self.simulated = set(program.simulated_ranks)
        # rank -> (start, end, a point-to-point transfer?) of its communication in flight
        self.in_flight: dict[int, list[tuple[float, float, bool]]] = defaultdict(list)
        self.running: dict[int, tuple[float, int]] = {}  # rank -> (planned end, task index)
        self.debt: dict[int, float] = {}
        self.owed = 0  # extra timeouts paid for debt
        self._members: dict[tuple[int, ...], tuple[int, ...]] = {}

    def sigma(self, index: int, transfer: bool = False) -> float:
        """Extra seconds per second of overlap for compute task ``index``.

        Next to a collective, or a point-to-point ``transfer``.
        """
        d = self.durations_s[index]
        c = (self.transfer_contended_s if transfer else self.contended_s)[index]
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
                extra = 0.0
                sigma = self.sigma(index)
                sigma_transfer = sigma if self.same_for_transfers else None
                for _, until, transfer in flights:
                    if transfer and sigma_transfer is None:
                        sigma_transfer = self.sigma(index, transfer=True)
                    rate = sigma_transfer if transfer else sigma
                    if rate:
                        extra += rate * max(0.0, min(until, now + duration) - now)
                if extra:
                    self.running[rank] = (now + duration + extra, index)
                    return duration + extra
        self.running[rank] = (now + duration, index)
        return duration

    def communicate(self, index: int, now: float, duration: float) -> None:
        """Start communication task ``index`` now: the compute it overlaps owes more time."""
        ops = self.tasks[index].ops
        if ops and ops[0].copy_engine:  # holds no SMs
            return
        transfer = bool(ops) and ops[0].kind == "p2p"
        for rank in self.members(index):
            self.in_flight[rank].append((now, now + duration, transfer))
            running = self.running.get(rank)
            if running is not None:
                planned_end, compute = running
                sigma = self.sigma(compute, transfer)
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
