"""Time one action's segment plan in isolation: the engine's stream rules, without the engine.

An action (the forward, backward or weight pass of one model chunk for one microbatch) is a
:class:`~simtrain.parallel.segments.SegmentPlan`: compute segments on the rank's ``compute``
stream, collectives on one stream per mesh axis (``tp_comm``, ``cp_comm``, ...). The engine
runs it with these rules (:mod:`simtrain.parallel.builder`, :mod:`simtrain.engine.core`):

- a collective starts once the compute task before it has ended and its stream is free;
- a compute task starts once the one before it has ended and the collectives it waits for
  (``Segment.waits_for``) have ended;
- collectives still in flight at the end (``SegmentPlan.trailing``) hold up the rank's next
  action.

Nothing else on the rank runs on these streams while the action runs (its predecessor's
trailing collectives are waited for before it starts), so walking the segments once with a
clock per stream gives the times the engine gives, relative to the action's start.

The host stream (:mod:`simtrain.engine.host`) is walked beside them: each compute task waits
until the host has issued enough of it (``op_readiness``), the issue of the collectives it
produces is charged to it, and the host's unpaid issue time carries to the next task. Where
the host stands when the action starts depends on the actions before it (the engine lets
the host run ahead of the device, or fall behind it, across actions), so the walk keeps
every time as a function of the host's offset ``x`` (when the host starts issuing the
action, relative to the action's start): each time is ``max(a, x + b)`` (max-plus linear,
since every rule above is a max of sums), ``a`` being the time with a host that is never
late and ``b`` the host's share (:data:`NO_HOST` when the host never holds it up). The
schedule's chain (:mod:`simtrain.estimator.step`) carries the host from action to action.

Compute that overlaps a collective of the action runs slower, as in the engine (``contended_s``
below): the slowdown is priced on both sides of the max (host never late, host setting the
pace), which is exact at either end and an approximation between them.

One approximation: the engine hands what an action waits for (the neighbouring stage's
transfer, its predecessor's trailing collectives) to the action's *first* task. When that
task is a collective whose overlap window covers the compute after it (a ring-attention
block first in a recomputed forward), that compute may start before the transfer arrives;
the walk starts the whole action after it. Steps come out slightly long (at most 0.3 % in
``tests/estimator``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from simtrain.engine.host import IssueProfile, op_readiness, profile_of
from simtrain.parallel.segments import SegmentPlan
from simtrain.workload.ops import Op

NO_HOST = -1e30
"""The host share ``b`` of a time the host never holds up (``x + b`` never wins the max)."""


def slowdown(busy_s: float, contended_busy_s: float) -> float:
    """Extra compute seconds per second of overlap with a collective (0: none).

    From the compute's seconds alone and next to a collective.
    """
    if busy_s <= 0 or contended_busy_s <= busy_s:
        return 0.0
    return contended_busy_s / busy_s - 1.0


class ActionTiming(NamedTuple):
    """When the parts of one action end, relative to its start.

    A named tuple rather than a dataclass: a search makes hundreds of thousands (every
    walk and extrapolation), and a tuple is built without a Python-level ``__init__``.

    Attributes:
        compute_end_s: end of its last compute task.
        tail_end_s: end of everything its successor waits for (its last compute task and the
            collectives still in flight at its end).
        busy_s: time its compute tasks keep the compute stream busy.
        comm_s: summed collective time by stream (``tp_comm``, ...); overlaps compute.
        layer_end_s: (layer, end of the last compute task holding that layer), layers in the
            order they first appear; the data-parallel gradient buckets hook onto these (the
            times matter only for a plan cut at layer boundaries).
        compute_end_host_s, tail_end_host_s, layer_end_host_s: the host's share ``b`` of
            those times (each is ``max(a, x + b)`` for a host starting at ``x``; the fields
            above are the ``a``), :data:`NO_HOST` where the host never holds them up.
        host_s: host seconds to issue the whole action (its collectives' issue included).
        starts_with_comm: its first task is a collective (what the action waits for is
            handed to that collective, not to a compute task the host would sync on).
        contended_busy_s: what ``busy_s`` would be if a collective held part of the device
            throughout (the interference of collectives outside the action is priced from
            it: :meth:`slowdown`).
        trailing_s: (start, end) of its gradient buckets still in flight when its last
            compute task ends, relative to that end (walked with ``buckets``).
    """

    compute_end_s: float
    tail_end_s: float
    busy_s: float
    comm_s: tuple[tuple[str, float], ...]
    layer_end_s: tuple[tuple[int, float], ...]
    compute_end_host_s: float = -1e30
    tail_end_host_s: float = -1e30
    layer_end_host_s: tuple[float, ...] = ()
    host_s: float = 0.0
    starts_with_comm: bool = False
    contended_busy_s: float = 0.0
    trailing_s: tuple[tuple[float, float], ...] = ()

    @property
    def slowdown(self) -> float:
        """Extra compute seconds per second of overlap with a collective (0: none)."""
        return slowdown(self.busy_s, self.contended_busy_s)

    def at(self, x: float) -> tuple[float, float]:
        """(compute end, tail end) when the host starts issuing the action at ``x``."""
        return max(self.compute_end_s, x + self.compute_end_host_s), max(
            self.tail_end_s, x + self.tail_end_host_s
        )


@dataclass(frozen=True)
class SegmentTimes:
    """What walking one plan needs from a compute model, per segment (collectives: 0).

    Looked up once per plan and compute model (:meth:`of`) and scaled once per pace
    (:meth:`at_pace`), so that the walks of a plan under many collective timings (layouts
    of a search) index tuples instead of calling the model or multiplying per task.

    Attributes:
        compute_s: seconds of each compute task (``ComputeModel.task_time_s``), at the
            step's pace.
        host_s: host seconds to issue each compute task's ops and the collectives right
            after it (``host_time_s`` plus ``per_collective_s`` per collective); None
            walks without a host stream. Host times are not paced.
        contended_s: seconds of each compute task while a collective holds part of the
            device (``task_time_s(ops, contended=True)``), at the step's pace; None: no
            interference.
        profiles: with a host stream, how the issue and the device work of each compute
            task advance op by op (:func:`~simtrain.engine.host.issue_profile`; None for
            collectives).
        ready_s: per compute task, the host seconds it waits for before it can start
            (:func:`~simtrain.engine.host.op_readiness` of its profile and paced device
            time), set by :meth:`at_pace` (a walk with a host stream needs it).
    """

    compute_s: tuple[float, ...]
    host_s: tuple[float, ...] | None = None
    contended_s: tuple[float, ...] | None = None
    profiles: tuple[IssueProfile | None, ...] = ()
    ready_s: tuple[float, ...] | None = None

    @classmethod
    def of(
        cls,
        plan: SegmentPlan,
        compute_s: Callable[[tuple[Op, ...]], float],
        issue: Callable[[tuple[Op, ...]], IssueProfile] | None = None,
        per_collective_s: float = 0.0,
        contended_s: Callable[[tuple[Op, ...]], float] | None = None,
    ) -> SegmentTimes:
        """The times of ``plan``'s segments (see :func:`walk` for the arguments), unpaced.

        ``issue``: with a host stream, the issue profile of a task's ops
        (:func:`~simtrain.engine.host.issue_profile`). Walk these times :meth:`at_pace`
        (which works out the host's readiness).
        """
        segments = plan.segments
        compute, host, contended, profiles = [], [], [], []
        for position, seg in enumerate(segments):
            if seg.is_comm:
                compute.append(0.0)
                host.append(0.0)
                contended.append(0.0)
                profiles.append(None)
                continue
            compute.append(compute_s(seg.ops))
            if issue is not None:
                profile = issue(seg.ops)
                launches, later = 0, position + 1
                while later < len(segments) and segments[later].is_comm:
                    launches, later = launches + 1, later + 1
                host.append((profile[0][-1] if seg.ops else 0.0) + launches * per_collective_s)
                profiles.append(profile)
            if contended_s is not None:
                contended.append(contended_s(seg.ops))
        return cls(
            tuple(compute),
            None if issue is None else tuple(host),
            None if contended_s is None else tuple(contended),
            tuple(profiles) if issue is not None else (),
        )

    def at_pace(self, pace: float) -> SegmentTimes:
        """These times with the device's multiplied by ``pace`` (the host's are not paced).

        The host's readiness before each task depends on the task's paced duration, so it
        is worked out here, once per plan and pace, rather than in every walk (which needs
        it: times from :meth:`of` are walked at a pace, 1.0 for none).
        """
        compute = tuple([seconds * pace for seconds in self.compute_s])
        contended = self.contended_s
        if contended is not None:
            contended = tuple([seconds * pace for seconds in contended])
        ready = None
        if self.host_s is not None:  # 0 for a collective (no host or device time of its own)
            ready = tuple(
                [
                    0.0 if profile is None else op_readiness(profile, d)
                    for profile, d in zip(self.profiles, compute, strict=True)
                ]
            )
        return SegmentTimes(compute, self.host_s, contended, self.profiles, ready)


class OpTimes:
    """A compute model's times of single ops, worked out once per op object.

    A search's plans share their ops (each layer's are built once, and the samples and
    whole chunks of one source reuse them), and the model times a task as the sum of its
    ops' times (``ComputeModel.task_time_s``, ``host_time_s``). Summing these per-op times
    in the task's order gives the model's floats without building each op's shape key
    again for every task holding it (:meth:`SegmentTimes.of` asks for every task).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._ops: dict[int, tuple[Op, float, float, float]] = {}

    def _of(self, op: Op) -> tuple[Op, float, float, float]:
        """(op, device, contended device, host seconds) of one op, cached by identity."""
        found = self._ops.get(id(op))
        if found is None or found[0] is not op:  # the op is kept: its id stays its own
            one, model = (op,), self.model
            found = self._ops[id(op)] = (
                op,
                model.task_time_s(one),
                model.task_time_s(one, contended=True),
                model.host_time_s(one),
            )
        return found

    def _sum(self, ops: tuple[Op, ...], which: int) -> float:
        """The sum of field ``which`` of the ops' :meth:`_of`, in their order (as ``sum``)."""
        known = self._ops
        total = 0.0
        for op in ops:
            found = known.get(id(op))
            if found is None or found[0] is not op:
                found = self._of(op)
            total += found[which]
        return total

    def device_s(self, ops: tuple[Op, ...]) -> float:
        """``model.task_time_s(ops)``."""
        return self._sum(ops, 1)

    def contended_s(self, ops: tuple[Op, ...]) -> float:
        """``model.task_time_s(ops, contended=True)``."""
        return self._sum(ops, 2)

    def host_s(self, ops: tuple[Op, ...]) -> float:
        """``model.host_time_s(ops)``."""
        return self._sum(ops, 3)

    def profile(self, ops: tuple[Op, ...]) -> IssueProfile:
        """``issue_profile(ops, model)``, from the cached per-op times (the same floats)."""
        return profile_of([(found[1], found[3]) for found in map(self._of, ops)])


