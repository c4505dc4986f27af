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
until the host has issued enough of it (``readiness``), the issue of the collectives it
produces is charged to it, and the host's unpaid issue time carries to the next task. The
walk starts the host with the action and drops what it still owes at the end, where the
engine carries it into the next action (or pays it at a synchronisation point).

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

from simtrain.engine.host import readiness
from simtrain.parallel.segments import SegmentPlan
from simtrain.workload.ops import Op


@dataclass(frozen=True)
class ActionTiming:
    """When the parts of one action end, relative to its start.

    Attributes:
        compute_end_s: end of its last compute task.
        tail_end_s: end of everything its successor waits for (its last compute task and the
            collectives still in flight at its end).
        busy_s: time its compute tasks keep the compute stream busy.
        comm_s: summed collective time by stream (``tp_comm``, ...); overlaps compute.
        layer_end_s: (layer, end of the last compute task holding that layer), layers in the
            order they first appear; the data-parallel gradient buckets hook onto these (the
            times matter only for a plan cut at layer boundaries).
    """

    compute_end_s: float
    tail_end_s: float
    busy_s: float
    comm_s: tuple[tuple[str, float], ...]
    layer_end_s: tuple[tuple[int, float], ...]


def walk(
    plan: SegmentPlan,
    compute_s: Callable[[tuple[Op, ...]], float],
    comm_s: Callable[[Op], float],
    host_s: Callable[[tuple[Op, ...]], float] | None = None,
    per_collective_s: float = 0.0,
) -> ActionTiming:
    """Time ``plan`` from its start (see the module docstring).

    Args:
        plan: the action's segments.
        compute_s: seconds of a compute task (``ComputeModel.task_time_s``).
        comm_s: seconds of a collective op on this rank's group for the op's axis.
        host_s: host seconds to issue a compute task's ops (``ComputeModel.host_time_s``);
            None walks without a host stream.
        per_collective_s: host seconds to issue one collective, charged to the compute task
            before it.
    """
    compute_end = 0.0
    busy = 0.0
    free: dict[str, float] = {}
    comm_total: dict[str, float] = {}
    issued: dict[int, float] = {}
    layer_end: dict[int, float] = {}
    host_clock = carry = 0.0
    segments = plan.segments
    for position, seg in enumerate(segments):
        if seg.is_comm:
            op = seg.ops[0]
            stream = f"{op.axis}_comm"
            duration = comm_s(op)
            start = max(compute_end, free.get(stream, 0.0))
            issued[position] = free[stream] = start + duration
            comm_total[stream] = comm_total.get(stream, 0.0) + duration
            continue
        start = compute_end
        for waited in seg.waits_for:
            if issued[waited] > start:
                start = issued[waited]
        duration = compute_s(seg.ops)
        if host_s is not None:
            launches = 0
            for later in segments[position + 1 :]:
                if not later.is_comm:
                    break
                launches += 1
            h = host_s(seg.ops) + launches * per_collective_s
            ready = readiness(h, duration, len(seg.ops))
            host_clock += carry + ready
            carry = h - ready
            if host_clock > start:
                start = host_clock
        busy += duration
        compute_end = start + duration
        for layer in seg.layers:  # first-appearance order, as the builder's gradient hooks
            layer_end[layer] = compute_end
    tail = max([compute_end, *(issued[p] for p in plan.trailing)])
    return ActionTiming(
        compute_end_s=compute_end,
        tail_end_s=tail,
        busy_s=busy,
        comm_s=tuple(comm_total.items()),
        layer_end_s=tuple(layer_end.items()),
    )
