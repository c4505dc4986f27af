"""Paired steps: a forward and a backward run interleaved, timed as the builder interleaves them.

Under the two-microbatch overlap (``parallel.overlap_ep_comm``: DualPipe's overlapped
forward-backward chunks, Megatron-Core's combined 1F1B) the builder emits a forward and the
independent backward after it as two *flows* (``_interleave`` in
:mod:`simtrain.parallel.builder`): each flow runs until its next compute task waits for one
of its collectives, then the other flow's tasks fill the wait. The rank's compute stream runs
the interleaved tasks in that order; each flow keeps its own dependencies:

- the forward's first task waits for its activations, the backward's first task for its
  gradients (each flow also waits for what the previous step left in flight);
- a flow's collectives follow its own last compute task;
- when a flow ends, its transfer is sent (a forward's after its trailing collectives, a
  backward's after its last compute, as for a single action), queued on the rank's
  ``pp_comm`` stream;
- in an eager pipeline the host synchronises on the backward's received gradients at the
  backward's first compute task, and on a sent transfer at the next compute task (of either
  flow), together with the previous compute task, as the engine's host plan does
  (:func:`simtrain.engine.host.host_plan`).

:func:`walk_pair` walks the interleaved segments once with the stream rules of
:func:`~simtrain.estimator.walk.walk`. A time is max-plus linear in two unknowns, the host's
offset ``x`` (when the host starts issuing the step) and ``y`` (when the backward's gradients
arrive), both relative to the step's start: it is kept as ``(a, b, c)`` for ``max(a, x + b,
y + c)``. :func:`chain_steps` chains a schedule whose positions include paired steps
(:mod:`simtrain.estimator.pipeline`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from simtrain.estimator.chunks import _close
from simtrain.estimator.walk import NO_HOST, SegmentTimes, slowdown
from simtrain.parallel.segments import SegmentPlan
from simtrain.workload.ops import Op

Tri = tuple[float, float, float]
"""``(a, b, c)``: the time ``max(a, x + b, y + c)`` (see the module docstring)."""
_NOTHING: Tri = (NO_HOST, NO_HOST, NO_HOST)
_START: Tri = (0.0, NO_HOST, NO_HOST)
_RECEIVED: Tri = (NO_HOST, NO_HOST, 0.0)  # the backward's gradients arrive at y


def _max(p: Tri, q: Tri) -> Tri:
    return (
        p[0] if p[0] >= q[0] else q[0],
        p[1] if p[1] >= q[1] else q[1],
        p[2] if p[2] >= q[2] else q[2],
    )


def _add(p: Tri, seconds: float) -> Tri:
    return (p[0] + seconds, p[1] + seconds, p[2] + seconds)


@dataclass(frozen=True)
class PairTiming:
    """When the parts of a paired step end, relative to its start (``(a, b, c)`` triples).

    Attributes:
        compute_end: end of its last compute task.
        tail_end: end of everything its successor waits for (last compute, collectives of
            either flow still in flight).
        host_end: when the host has issued the whole step.
        backward_end: end of the backward's last compute task.
        sends: per transfer, in the order the flows end: (flow, arrival, whether a compute
            task of the step synchronised on it); flow 0 is the forward, 1 the backward. The
            arrivals take the ``pp_comm`` stream as free at the step's start.
        busy_s: time its compute tasks keep the compute stream busy.
        comm_s: summed collective time by stream.
        layer_end_s: the backward's (layer, ``a`` of the end of its last compute task).
        layer_end_host_s: the ``b`` of those ends.
        layer_end_recv_s: the ``c`` of those ends.
        starts_with_comm: the forward's first task is a collective.
        contended_busy_s: ``busy_s`` if a collective held part of the device throughout.
    """

    compute_end: Tri
    tail_end: Tri
    host_end: Tri
    backward_end: Tri
    sends: tuple[tuple[int, Tri, bool], ...]
    busy_s: float
    comm_s: tuple[tuple[str, float], ...]
    layer_end_s: tuple[tuple[int, float], ...]
    layer_end_host_s: tuple[float, ...]
    layer_end_recv_s: tuple[float, ...]
    starts_with_comm: bool
    contended_busy_s: float

    @property
    def compute_end_s(self) -> float:
        """End of the last compute task when neither the host nor the gradients hold it."""
        return self.compute_end[0]

    @property
    def slowdown(self) -> float:
        """Extra compute seconds per second of overlap with a collective (0: none)."""
        return slowdown(self.busy_s, self.contended_busy_s)

    def at(self, x: float) -> tuple[float, float]:
        """(compute end, tail end) for a host starting at ``x``, gradients already there."""
        (a, b, _), (ta, tb, _) = self.compute_end, self.tail_end
        return max(a, x + b), max(ta, x + tb)


def _blocks(plan: SegmentPlan) -> list[list[int]]:
    """Segment positions of a flow, cut before each compute task that waits for a collective.

    The builder's flow pauses there (``emit_blocks``) and the other flow runs.
    """
    blocks: list[list[int]] = [[]]
    for position, seg in enumerate(plan.segments):
        if not seg.is_comm and seg.waits_for:
            blocks.append([])
        blocks[-1].append(position)
    return [b for b in blocks if b] or [[]]


def interleaved(forward: SegmentPlan, backward: SegmentPlan) -> list[tuple[int, int]]:
    """(flow, segment position) in the builder's program order; position -1: the flow ends.

    The flows take turns block by block, the forward first; once one has ended, the other
    runs to its end.
    """
    cuts = (_blocks(forward), _blocks(backward))
    taken = [0, 0]
    order: list[tuple[int, int]] = []
    current = 0
    while taken[0] < len(cuts[0]) or taken[1] < len(cuts[1]):
        order += [(current, p) for p in cuts[current][taken[current]]]
        taken[current] += 1
        if taken[current] == len(cuts[current]):
            order.append((current, -1))
        other = 1 - current
        if taken[other] < len(cuts[other]):
            current = other
    return order


def walk_pair(
    plans: tuple[SegmentPlan, SegmentPlan],
    times: tuple[SegmentTimes, SegmentTimes],
    comm_s: Callable[[Op], float],
    p2p_s: tuple[float | None, float | None],
    backward_receives: bool,
    eager: bool,
    send_issue_s: float = 0.0,
    order: Sequence[tuple[int, int]] | None = None,
) -> PairTiming:
    """Time a paired step from its start (see the module docstring).

    Args:
        plans: the forward's and the backward's segments.
        times: their compute and host times (:class:`~simtrain.estimator.walk.SegmentTimes`).
        comm_s: seconds of a collective op on this rank's group for the op's axis.
        p2p_s: seconds of each flow's transfer to its peer (None: it sends nothing).
        backward_receives: the backward waits for gradients from the next stage.
        eager: the host synchronises on pipeline transfers (eager pipelines).
        send_issue_s: host seconds to issue a transfer (charged to the compute task it
            follows, as the engine's host plan does).
        order: :func:`interleaved` of the plans, if the caller keeps it.
    """
    host_on = times[0].host_s is not None
    contention = times[0].contended_s is not None
    last_compute = [
        max((p for p, s in enumerate(plan.segments) if not s.is_comm), default=-1) for plan in plans
    ]
    end = _START  # compute stream free
    last = [_START, _START]  # each flow's last compute end
    free: dict[str, Tri] = {}
    comm_total: dict[str, float] = {}
    issued: dict[tuple[int, int], Tri] = {}
    host: Tri = (NO_HOST, 0.0, NO_HOST)
    first = [True, True]
    pending: list[int] = []  # sends the next compute task's host synchronises on
    sends: list[list[Any]] = []
    pp_free: Tri = _NOTHING
    flights: list[tuple[Tri, Tri]] = []
    layer_end: dict[int, Tri] = {}
    busy = contended_total = 0.0
    for flow, position in order if order is not None else interleaved(*plans):
        plan, flow_times = plans[flow], times[flow]
        if position < 0:  # the flow ends: its transfer leaves
            seconds = p2p_s[flow]
            if seconds is None:
                continue
            ready = last[flow]
            if flow == 0:  # a forward's transfer waits for its trailing collectives too
                for p in plan.trailing:
                    ready = _max(ready, issued[(0, p)])
            pp_free = _add(_max(ready, pp_free), seconds)
            sends.append([flow, pp_free, False])
            if eager:
                pending.append(len(sends) - 1)
            continue
        seg = plan.segments[position]
        receives = flow == 1 and first[1] and backward_receives
        first[flow] = False
        if seg.is_comm:
            op = seg.ops[0]
            stream = f"{op.axis}_comm"
            duration = comm_s(op)
            begin = _max(last[flow], free.get(stream, _NOTHING))
            if receives:
                begin = _max(begin, _RECEIVED)
            done = issued[(flow, position)] = free[stream] = _add(begin, duration)
            if contention and duration > 0 and not op.copy_engine:
                flights.append((begin, done))
            comm_total[stream] = comm_total.get(stream, 0.0) + duration
            continue
        sa, sb, sc = end  # the start, as max(sa, x + sb, y + sc) (inlined _max: hot)
        for waited in seg.waits_for:
            wa, wb, wc = issued[(flow, waited)]
            if wa > sa:
                sa = wa
            if wb > sb:
                sb = wb
            if wc > sc:
                sc = wc
        if receives and sc < 0.0:
            sc = 0.0
        if eager and (pending or receives):  # the host syncs: transfers, previous compute
            synced = _max(host, end)
            if receives:
                synced = _max(synced, _RECEIVED)
            for k in pending:
                synced = _max(synced, sends[k][1])
                sends[k][2] = True
            host, pending = synced, []
        duration = flow_times.compute_s[position]
        if host_on:
            h = flow_times.host_s[position]  # type: ignore[index]
            if position == last_compute[flow] and p2p_s[flow] is not None:
                h += send_issue_s  # its transfer's issue too, after the task's ops
            ready = flow_times.ready_s[position]  # type: ignore[index]
            ha, hb, hc = host
            if ha + ready > sa:
                sa = ha + ready
            if hb + ready > sb:
                sb = hb + ready
            if hc + ready > sc:
                sc = hc + ready
            host = (ha + h, hb + h, hc + h)
        busy += duration
        ea = eb = ec = 0.0
        if contention:
            contended = flow_times.contended_s[position]  # type: ignore[index]
            contended_total += contended
            if flights and contended > duration > 0:
                sigma = contended / duration - 1.0
                # compute starts never move back: collectives over by now stay over
                flights = [f for f in flights if _later(f[1], (sa, sb, sc))]
                # per side (a, b, c) the overlap min(f1, stop) - max(f0, start), spelled out
                stop_a, stop_b, stop_c = sa + duration, sb + duration, sc + duration
                on_b, on_c = sb >= NO_HOST / 2, sc >= NO_HOST / 2
                for (f0a, f0b, f0c), (f1a, f1b, f1c) in flights:
                    overlap = (stop_a if stop_a < f1a else f1a) - (f0a if f0a > sa else sa)
                    if overlap > 0:
                        ea += sigma * overlap
                    if on_b:
                        overlap = (stop_b if stop_b < f1b else f1b) - (f0b if f0b > sb else sb)
                        if overlap > 0:
                            eb += sigma * overlap
                    if on_c:
                        overlap = (stop_c if stop_c < f1c else f1c) - (f0c if f0c > sc else sc)
                        if overlap > 0:
                            ec += sigma * overlap
        end = last[flow] = (sa + duration + ea, sb + duration + eb, sc + duration + ec)
        if flow == 1:
            for layer in seg.layers:  # first-appearance order, as the builder's hooks
                layer_end[layer] = end
    tail = end
    for flow, plan in enumerate(plans):
        for p in plan.trailing:
            tail = _max(tail, issued[(flow, p)])
    return PairTiming(
        compute_end=end,
        tail_end=tail,
        host_end=host,
        backward_end=last[1],
        sends=tuple((flow, arrival, synced) for flow, arrival, synced in sends),
        busy_s=busy,
        comm_s=tuple(comm_total.items()),
        layer_end_s=tuple((layer, t[0]) for layer, t in layer_end.items()),
        layer_end_host_s=tuple(t[1] for t in layer_end.values()),
        layer_end_recv_s=tuple(t[2] for t in layer_end.values()),
        starts_with_comm=bool(plans[0].segments) and plans[0].segments[0].is_comm,
        contended_busy_s=contended_total if contention else busy,
    )


def pair_samples(num_layers: int) -> tuple[int, int, int] | None:
    """Layers per chunk of the three samples of a paired step, or None (walk it whole).

    Two layers apart: a forward pauses for its collectives about once per layer and a
    backward about twice, so where the forward's flow ends among the backward's blocks (and
    its transfer leaves) repeats every two layers, not every layer. A chunk of at most 12
    layers is walked whole: its samples would walk as many.

    Examples:
        >>> pair_samples(20), pair_samples(13), pair_samples(12)
        ((2, 4, 6), (1, 3, 5), None)
    """
    if num_layers <= 12:
        return None
    return (2, 4, 6) if num_layers % 2 == 0 else (1, 3, 5)


def extrapolate_pair(samples: Sequence[PairTiming], extra: int) -> PairTiming | None:
    """The timing of a pair whose chunks have ``extra`` more sample steps than the widest.

    ``samples`` are the pair walked on :func:`pair_samples` layers of each chunk; as for a
    single action (:func:`simtrain.estimator.chunks._extrapolate`), the device times (``a``)
    must grow by the same amount per step, and the host's and the gradients' shares are
    extrapolated from their last increment. None when the samples are not linear or their
    transfers differ: then the whole pair is walked. The result has no layer ends: a pair
    whose backward reduces gradients (and so needs them) is walked whole.
    """
    ta, tb, tc = samples
    shape = [tuple((flow, synced) for flow, _, synced in t.sends) for t in samples]
    comm = [dict(t.comm_s) for t in samples]
    if not (
        shape[0] == shape[1] == shape[2] and comm[0].keys() == comm[1].keys() == comm[2].keys()
    ):
        return None
    exact = [
        (ta.compute_end[0], tb.compute_end[0], tc.compute_end[0]),
        (ta.tail_end[0], tb.tail_end[0], tc.tail_end[0]),
        (ta.backward_end[0], tb.backward_end[0], tc.backward_end[0]),
        (ta.busy_s, tb.busy_s, tc.busy_s),
        (ta.contended_busy_s, tb.contended_busy_s, tc.contended_busy_s),
        *((comm[0][k], comm[1][k], comm[2][k]) for k in comm[2]),
        *(
            (a[1][0], b[1][0], c[1][0])
            for a, b, c in zip(ta.sends, tb.sends, tc.sends, strict=True)
        ),
    ]
    if not all(_close(b - a, c - b) for a, b, c in exact):
        return None

    def grow(b: float, c: float) -> float:
        return c + extra * (c - b)

    def grow3(b: Tri, c: Tri) -> Tri:
        return (grow(b[0], c[0]), grow(b[1], c[1]), grow(b[2], c[2]))

    return PairTiming(
        compute_end=grow3(tb.compute_end, tc.compute_end),
        tail_end=grow3(tb.tail_end, tc.tail_end),
        host_end=grow3(tb.host_end, tc.host_end),
        backward_end=grow3(tb.backward_end, tc.backward_end),
        sends=tuple(
            (flow, grow3(b, c), synced)
            for (flow, c, synced), (_, b, _) in zip(tc.sends, tb.sends, strict=True)
        ),
        busy_s=grow(tb.busy_s, tc.busy_s),
        comm_s=tuple((k, grow(comm[1][k], v)) for k, v in comm[2].items()),
        layer_end_s=(),
        layer_end_host_s=(),
        layer_end_recv_s=(),
        starts_with_comm=tc.starts_with_comm,
        contended_busy_s=grow(tb.contended_busy_s, tc.contended_busy_s),
    )


def _later(p: Tri, q: Tri) -> bool:
    return p[0] > q[0] or p[1] > q[1] or p[2] > q[2]


PairRow = tuple[Tri, Tri, Tri, Tri, tuple[tuple[int, Tri, bool], ...], bool, tuple[float, float]]
"""What the chain needs of a step: compute end, tail end, host end, backward end, sends,
starts with a collective, and the transfer seconds of each flow (0: none)."""


def pair_row(timing: PairTiming, p2p_s: tuple[float, float]) -> PairRow:
    """A paired step's row of the chain."""
    return (timing.compute_end, timing.tail_end, timing.host_end, timing.backward_end,
            timing.sends, timing.starts_with_comm, p2p_s)  # fmt: skip


def single_row(row: Sequence[Any], sends_after_tail: bool, sends: bool) -> PairRow:
    """A single action's row (:meth:`Estimator._slot`) in the form of a paired step's."""
    compute_end, tail_end, p2p_s, compute_host, tail_host, host_s, first_comm = row[:7]
    end: Tri = (compute_end, compute_host, NO_HOST)
    tail: Tri = (tail_end, tail_host, NO_HOST)
    out = ((0, _add(tail if sends_after_tail else end, p2p_s), False),) if sends else ()
    return (end, tail, (NO_HOST, host_s, NO_HOST), end, out, first_comm, (p2p_s, 0.0))


def slowed_row(row: PairRow, extra: float) -> PairRow:
    """``row`` with the backward's compute (and what follows it) ``extra`` seconds longer."""
    end, tail, host, backward, sends, first_comm, p2p_s = row
    later = tuple((flow, _add(t, extra) if flow == 1 else t, s) for flow, t, s in sends)
    return (_add(end, extra), _add(tail, extra), host, _add(backward, extra), later,
            first_comm, p2p_s)  # fmt: skip


def _at(t: Tri, start: float, x: float, y: float) -> float:
    """``start + max(a, x + b, y + c)`` of ``t = (a, b, c)``: a time of a step at its start."""
    return start + max(t[0], x + t[1], y + t[2])


def chain_steps(
    shape: Any,
    rows: list[PairRow],
    computes_grads: list[bool],
    num: int,
    sync_on_p2p: bool,
    blocking_sends: bool,
) -> tuple[list[float], list[float], list[float], list[list[tuple[float, ...]]], list[float]]:
    """Chain a schedule with paired steps; returns what :func:`.chain.chain_actions` does.

    Marks carry ``y``.

    Rules as for single actions (:mod:`simtrain.estimator.pipeline`): a step starts once the
    rank's compute stream is free, what its predecessor left in flight has ended and its
    forward's transfer has arrived; the backward's transfer enters as ``y``. Marks are
    (start, backward end, x, y) of the steps computing weight gradients.
    """
    compute_free, hold, pp_free = [0.0] * num, [0.0] * num, [0.0] * num
    host_free = [0.0] * num
    unsynced = [NO_HOST] * num
    arrival = [0.0] * shape.num_transfers
    marks: list[list[tuple[float, ...]]] = [[] for _ in range(num)]
    ranks, slots, recvs, recvs2 = shape.rank, shape.slot, shape.recv, shape.recv2
    sends, sends2 = shape.send, shape.send2
    for i in range(len(ranks)):
        r, k = ranks[i], slots[i]
        compute_end, tail_end, host_end, backward_end, out, first_comm, p2p_s = rows[k]
        start = compute_free[r]
        if hold[r] > start:
            start = hold[r]
        host = host_free[r]
        j = recvs[i]
        if j >= 0 and arrival[j] > start:
            start = arrival[j]
        if sync_on_p2p:
            synced = unsynced[r]
            if j >= 0 and not first_comm and arrival[j] > synced:
                synced = arrival[j]
            if synced > NO_HOST:
                host = max(host, synced, compute_free[r])
                unsynced[r] = NO_HOST
        x = host - start
        j = recvs2[i]
        y = arrival[j] - start if j >= 0 else NO_HOST
        # _at(t, start, x, y) inlined (max spelled out): this runs for every step
        a, b, c = compute_end
        b, c = x + b, y + c
        end = start + (c if c > (b if b > a else a) else (b if b > a else a))
        a, b, c = tail_end
        b, c = x + b, y + c
        compute_free[r] = end
        hold[r] = start + (c if c > (b if b > a else a) else (b if b > a else a))
        a, b, c = host_end
        b, c = x + b, y + c
        host_free[r] = start + (c if c > (b if b > a else a) else (b if b > a else a))
        for flow, ready, synced_inside in out:
            j = sends[i] if flow == 0 else sends2[i]
            a, b, c = ready  # _at(ready, start, x, y), inlined as above
            b, c = x + b, y + c
            t = start + (c if c > (b if b > a else a) else (b if b > a else a))
            queued = pp_free[r] + p2p_s[flow]
            if queued > t:
                t = queued
            pp_free[r] = arrival[j] = t
            if blocking_sends and t > compute_free[r]:
                compute_free[r] = t
            if sync_on_p2p and not synced_inside and t > unsynced[r]:
                unsynced[r] = t
        if computes_grads[k]:
            marks[r].append((start, _at(backward_end, start, x, y), x, y))
    return compute_free, hold, pp_free, marks, host_free