_IDLE = (0.0, NO_HOST)
"""A stream that has run nothing yet: free from the start."""


def _owed(
    flights: list[tuple[float, float, float, float]],
    start_a: float,
    stop_a: float,
    start_b: float,
    stop_b: float,
    sigma: float,
) -> tuple[float, float]:
    """Extra seconds a compute task owes ``flights``: (host never late, host setting the pace).

    The ``b`` side (the host setting the pace) owes nothing while ``start_b`` is
    :data:`NO_HOST`. The task runs from ``start`` to ``stop`` on each side. The engine's rule: the
    collectives in flight when it starts slow it over its own duration; one that starts
    while it runs slows it over the rest of its planned run (its duration and what it owed
    at its start). A collective starting at the same instant starts after it (the engine
    starts a stream's next task before the tasks woken by the same end). Both sides in one
    pass over the flights, each summed in flight order; ``min`` spelled out (``b if b < a
    else a``): this runs for every compute task that overlaps a collective.
    """
    on_b = start_b > NO_HOST / 2
    owed_a = owed_b = 0.0
    for begin_a, end_a, begin_b, end_b in flights:
        if begin_a < start_a:
            overlap = (stop_a if stop_a < end_a else end_a) - start_a
            if overlap > 0:
                owed_a += sigma * overlap
        if on_b and begin_b < start_b:
            overlap = (stop_b if stop_b < end_b else end_b) - start_b
            if overlap > 0:
                owed_b += sigma * overlap
    planned_a, planned_b = stop_a + owed_a, stop_b + owed_b
    for begin_a, end_a, begin_b, end_b in flights:
        if begin_a >= start_a:
            overlap = (planned_a if planned_a < end_a else end_a) - begin_a
            if overlap > 0:
                owed_a += sigma * overlap
        if on_b and begin_b >= start_b:
            overlap = (planned_b if planned_b < end_b else end_b) - begin_b
            if overlap > 0:
                owed_b += sigma * overlap
    return owed_a, owed_b


def walk(
    plan: SegmentPlan,
    times: SegmentTimes,
    comm_s: Callable[[Op], float],
    buckets: tuple[tuple[int, float], ...] = (),
    incoming: tuple[tuple[float, float], ...] = (),
    bucket_stream: str | None = None,
) -> ActionTiming:
    """Time ``plan`` from its start (see the module docstring).

    Args:
        plan: the action's segments.
        times: seconds of its compute tasks on the rank's device and host
            (:class:`SegmentTimes`, at the step's pace: :meth:`SegmentTimes.at_pace`). The
            host issues each task's ops and, charged to the task before them, its
            collectives. As in the engine, a compute task runs ``contended/normal - 1``
            longer per second of overlap with each collective in flight (a collective of
            the action overlaps only the compute tasks after the one that issues it).
        comm_s: seconds of a collective op on this rank's group for the op's axis.
        buckets: (layer, seconds) of the gradient buckets the action issues, in order: each
            goes on the gradient stream once the last compute task holding its layer has
            ended, and slows the compute after it like a collective of the plan (the
            buckets' own times are not part of the result's ``comm_s``).
        incoming: (start, end) of collectives in flight when the action starts (the
            buckets its predecessor left on the gradient stream): they slow its compute
            like its own.
        bucket_stream: the stream of the plan's collectives the buckets queue on, in issue
            order (the shard group's one communicator: its parameter gathers wait for the
            buckets issued before them, and for ``incoming``); None: a stream of their own.
    """
    end_a, end_b = 0.0, NO_HOST  # compute stream free: max(end_a, x + end_b)
    busy = 0.0
    free: dict[str, tuple[float, float]] = {}
    comm_total: dict[str, float] = {}
    issued: dict[int, tuple[float, float]] = {}
    layer_end: dict[int, tuple[float, float]] = {}
    host_clock = 0.0  # issue time of the tasks before this one, from the host's start
    flights: list[tuple[float, float, float, float]] = []  # collectives: (start, end) a and b
    contended_total = 0.0
    compute_s, host_s, contended_s = times.compute_s, times.host_s, times.contended_s
    ready_s = times.ready_s
    contention = contended_s is not None
    segments = plan.segments
    streams = plan.streams
    issues: dict[int, list[float]] = {}  # compute position -> buckets issued at its end
    grad_a, grad_b = 0.0, NO_HOST  # the gradient stream free
    grad_flights: list[tuple[float, float]] = []
    if contention:
        flights.extend((begin, end, begin, end) for begin, end in incoming)
    if bucket_stream is not None and incoming:
        free[bucket_stream] = (max(end for _, end in incoming), NO_HOST)
    if buckets and (contention or bucket_stream is not None):
        last = {layer: p for p, seg in enumerate(segments) for layer in seg.layers}
        for layer, seconds in buckets:
            if seconds > 0:
                issues.setdefault(last[layer], []).append(seconds)
    # max() and min() are spelled out in this loop (it runs for every task of every walk):
    # ``b if b > a else a`` is max(a, b), ``b if b < a else a`` is min(a, b)
    for position, seg in enumerate(segments):
        stream = streams[position]
        if stream:  # a collective
            op = seg.ops[0]
            duration = comm_s(op)
            fa, fb = free.get(stream, _IDLE)
            begin_a = fa if fa > end_a else end_a
            begin_b = fb if fb > end_b else end_b
            done = (begin_a + duration, begin_b + duration)
            issued[position] = free[stream] = done
            if contention and duration > 0 and not op.copy_engine:
                flights.append((begin_a, done[0], begin_b, done[1]))
            comm_total[stream] = comm_total.get(stream, 0.0) + duration
            continue
        start_a, start_b = end_a, end_b
        for waited in seg.waits_for:
            wa, wb = issued[waited]
            if wa > start_a:
                start_a = wa
            if wb > start_b:
                start_b = wb
        duration = compute_s[position]
        if host_s is not None:
            ready = host_clock + ready_s[position]  # type: ignore[index]
            if ready > start_b:
                start_b = ready
            host_clock += host_s[position]
        busy += duration
        end_a, end_b = start_a + duration, start_b + duration
        if flights:
            contended = contended_s[position]  # type: ignore[index]
            contended_total += contended
            if contended > duration > 0:
                sigma = contended / duration - 1.0
                # the overlap when the host is never late (a), and when it sets the pace (b)
                # compute starts never move back: collectives over by now stay over
                flights = [f for f in flights if f[1] > start_a or f[3] > start_b]
                if flights:  # else nothing is owed
                    owed_a, owed_b = _owed(flights, start_a, end_a, start_b, end_b, sigma)
                    end_a += owed_a
                    if start_b > NO_HOST / 2:
                        end_b += owed_b
        elif contention:
            contended_total += contended_s[position]  # type: ignore[index]
        if seg.layers:
            ends = (end_a, end_b)
            for layer in seg.layers:  # first-appearance order, as the builder's gradient hooks
                layer_end[layer] = ends
        if issues and position in issues:
            for seconds in issues[position]:
                if bucket_stream is not None:
                    grad_a, grad_b = free.get(bucket_stream, _IDLE)
                begin_a, begin_b = max(end_a, grad_a), max(end_b, grad_b)
                grad_a, grad_b = begin_a + seconds, begin_b + seconds
                if bucket_stream is not None:
                    free[bucket_stream] = (grad_a, grad_b)
                if contention:
                    flights.append((begin_a, grad_a, begin_b, grad_b))
                grad_flights.append((begin_a, grad_a))
    tail_a, tail_b = end_a, end_b
    for p in plan.trailing:
        tail_a, tail_b = max(tail_a, issued[p][0]), max(tail_b, issued[p][1])
    return ActionTiming(
        compute_end_s=end_a,
        tail_end_s=tail_a,
        busy_s=busy,
        comm_s=tuple(comm_total.items()),
        layer_end_s=tuple((layer, a) for layer, (a, _) in layer_end.items()),
        compute_end_host_s=end_b,
        tail_end_host_s=tail_b,
        layer_end_host_s=tuple(b for _, b in layer_end.values()),
        host_s=host_clock,
        starts_with_comm=bool(segments) and segments[0].is_comm,
        contended_busy_s=contended_total if contended_s is not None else busy,
        trailing_s=tuple(
            (max(0.0, begin - end_a), end - end_a) for begin, end in grad_flights if end > end_a
        ),
    )
