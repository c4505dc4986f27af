"""The analytical step-time estimate: the engine's program, combined in closed form.

:class:`Estimator` times a training step from the same pieces the discrete-event engine
replays, without building the program or running SimPy:

- the ops of each model chunk come from :func:`simtrain.parallel.builder.chunk_ops` and are
  cut into tasks by :func:`simtrain.parallel.segments.segment_ops`, as the builder does; a
  chunk is sampled on a few layers and extrapolated (:mod:`simtrain.estimator.chunks`);
- compute tasks are timed by the experiment's compute model (``ComputeModel.task_time_s``),
  collectives and transfers by its network model (``collective_time_s``, ``p2p_time_s``),
  both obtained as :func:`simtrain.api.simulate` obtains them;
- each action is walked on its streams (:mod:`simtrain.estimator.walk`), the schedule's
  actions are chained along their dependencies (:mod:`simtrain.estimator.pipeline`), the
  data-parallel gradient buckets are issued at the layer ends the builder hooks them to, and
  the optimizer step and the ZeRO parameter all-gather close the step.

Its step time agrees with :func:`simtrain.api.simulate` (``tests/estimator`` checks the
validation suites and random sweep configurations); that test is the guard when the engine
learns new mechanisms. An Estimator keeps caches (compute and network models, chunk ops,
compiled schedules, timings) across calls, so a search evaluates thousands of configurations
per second; make one per search and reuse it.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any

from simtrain.catalog.frameworks import get_framework
from simtrain.engine.host import collective_issue_s, readiness
from simtrain.engine.variability import median_slowest_factor
from simtrain.errors import SpecError
from simtrain.estimator.chunks import BODIES, SAMPLE_LAYERS, Chunk, ChunkSource, chunk_base
from simtrain.estimator.pairs import (
    PairTiming,
    chain_steps,
    extrapolate_pair,
    interleaved,
    pair_row,
    pair_samples,
    single_row,
    slowed_row,
    walk_pair,
)
from simtrain.estimator.pipeline import PairSlot, ScheduleShape, Slot, schedule_shape
from simtrain.estimator.walk import NO_HOST, ActionTiming, SegmentTimes, walk
from simtrain.parallel.builder import (
    EP_HOPS,
    SHARD_AXIS,
    LayerCache,
    ep_hop_group,
    make_shard,
    p2p_op,
    shard_groups,
)
from simtrain.parallel.layout import RankLayout
from simtrain.parallel.segments import SegmentPlan
from simtrain.parallel.stages import chunk_layers
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.framework import GRAD_REDUCE_BYTES
from simtrain.specs.framework_resolve import effective_zero_stage
from simtrain.workload.linear import weight_cast_op
from simtrain.workload.ops import Op
from simtrain.workload.optimizers import optimizer_op
from simtrain.workload.primitives import ACT_BYTES

_SCHEDULING_FIELDS = frozenset(
    {
        "pp",
        "vpp",
        "pipeline_schedule",
        "global_batch_size",
        "dp",
        "rank_order",
        "zero_stage",
        "zero_shard_group_size",
        "overlap_grad_reduce",
        "overlap_replica_grad_reduce",
        "grad_bucket_size_bytes",
    }
)
"""Parallel fields that change how chunks are scheduled, placed or reduced, not their ops
(ZeRO-3 parameter gathers do change the ops: :meth:`Estimator._ops_key` keeps a flag)."""


@dataclass(frozen=True)
class StepEstimate:
    """The analytical estimate of one training step.

    Attributes:
        step_time_s: time from the first action's start to the end of the last task.
        compute_s: compute-stream busy time, mean over pipeline ranks.
        exposed_comm_s: compute-stream idle time waiting on collectives inside actions and on
            the gradient reduction and parameter gather around the optimizer, mean over
            pipeline ranks.
        bubble_s: the rest of the step: waiting for other pipeline stages.
        num_actions: schedule actions chained (the estimate's work).
        wall_time_s: host seconds spent on this estimate.
    """

    step_time_s: float
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    num_actions: int
    wall_time_s: float = 0.0

    @property
    def bubble_fraction(self) -> float:
        """Bubble as a fraction of the step."""
        return self.bubble_s / self.step_time_s if self.step_time_s > 0 else 0.0


Flush = tuple[float | None, float, float, float, float, float]
"""One gradient bucket: (offset of the layer that fills it from its action's start, or None
for a flush at the action's end; the host's share of that offset (``max(a, x + b)``, see
:mod:`simtrain.estimator.walk`); the received gradients' share (``y + c`` in a paired step,
:mod:`simtrain.estimator.pairs`; ``NO_HOST`` otherwise); seconds on the gradient stream;
seconds of the cross-group all-reduce when it runs on a stream of its own, else 0; whether
it issues anything (1/0))."""

FORWARDS = frozenset({"forward", "first_forward"})
"""Bodies of a forward action (its transfer leaves after its trailing collectives)."""

Mark = tuple[float, ...]
"""(start, end, host offset, received gradients' offset) of an action (or paired step) that
computes weight gradients (end: of its backward)."""


@dataclass(frozen=True)
class _Gradients:
    """One rank's gradient reduction, optimizer step and parameter gather (internal).

    The buckets are fixed by sizes alone; :meth:`finish` places them in time, as the
    builder's ``_GradientReducer`` issues them on the rank's gradient streams.

    Attributes:
        actions: per action that reduces gradients (``positions``), its buckets.
        tail: the last bucket, issued after the rank's last compute.
        optimizer_s: seconds of the optimizer step (with the FP8 weight cast).
        gather_s: seconds of the parameter all-gather after it (0: none).
        optimizer_host_s: host seconds before the optimizer can start once the host reaches
            it (``readiness`` of its issue time; 0 without a host stream).
        slowdowns: per reducing action, its compute's slowdown under a collective
            (interference; empty: none).
        inside: per reducing action, the compute seconds its own buckets add to it while it runs
            (their overlap with its compute, the gradient stream taken free at its start, and
            the gathers they hold up on a shared communicator); :meth:`finish` prices the
            rest of their flight (empty: none).
        inside_host: the same for the host's share of its end (a host setting the pace
            hides part of it; empty: none).
        positions: the reducing actions' positions among the rank's actions that compute
            weight gradients (in program order: the positions of their marks).
        trailing: per reducing action, the compute seconds its buckets still in flight at
            its end add to the rank's next action (walked: ``Estimator._trailing``; the
            chain holds that action back by as much); -1 where :meth:`finish` prices them
            (empty: everywhere).
    """

    actions: tuple[tuple[Flush, ...], ...]
    tail: Flush
    optimizer_s: float
    gather_s: float
    optimizer_host_s: float = 0.0
    slowdowns: tuple[float, ...] = ()
    inside: tuple[float, ...] = ()
    inside_host: tuple[float, ...] = ()
    positions: tuple[int, ...] = ()
    trailing: tuple[float, ...] = ()

    def finish(
        self,
        marks: list[Mark],
        compute_free: float,
        hold: float,
        pp_free: float,
        host_free: float = NO_HOST,
    ) -> tuple[float, float, float]:
        """(end of the rank's step, optimizer busy time, time waited) given its timeline.

        ``marks`` holds the (start, end, host offset) of each action computing weight
        gradients; ``host_free`` is when the rank's host has issued everything before the
        optimizer. The host syncs on the gradient reduction before issuing the optimizer
        (gradient-norm and overflow checks read reduced values), as the engine's host does.

        A bucket in flight slows the rank's compute (the engine's interference): by the
        slowdown of the action that issues it, over its overlap with the rank's compute,
        taken to run without a gap from the bucket's start to the rank's last compute.
        """
        grad_free = replica_free = reduced = 0.0
        issued = False
        slowed = 0.0  # compute seconds added by the buckets' interference

        def flush(
            bucket: Flush, after: float, last_compute: float, sigma: float, walked: bool = False
        ) -> None:
            nonlocal grad_free, replica_free, reduced, issued, slowed
            _, _, _, grad_s, replica_s, issues = bucket
            if not issues:
                return
            end = after
            if grad_s:
                begin = max(after, grad_free, last_compute)  # its own action: priced inside
                end = grad_free = max(after, grad_free) + grad_s
                if sigma and not walked and compute_free > begin < end:
                    slowed += sigma * (min(end, compute_free) - begin)
            if replica_s:  # not overlapped: after the backward, on a stream of its own
                begin = max(end, last_compute, replica_free)
                end = replica_free = begin + replica_s
                if sigma and compute_free > begin:
                    slowed += sigma * (min(end, compute_free) - begin)
            reduced, issued = max(reduced, end), True

        slowdowns, trailing = self.slowdowns, self.trailing
        for n, i in enumerate(self.positions):
            start, end, x, y = marks[i]
            sigma = slowdowns[n] if slowdowns else 0.0
            walked = bool(trailing) and trailing[n] >= 0  # priced in the chain
            for bucket in self.actions[n]:
                offset, host, received = bucket[0], bucket[1], bucket[2]
                if offset is not None:
                    offset = max(offset, x + host, y + received)
                flush(bucket, end if offset is None else start + offset, end, sigma, walked)
        flush(self.tail, compute_free, compute_free, 0.0)
        compute_free += slowed
        ready = max(compute_free, hold)
        begin = max(ready, reduced) if issued else ready
        if self.optimizer_host_s:
            # synced on the reduction (and the device) when there is one to wait for
            host = max(host_free, reduced, compute_free) if issued else host_free
            begin = max(begin, host + self.optimizer_host_s)
        end = begin + self.optimizer_s
        waited = begin - ready
        last = max(end, pp_free)
        if self.gather_s:
            gather = max(end, grad_free) + self.gather_s
            waited += max(0.0, gather - last)
            last = max(last, gather)
        return last, self.optimizer_s, waited


@dataclass
class _Context:
    """Caches shared by configurations with equal chunks, models, placement and hooks.

    Attributes:
        chunks: the model chunks.
        slots: slot -> (compute end, tail end, transfer time, timing) of its actions.
        grads: (rank's owning slots, ZeRO stage, bucket bytes) -> its gradient reduction.
        signatures: (rank, chunk) -> (models key, groups by axis) of the chunk on the rank.
    """

    chunks: list[Chunk]
    slots: dict[Slot, tuple[float, float, float, ActionTiming]] = field(default_factory=dict)
    grads: dict[tuple[Any, ...], _Gradients] = field(default_factory=dict)
    signatures: dict[tuple[int, int], Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Paced:
    """A compute model whose device times run at a step's pace (the slowest rank's factor).

    The engine multiplies every compute task of a rank by that rank's speed factor, and the
    ranks of a step wait for the slowest at every collective; the estimator uses the median
    factor of the slowest rank of the world (:func:`median_slowest_factor`). Host issue
    times are not paced, as in the engine.
    """

    model: Any
    pace: float

    def task_time_s(self, ops: Any, contended: bool = False) -> float:
        return self.model.task_time_s(ops, contended=contended) * self.pace

    def host_time_s(self, ops: Any) -> float:
        return self.model.host_time_s(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@dataclass
class _Setup:
    """Everything one estimate needs besides the compiled schedule (internal)."""

    spec: ExperimentSpec
    compute: Any
    network: Any
    layout: RankLayout
    ranks: list[int]
    dp_axis: str
    hooks: list[bool]
    p2p_bytes: float
    context: _Context
    zero_stage: int
    profile: Any
    fp8_recipe: str
    host: bool = False
    sync_on_p2p: bool = False
    per_collective_s: float = 0.0
    contended: bool = False
    blocking_sends: bool = False

    @property
    def every_mb(self) -> bool:
        """The stack reduces sharded gradients after every microbatch's backward."""
        return self.zero_stage >= 2 and self.profile.sharding.reduce_every_microbatch

    @property
    def bucket_stream(self) -> str | None:
        """The stream the gradient buckets share with the backward's parameter gathers.

        ZeRO-3 reduce-scatters and gathers over the shard group's one communicator unless
        the stack gives the reduce-scatters a group of their own (as the builder's reducer);
        None: the buckets' stream holds nothing else of the action.
        """
        if self.zero_stage == 3 and not self.profile.sharding.separate_reduce_scatter_group:
            return f"{SHARD_AXIS}_comm"
        return None

    @property
    def grad_key(self) -> tuple[Any, ...]:
        """What a rank's gradient reduction depends on besides its actions and context."""
        p = self.spec.parallel
        return (self.zero_stage, p.grad_bucket_size_bytes, p.overlap_replica_grad_reduce,
                self.spec.training.grad_reduce_dtype, self.bucket_stream)  # fmt: skip


def _chain_actions(
    shape: ScheduleShape,
    table: list[tuple[Any, ...]],
    num: int,
    sync_on_p2p: bool,
    blocking_sends: bool,
) -> tuple[list[float], list[float], list[float], list[list[Mark]], list[float]]:
    """Chain a compiled schedule's actions (see :mod:`simtrain.estimator.pipeline`).

    Returns, per rank, when its compute stream frees, when its last action's trailing
    collectives end, when its transfers end, the start, end and host offset of each of its
    actions that compute weight gradients, and when its host has issued everything. It
    depends only on the schedule, the slots' times, ``sync_on_p2p`` and ``blocking_sends``, so
    configurations that share them share it. With ``blocking_sends`` (pipeline transfers not
    overlapped, ``parallel.overlap_p2p_comm`` off) a rank's next action waits for its send to
    end, as the engine's does.

    The host stream runs ahead of the device from action to action (or falls behind it) as
    the engine's does (:mod:`simtrain.engine.host`): an action's host starts where the
    previous action's left off, except that with ``sync_on_p2p`` (eager pipelines) the host
    first waits for the device, the transfer the action receives and the transfers the rank
    sent since its previous compute.
    """
    compute_free, hold, pp_free = [0.0] * num, [0.0] * num, [0.0] * num
    host_free = [0.0] * num
    unsynced = [NO_HOST] * num  # end of the transfers sent since the rank's last compute
    arrival = [0.0] * shape.num_transfers
    marks: list[list[Mark]] = [[] for _ in range(num)]
    ranks, slots, recvs, sends, tails = (
        shape.rank, shape.slot, shape.recv, shape.send, shape.send_after_tail
    )  # fmt: skip
    computing = [s.computes_grads for s in shape.slots]
    rows = [row[:7] for row in table]
    for r, k, j, out, after_tail in zip(ranks, slots, recvs, sends, tails, strict=True):
        compute_end, tail_end, p2p_s, compute_host, tail_host, host_s, first_comm = rows[k]
        start = compute_free[r]
        if hold[r] > start:
            start = hold[r]
        host = host_free[r]
        if j >= 0 and arrival[j] > start:
            start = arrival[j]
        if sync_on_p2p:
            synced = unsynced[r]
            if j >= 0 and not first_comm and arrival[j] > synced:
                synced = arrival[j]
            if synced > NO_HOST:  # the host waits for the device and the transfers
                host = max(host, synced, compute_free[r])
                unsynced[r] = NO_HOST
        x = host - start
        end = start + compute_end
        if x + compute_host > compute_end:
            end = host + compute_host
        tail = start + tail_end
        if x + tail_host > tail_end:
            tail = host + tail_host
        compute_free[r], hold[r], host_free[r] = end, tail, host + host_s
        if out >= 0:
            j = out
            ready = tail if after_tail else end
            if pp_free[r] > ready:
                ready = pp_free[r]
            pp_free[r] = arrival[j] = ready + p2p_s
            if blocking_sends and arrival[j] > compute_free[r]:
                compute_free[r] = arrival[j]
            if sync_on_p2p:
                unsynced[r] = max(unsynced[r], arrival[j])
        if computing[k]:
            marks[r].append((start, end, x, 0.0))
    return compute_free, hold, pp_free, marks, host_free


def _every_layer(buckets: tuple[tuple[int, float], ...], num_layers: int) -> bool:
    """Every transformer layer issues one bucket, all but the first alike (see ``_timing``)."""
    layered = [seconds for layer, seconds in buckets if 0 <= layer < num_layers]
    placed = {layer for layer, _ in buckets if 0 <= layer < num_layers}
    return len(layered) == len(placed) == num_layers and len(set(layered[1:])) <= 1


def _sample_buckets(
    order: tuple[int, ...], chunk: Chunk, buckets: tuple[tuple[int, float], ...]
) -> tuple[tuple[int, float], ...]:
    """A chunk's buckets (layers by position) named as in a plan holding ``order``.

    ``order``: the chunk's transformer layers the plan holds, in order of appearance (the
    whole chunk's, or a sample's). A sample's layers issue the buckets of the chunk's first
    layers in the action's order; the embedding and the head keep theirs.
    """
    size, base = len(chunk.layers), chunk.base
    if len(order) == size:  # the whole chunk
        return tuple((layer + base if 0 <= layer < size else layer, s) for layer, s in buckets)
    named, n = [], 0
    for layer, seconds in buckets:
        if not 0 <= layer < size:
            named.append((layer, seconds))
        elif n < len(order):
            named.append((order[n], seconds))
            n += 1
    return tuple(named)


def issues_from_host(compute: Any) -> bool:
    """Whether issuing kernels costs the host anything (the engine's rule for a host stream)."""
    cost = getattr(compute, "host", None)
    return cost is not None and (cost.per_kernel_s > 0 or cost.per_collective_s > 0)


@dataclass
class Estimator:
    """Step-time estimates with caches shared across configurations (see the module doc).

    Examples:
        >>> from simtrain.specs.loader import load_experiment
        >>> estimator = Estimator()
        >>> spec = load_experiment("experiments/quickstart.yaml")
        >>> estimate = estimator.estimate(spec)
        >>> 0 < estimate.compute_s < estimate.step_time_s
        True
    """

    _compute: dict[tuple[Any, ...], _Paced] = field(default_factory=dict)
    _base: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _checked: set[str] = field(default_factory=set)
    _paces: dict[tuple[Any, ...], float] = field(default_factory=dict)
    _network: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _layouts: dict[tuple[Any, ...], RankLayout] = field(default_factory=dict)
    _groups: dict[tuple[Any, ...], tuple[int, ...]] = field(default_factory=dict)
    _sources: dict[tuple[Any, ...], ChunkSource] = field(default_factory=dict)
    _layer_ops: dict[str, LayerCache] = field(default_factory=dict)
    _timings: dict[tuple[Any, ...], ActionTiming | None] = field(default_factory=dict)
    _walks: dict[tuple[Any, ...], ActionTiming] = field(default_factory=dict)
    _follow: dict[tuple[Any, ...], tuple[tuple[Slot | PairSlot | None, ...], ...]] = field(
        default_factory=dict
    )
    _layer_orders: dict[tuple[int, int, int], tuple[SegmentPlan, tuple[int, ...]]] = field(
        default_factory=dict
    )
    _plan_times: dict[tuple[int, int], tuple[SegmentPlan, SegmentTimes]] = field(
        default_factory=dict
    )
    _paced_times: dict[tuple[int, int], tuple[SegmentPlan, SegmentTimes]] = field(
        default_factory=dict
    )
    _comm_s: dict[tuple[Any, ...], float] = field(default_factory=dict)
    _chains: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _orders: dict[tuple[int, int], Any] = field(default_factory=dict)
    _signatures: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _dumps: dict[int, tuple[Any, str]] = field(default_factory=dict)
    _contexts: dict[tuple[Any, ...], _Context] = field(default_factory=dict)
    _bounds: dict[tuple[Any, ...], tuple[tuple[float, float], ...]] = field(default_factory=dict)
    stats: Counter[str] = field(default_factory=Counter)
    """Estimates ``extrapolated`` in the microbatch count, and ``not_linear`` (chained in
    full because the reduced counts were not linear yet)."""

    def estimate(self, spec: ExperimentSpec) -> StepEstimate:
        """Estimate one training step of ``spec`` (a validated experiment).

        Raises:
            SpecError: the spec names hardware the catalog lacks (as ``simulate`` does), or
                ``parallel.dp`` is unresolved.
        """
        began = time.perf_counter()
        p = spec.parallel
        if p.dp is None:
            raise SpecError("'parallel.dp' must be resolved before estimating (got None)")
        compute, network = self._models(spec)
        layout = self._layout(spec)
        ranks = self._stage_ranks(layout)
        dp_axis = "dp-cp" if p.cp > 1 else "dp"
        hooks = [
            p.overlap_grad_reduce and len(self._group(layout, r, dp_axis, p)) > 1 for r in ranks
        ]
        p2p_bytes = p2p_op(spec).comm_bytes
        zero_stage = effective_zero_stage(spec)
        profile = get_framework(spec.training.framework)
        every_mb = zero_stage >= 2 and profile.sharding.reduce_every_microbatch
        ops_key = self._ops_key(spec, zero_stage, profile)
        context_key = (ops_key, id(compute), id(network), id(layout), p.zero_shard_group_size,
                       p.vpp, tuple(hooks), p2p_bytes, every_mb)  # fmt: skip
        context = self._contexts.get(context_key)
        if context is None:
            context = self._contexts[context_key] = _Context(
                self._chunks(spec, ops_key, p.pp * p.vpp)
            )
        host = issues_from_host(compute)
        setup = _Setup(
            spec, compute, network, layout, ranks, dp_axis, hooks, p2p_bytes, context,
            zero_stage, profile, make_shard(spec).recipe, host,
            host and p.pp > 1 and getattr(compute, "execution_mode", "eager") == "eager"
            and not p.overlap_p2p_comm,
            collective_issue_s(compute) if host else 0.0,
            bool(getattr(getattr(compute, "calibration", None), "collective_sms", 0)),
            not p.overlap_p2p_comm,
        )  # fmt: skip
        name = p.pipeline_schedule if p.pp > 1 else "1f1b"
        chunks = context.chunks
        m = p.num_microbatches
        result = None
        for warmup in WARMUP_STAGES.get(name, WARMUP_STAGES["default"]):
            fewer = reduced_microbatches(p.pp, m, warmup)
            if not fewer:
                break
            samples = [self._step(setup, name, count, chunks) for count in fewer]
            result = _extend(samples, fewer, m)
            if result is not None:
                break
        if fewer:
            self.stats["extrapolated" if result is not None else "not_linear"] += 1
        if result is None:
            result = self._step(setup, name, m, chunks)
        step, compute_s, exposed, actions = result
        return StepEstimate(
            step_time_s=step,
            compute_s=compute_s,
            exposed_comm_s=exposed,
            bubble_s=max(0.0, step - compute_s - exposed),
            num_actions=actions,
            wall_time_s=time.perf_counter() - began,
        )

    def lower_bound(self, spec: ExperimentSpec) -> float:
        """A step time :meth:`estimate` never beats, from compute alone (no network, no walk).

        Each pipeline rank runs its actions one after another on its compute stream, and an
        action's compute ends no earlier than the sum of its compute tasks (``busy``). The
        rank's first action waits for the first forward of every earlier stage; under 1F1B
        and the interleaved schedule its last action is a backward of its first stage,
        whose gradients still pass the backward of every earlier stage. The bound is the
        longest of these paths over the ranks; communication, the host, interference, the
        optimizer and transfers only add to it. Everything it needs depends on the chunks'
        ops and the schedule, not on the cluster size or the network, so a search pays for
        it once per op shape: it skips configurations whose bound is already worse than the
        best it keeps (:mod:`simtrain.sweep.search`).
        """
        p = spec.parallel
        if p.dp is None:
            raise SpecError("'parallel.dp' must be resolved before estimating (got None)")
        hardware = f"{self._dump(spec.cluster)}|{self._dump(spec.training)}"
        compute = self._compute_model(spec, hardware)
        zero_stage = effective_zero_stage(spec)
        ops_key = self._ops_key(spec, zero_stage, get_framework(spec.training.framework))
        name = p.pipeline_schedule if p.pp > 1 else "1f1b"
        key = (id(compute.model), ops_key, name, p.pp, p.vpp)
        lines = self._bounds.get(key)
        if lines is None:
            lines = self._bounds[key] = self._bound_lines(spec, compute.model, ops_key, name)
        m = p.num_microbatches
        return compute.pace * max(fixed + m * per_microbatch for fixed, per_microbatch in lines)

    def _bound_lines(
        self, spec: ExperimentSpec, compute: Any, ops_key: str, name: str
    ) -> tuple[tuple[float, float], ...]:
        """Per pipeline rank, its path of :meth:`lower_bound` as (fixed, per microbatch).

        In unpaced seconds (``compute`` is the model without the step's pace).
        """
        p = spec.parallel
        chunks = self._chunks(spec, ops_key, p.pp * p.vpp)
        first, forward, backward = [], [], []
        for chunk in chunks:
            busy = {body: chunk.source.busy(chunk, body, compute) for body in BODIES}
            first.append(min(busy["first_forward"], busy["forward"]))
            forward.append(busy["forward"])
            split = busy["backward_input"] + busy["weight"]
            backward.append(min(busy["backward"], split))
        lines = []
        for r in range(p.pp):
            if name == "dualpipe":  # rank r holds stage r (down) and stage pp-1-r (up)
                held = (r, p.pp - 1 - r)
                fixed = sum(first[c] - forward[c] for c in held)
                lines.append((fixed, sum(forward[c] + backward[c] for c in held) / 2))
                continue
            held = tuple(range(r, len(chunks), p.pp))
            fixed = sum(first[c] - forward[c] for c in held) + sum(first[:r])
            if name in ("1f1b", "interleaved"):
                fixed += sum(backward[:r])
            lines.append((fixed, sum(forward[c] + backward[c] for c in held)))
        return tuple(lines)

    def _step(
        self, setup: _Setup, name: str, num_microbatches: int, chunks: list[Chunk]
    ) -> tuple[float, float, float, int]:
        """(step, mean busy, mean exposed communication, actions) with that many microbatches."""
        p = setup.spec.parallel
        shape = schedule_shape(name, p.pp, num_microbatches, p.vpp, bool(p.overlap_ep_comm))
        table = []
        known = setup.context.slots
        for slot in shape.slots:
            row = known.get(slot)
            if row is None:
                row = known[slot] = self._slot(setup, slot, chunks)
            table.append(row)
        step, busy, waited = self._chain(setup, shape, table)
        num = len(setup.ranks)
        return step, sum(busy) / num, sum(waited) / num, len(shape.rank)

    # --- the chain of actions ---------------------------------------------------------

    def _chain(
        self,
        setup: _Setup,
        shape: ScheduleShape,
        table: list[tuple[Any, ...]],
    ) -> tuple[float, list[float], list[float]]:
        """Run the compiled schedule: returns the step and per-rank busy and waited time.

        The gradient buckets an action issues slow its own remaining compute (interference):
        that is added to the action's times before chaining (:attr:`_Gradients.inside`); the
        rank's next action starts no earlier than the slowdown the buckets still in flight
        at the end add to it (:attr:`_Gradients.trailing`), so that a wait for a transfer
        there absorbs it as in the engine.
        """
        num = len(setup.ranks)
        all_grads = []
        inside: dict[Slot, tuple[float, float]] = {}
        trail: dict[Slot, float] = {}
        for r in range(num):
            key = (shape.key, r, setup.grad_key)  # the shape's key determines its actions
            grads = setup.context.grads.get(key)
            if grads is None:
                grads = setup.context.grads[key] = self._grads(
                    setup, r, shape.grad_actions[r], self._following(shape, r)
                )
            all_grads.append(grads)
            for i, extra, extra_host in zip(
                grads.positions, grads.inside, grads.inside_host, strict=False
            ):
                if extra or extra_host:
                    inside[shape.grad_actions[r][i]] = (extra, extra_host)
            for i, extra in zip(grads.positions, grads.trailing, strict=False):
                slot = shape.grad_actions[r][i]
                if extra > trail.get(slot, 0.0):
                    trail[slot] = extra
        if inside or trail:
            table = list(table)
            for k, slot in enumerate(shape.slots):
                (extra, extra_host), later = inside.get(slot, (0.0, 0.0)), trail.get(slot, 0.0)
                if extra and isinstance(slot, PairSlot):
                    row = table[k]
                    table[k] = (*slowed_row(row[:7], extra), row[7])  # type: ignore[arg-type]
                elif extra or extra_host or later:
                    a, b, hop, ha, hb, *rest = table[k]
                    a, ha = a + extra, ha + extra_host
                    b, hb = max(b + extra, a + later), max(hb + extra_host, ha + later)
                    table[k] = (a, b, hop, ha, hb, *rest)
        rules = (setup.sync_on_p2p, setup.blocking_sends)
        key = (shape.key, rules, tuple(row[:7] for row in table))
        chained = self._chains.get(key)
        if chained is None and shape.paired:
            rows = [
                row[:7]
                if isinstance(slot, PairSlot)
                else single_row(row, slot.body in FORWARDS, slot.peer >= 0)
                for slot, row in zip(shape.slots, table, strict=True)
            ]
            computes = [slot.computes_grads for slot in shape.slots]
            chained = self._chains[key] = chain_steps(shape, rows, computes, num, *rules)  # type: ignore[arg-type]
        elif chained is None:
            chained = self._chains[key] = _chain_actions(shape, table, num, *rules)
        compute_free, hold, pp_free, marks, host_free = chained
        busy, waited = [0.0] * num, [0.0] * num
        for k, slot in enumerate(shape.slots):
            timing = table[k][-1]
            busy[slot.rank] += shape.slot_counts[k] * timing.busy_s
            waited[slot.rank] += shape.slot_counts[k] * (timing.at(0.0)[0] - timing.busy_s)
        step = 0.0
        for r, grads in enumerate(all_grads):
            last, opt_busy, opt_waited = grads.finish(
                marks[r], compute_free[r], hold[r], pp_free[r], host_free[r]
            )
            busy[r] += opt_busy
            waited[r] += opt_waited
            step = max(step, last)
        return step, busy, waited

    def _grads(
        self,
        setup: _Setup,
        r: int,
        actions: tuple[Slot, ...],
        following: tuple[Slot | PairSlot | None, ...] = (),
    ) -> _Gradients:
        """The rank's gradient buckets, optimizer and parameter gather (see :class:`_Gradients`).

        The builder's reducer, replayed on sizes: an action *reduces* if it owns its chunk's
        gradients (its last weight-gradient pass on the rank), or computes any when the stack
        reduces after every microbatch (ZeRO >= 2 under FSDP and DeepSpeed). A reducing
        action adds its layers' gradients one by one in the order they finish and, with
        overlap, issues a bucket once it holds ``grad_bucket_size_bytes`` (every layer for
        FSDP's per-unit ZeRO-3 reduce-scatter); after every microbatch the stacks that do
        so flush it, and the rest goes after the rank's last compute. ZeRO 0 all-reduces a
        bucket over the data-parallel group; ZeRO >= 1 reduce-scatters it over the shard
        group and, under hybrid sharding, all-reduces the shard across groups (on a stream
        of its own after the backward when that is not overlapped).

        A reducing action's buckets slow its own compute after them (:attr:`_Gradients.inside`)
        and, when still in flight at its end, the start of the rank's next action
        (``following``: the action after each of ``actions``; :attr:`_Gradients.trailing`),
        both walked by the engine's rule.
        """
        spec, p = setup.spec, setup.spec.parallel
        grad_bytes = GRAD_REDUCE_BYTES[spec.training.grad_reduce_dtype]
        rank, network, stage = setup.ranks[r], setup.network, setup.zero_stage
        sharding = setup.profile.sharding
        group = self._group(setup.layout, rank, setup.dp_axis, p)
        shard, replica = self._split(group, rank, p.zero_shard_group_size)
        per_unit = stage == 3 and sharding.reduce_scatter_granularity == "per_unit"
        bucket_bytes = 1 if per_unit else p.grad_bucket_size_bytes
        every_mb = stage >= 2 and sharding.reduce_every_microbatch
        overlap_replica = p.overlap_replica_grad_reduce is not False
        shared = setup.bucket_stream is not None
        durations: dict[float, Flush] = {}
        # seconds a bucket holds the stream it shares with the gathers (its reduce-scatter;
        # the all-reduce across shard groups runs on a stream of its own)
        walked_s: dict[float, float] = {}

        def bucket(offset: tuple[float, float, float] | None, size: float) -> Flush:
            found = durations.get(size)
            if found is None:
                grad_s = replica_s = 0.0
                issues = size > 0 and len(group) > 1
                if issues and stage == 0:
                    grad_s = self._collective_s(network, "all_reduce", group, size)
                elif issues:
                    if len(shard) > 1:
                        grad_s = self._collective_s(network, "reduce_scatter", shard, size)
                    walked_s[size] = grad_s
                    if len(replica) > 1:
                        across = self._collective_s(
                            network, "all_reduce", replica, size / len(shard)
                        )
                        if overlap_replica:
                            grad_s += across
                        else:
                            replica_s = across
                found = durations[size] = (
                    None, NO_HOST, NO_HOST, grad_s, replica_s, float(issues)
                )  # fmt: skip
            return (*offset, *found[3:]) if offset else found

        flushes: list[tuple[Flush, ...]] = []
        slowdowns: list[float] = []
        inside: list[float] = []
        inside_host: list[float] = []
        trailing: list[float] = []
        timings: dict[Slot, tuple[ActionTiming, float]] = {}
        pending, elements, fp8_elements = 0.0, 0, 0
        positions = (
            range(len(actions))
            if every_mb
            else [i for i, slot in enumerate(actions) if slot.owns_grads]
        )
        for i in positions:  # the others reduce nothing
            slot = actions[i]
            chunk = setup.context.chunks[slot.chunk]
            per_layer, total, fp8 = chunk.source.elements(chunk)
            if slot.owns_grads:
                elements += total
                fp8_elements += fp8
            info = timings.get(slot)
            if info is None:
                timing = setup.context.slots[slot][-1]
                info = timings[slot] = (timing, timing.slowdown if setup.contended else 0.0)
            timing, sigma = info
            slowdowns.append(sigma)
            found: list[Flush] = []
            issued: list[tuple[int, float]] = []  # (layer, seconds) of its hooked buckets
            where: list[int] = []  # index of each hooked bucket's layer in layer_end_s
            hooked = setup.hooks[r]
            recv_ends = getattr(timing, "layer_end_recv_s", None) or repeat(NO_HOST)
            for j, ((layer, layer_end), host_end, recv_end) in enumerate(
                zip(timing.layer_end_s, timing.layer_end_host_s, recv_ends, strict=False)
            ):
                pending += per_layer.get(layer, 0) * grad_bytes
                if hooked and pending >= bucket_bytes:
                    found.append(bucket((layer_end, host_end, recv_end), pending))
                    where.append(j)
                    if found[-1][5]:
                        seconds = walked_s[pending] if shared else found[-1][3]
                        issued.append((layer, seconds))
                    pending = 0.0
            extra, after = 0.0, -1.0  # -1: the buckets after its end priced in finish()
            extra_host: float | None = None  # the host's share when walked (None: extra)
            left: list[tuple[float, float]] | None = None  # walked: buckets in flight at its end
            if (sigma or shared) and not isinstance(slot, PairSlot):
                if issued:
                    # the action walked again with its buckets (engine rules); they issue
                    # when their layers end in that walk, and its gathers queue behind them
                    # on a shared communicator
                    slowed = self._timing(setup, slot, setup.context.chunks, tuple(issued))
                    if slowed is not None:
                        extra = max(0.0, slowed.compute_end_s - timing.compute_end_s)
                        if timing.compute_end_host_s > NO_HOST / 2:
                            extra_host = max(
                                0.0, slowed.compute_end_host_s - timing.compute_end_host_s
                            )
                        ends, host_ends = slowed.layer_end_s, slowed.layer_end_host_s
                        for n, j in enumerate(where):
                            found[n] = (ends[j][1], host_ends[j], *found[n][2:])
                        left = list(slowed.trailing_s)
                elif not found:
                    left = []
            if left is not None:
                final = bucket(None, pending)[3] if every_mb and pending > 0 else 0.0
                if final > 0 and len(group) > 1:  # flushed at its end, after the others
                    begin = left[-1][1] if left else 0.0
                    left.append((begin, begin + final))
                after = self._trailing(setup, following, i, left)
            elif sigma and found:
                free = 0.0
                for offset, _, _, grad_s, _, issues in found:
                    if offset is None or not issues or not grad_s:
                        continue
                    begin = max(offset, free)
                    free = begin + grad_s
                    overlap = min(free, timing.compute_end_s) - begin
                    if overlap > 0:
                        extra += sigma * overlap
            if every_mb:
                found.append(bucket(None, pending))
                pending = 0.0
            flushes.append(tuple(found))
            inside.append(extra)
            inside_host.append(extra if extra_host is None else extra_host)
            trailing.append(after)
        factor = len(shard) if stage >= 1 else 1
        step: tuple[Op, ...] = (optimizer_op(elements / factor, spec.training.optimizer),)
        if fp8_elements:  # the FP8 weight copies are refreshed once per step
            step += (weight_cast_op(fp8_elements, setup.fp8_recipe),)
        gather = 0.0
        gathers_after = stage == 1 or (
            stage == 2 and sharding.zero2_param_gather == "after_optimizer"
        )
        if gathers_after and len(shard) > 1:
            gather = self._collective_s(network, "all_gather", shard, elements * ACT_BYTES)
        optimizer_s = setup.compute.task_time_s(step)
        optimizer_host_s = 0.0
        if setup.host:
            issue = setup.compute.host_time_s(step) + (gather > 0) * setup.per_collective_s
            optimizer_host_s = readiness(issue, optimizer_s, len(step))
        return _Gradients(
            actions=tuple(flushes),
            positions=tuple(positions),
            tail=bucket(None, pending),
            optimizer_s=optimizer_s,
            gather_s=gather,
            optimizer_host_s=optimizer_host_s,
            slowdowns=tuple(slowdowns) if any(slowdowns) else (),
            inside=tuple(inside) if any(inside) or any(inside_host) else (),
            inside_host=tuple(inside_host) if any(inside) or any(inside_host) else (),
            trailing=tuple(trailing) if any(x >= 0 for x in trailing) else (),
        )

    def _trailing(
        self,
        setup: _Setup,
        following: tuple[Slot | PairSlot | None, ...],
        i: int,
        left: list[tuple[float, float]],
    ) -> float:
        """Compute seconds the buckets ``left`` in flight by action ``i`` add to the next.

        The rank's next action is walked with them in flight from its start (it starts as
        the reducing action ends); 0 when nothing follows on the rank; -1 (priced in
        :meth:`_Gradients.finish`) when a paired step follows or the order is unknown.
        """
        if not left:
            return 0.0
        if i >= len(following):
            return -1.0
        nxt = following[i]
        if nxt is None:
            return 0.0
        if isinstance(nxt, PairSlot):
            return -1.0
        chunks = setup.context.chunks
        base = setup.context.slots[nxt][-1]
        slowed = self._timing(setup, nxt, chunks, incoming=tuple(left))
        if slowed is None:
            return -1.0
        return max(0.0, slowed.compute_end_s - base.compute_end_s)

    # --- slots: one kind of action's timing ---------------------------------------------

    def _slot(self, setup: _Setup, slot: Slot | PairSlot, chunks: list[Chunk]) -> tuple[Any, ...]:
        """A slot's row of times, from its actions' start.

        (compute end, tail end, transfer time, the host's shares of both ends, host issue
        time, starts with a collective, timing); a paired step's row is
        :func:`~simtrain.estimator.pairs.pair_row` and its timing.
        """
        if isinstance(slot, PairSlot):
            return self._pair_slot(setup, slot, chunks)
        timing = self._slot_timing(setup, slot, chunks)
        p2p_s = self._p2p_s(setup, slot)
        # the send's issue is charged to the action's host time
        host_s = timing.host_s + (setup.per_collective_s if slot.peer >= 0 else 0.0)
        return (timing.compute_end_s, timing.tail_end_s, p2p_s, timing.compute_end_host_s,
                timing.tail_end_host_s, host_s, timing.starts_with_comm, timing)  # fmt: skip

    def _p2p_s(self, setup: _Setup, slot: Slot) -> float:
        """Seconds of the slot's transfer to its peer (0: it sends nothing)."""
        if slot.peer < 0:
            return 0.0
        src, dst = setup.ranks[slot.rank], setup.ranks[slot.peer]
        size = setup.p2p_bytes
        key = (id(setup.network), "p2p", src, dst, size)
        p2p_s = self._comm_s.get(key, -1.0)
        if p2p_s < 0:
            p2p_s = self._comm_s[key] = setup.network.p2p_time_s(src, dst, size)
        return p2p_s

    def _pair_slot(self, setup: _Setup, slot: PairSlot, chunks: list[Chunk]) -> tuple[Any, ...]:
        """A paired step's row: both chunks walked interleaved (:func:`walk_pair`).

        Sampled on a few layers of each chunk (:func:`pair_samples`) and extrapolated, as
        single actions are (:mod:`simtrain.estimator.chunks`), when both chunks are sampled,
        equally long, and the backward does not reduce gradients (which needs its layer
        ends); else walked whole.
        """
        f, b = slot.forward, slot.backward
        p2p = (self._p2p_s(setup, f), self._p2p_s(setup, b))
        hooks = (b.owns_grads or (setup.every_mb and b.computes_grads)) and setup.hooks[b.rank]
        receives = b.chunk < len(chunks) - 1
        (models_f, groups_f), (models_b, groups_b) = (
            self._rank_signature(setup, s.rank, s.chunk, chunks[s.chunk]) for s in (f, b)
        )
        cf, cb = chunks[f.chunk], chunks[b.chunk]
        key = ("pair", id(cf.source), len(cf.layers), cf.base, f.body, models_f,
               id(cb.source), len(cb.layers), cb.base, b.body, hooks, models_b, p2p,
               (f.peer >= 0, b.peer >= 0, receives, setup.sync_on_p2p))  # fmt: skip
        timing = self._timings.get(key)
        if timing is None:
            groups = {**groups_f, **groups_b}
            network = setup.network

            def comm_s(op: Op) -> float:
                return self._collective_s(network, op.comm, groups[op.axis], op.comm_bytes)

            def walked(f_layers: int, b_layers: int) -> PairTiming:
                plans = (
                    cf.source.plan(f.body, False, range(cf.base, cf.base + f_layers)),
                    cb.source.plan(b.body, hooks, range(cb.base, cb.base + b_layers)),
                )
                times = (
                    self._segment_times(setup, setup.compute, plans[0]),
                    self._segment_times(setup, setup.compute, plans[1]),
                )
                sends = (p2p[0] if f.peer >= 0 else None, p2p[1] if b.peer >= 0 else None)
                order_key = (id(plans[0]), id(plans[1]))  # plans are cached: stable ids
                order = self._orders.get(order_key)
                if order is None or order[0] is not plans:
                    order = self._orders[order_key] = (plans, interleaved(*plans))
                return walk_pair(plans, times, comm_s, sends, receives, setup.sync_on_p2p,
                                 setup.per_collective_s, order[1])  # fmt: skip

            timing = None
            reduces = b.owns_grads or (setup.every_mb and b.computes_grads)
            n = len(cf.layers)
            counts = pair_samples(n)
            if cf.sampled and cb.sampled and n == len(cb.layers) and counts and not reduces:
                samples = [walked(k, k) for k in counts]
                timing = extrapolate_pair(samples, (n - counts[-1]) // (counts[1] - counts[0]))
            if timing is None:
                timing = walked(len(cf.layers), len(cb.layers))
            whole_b = range(cb.base, cb.base + len(cb.layers))
            if cb.base:  # layers named by their position in the chunk (chunks.py)
                renamed = tuple(
                    (layer - cb.base if layer in whole_b else layer, end)
                    for layer, end in timing.layer_end_s
                )
                timing = replace(timing, layer_end_s=renamed)
            self._timings[key] = timing
        return (*pair_row(timing, p2p), timing)

    def _rank_signature(
        self, setup: _Setup, rank: int, index: int, chunk: Chunk
    ) -> tuple[tuple[Any, ...], dict[str, tuple[int, ...]]]:
        """(models key, groups by axis) of chunk ``index`` on pipeline rank ``rank``, cached."""
        found = setup.context.signatures.get((rank, index))
        if found is None:
            found = setup.context.signatures[(rank, index)] = self._signature(
                setup, setup.ranks[rank], chunk
            )
        return found

    def _slot_timing(self, setup: _Setup, slot: Slot, chunks: list[Chunk]) -> ActionTiming:
        """Timing of a slot's chunk action on its rank, shared by all equal-timed ranks.

        Two ranks' actions of equal chunks time alike when every collective of the chunk
        takes as long on both ranks' groups: the key holds those times (the rank's
        *signature*), so stages of a pipeline and configurations of a search share timings.
        """
        timing = self._timing(setup, slot, chunks)
        assert timing is not None  # walked whole when the samples do not tell
        return timing

    def _timing(
        self,
        setup: _Setup,
        slot: Slot,
        chunks: list[Chunk],
        buckets: tuple[tuple[int, float], ...] = (),
        incoming: tuple[tuple[float, float], ...] = (),
    ) -> ActionTiming | None:
        """:meth:`_slot_timing`, optionally with interference from gradient buckets.

        With ``buckets`` ((layer by position in the chunk, seconds) of the gradient buckets
        the action issues, in order), the walk issues them too and their interference slows
        its compute (:func:`~simtrain.estimator.walk.walk`); with ``incoming`` ((start, end)
        of collectives in flight at its start), they slow its compute too. A sampled chunk's
        samples issue the buckets of its first layers (in the action's order) when every
        layer issues one and all but the first alike, grown from the two widest samples
        (:meth:`~simtrain.estimator.chunks.Chunk.extrapolated`); otherwise the whole chunk
        is walked. None when the samples' buckets in flight at the end do not match (the
        caller then prices the interference without a walk).
        """
        chunk = chunks[slot.chunk]
        reduces = slot.owns_grads or (setup.every_mb and slot.computes_grads)
        hooks = reduces and setup.hooks[slot.rank]
        models, groups = self._rank_signature(setup, slot.rank, slot.chunk, chunk)
        body = chunk.source.body(slot.body, chunk.probe)
        stream = setup.bucket_stream if buckets or incoming else None
        key = (id(chunk.source), len(chunk.layers), chunk.base, body, hooks, models, buckets,
               incoming, stream)  # fmt: skip
        if key in self._timings:
            return self._timings[key]
        compute, network = setup.compute, setup.network

        def comm_s(op: Op) -> float:
            return self._collective_s(network, op.comm, groups[op.axis], op.comm_bytes)

        def walker(plan: SegmentPlan) -> ActionTiming:
            named = _sample_buckets(self._order(plan, chunk), chunk, buckets) if buckets else ()
            walk_key = (id(plan), models, named, incoming, stream)  # plans are cached: stable ids
            done = self._walks.get(walk_key)
            if done is None:
                times = self._segment_times(setup, compute, plan)
                done = walk(plan, times, comm_s, named, incoming, stream)
                self._walks[walk_key] = done
            return done

        timing: ActionTiming | None
        if not (buckets or incoming):
            timing = chunk.timing(body, hooks, walker)
        elif not chunk.sampled or (buckets and not _every_layer(buckets, len(chunk.layers))):
            timing = chunk.whole(body, hooks, walker)  # the samples cannot carry its buckets
        elif buckets:
            timing = chunk.extrapolated(body, hooks, walker, exact=False)
        else:  # collectives in flight at its start: they delay a sample as they delay it
            plain = self._timing(setup, slot, chunks)
            assert plain is not None
            probe = chunk.source.plan(body, hooks, range(chunk.base, chunk.base + SAMPLE_LAYERS[1]))
            base_key = (id(probe), models, (), (), None)
            base = self._walks.get(base_key)
            if base is None:
                times = self._segment_times(setup, compute, probe)
                base = self._walks[base_key] = walk(probe, times, comm_s)
            delay = walker(probe).compute_end_s - base.compute_end_s
            timing = replace(plain, compute_end_s=plain.compute_end_s + delay)
        self._timings[key] = timing
        return timing

    def _following(self, shape: ScheduleShape, r: int) -> tuple[Slot | PairSlot | None, ...]:
        """Per action of rank ``r`` computing weight gradients, the rank's next action.

        None where it is the rank's last; empty if the orders disagree. Cached per shape.
        """
        found = self._follow.get(shape.key)
        if found is None:
            own: list[list[Slot | PairSlot]] = [[] for _ in shape.grad_actions]
            for rank, k in zip(shape.rank, shape.slot, strict=True):
                own[rank].append(shape.slots[k])
            found = self._follow[shape.key] = tuple(
                tuple(
                    seq[j + 1] if j + 1 < len(seq) else None
                    for j, slot in enumerate(seq)
                    if slot.computes_grads
                )
                for seq in own
            )
        following = found[r]
        return following if len(following) == len(shape.grad_actions[r]) else ()

    def _order(self, plan: SegmentPlan, chunk: Chunk) -> tuple[int, ...]:
        """The chunk's transformer layers held by ``plan``, in order of appearance (cached)."""
        size, base = len(chunk.layers), chunk.base
        key = (id(plan), base, size)  # plans are cached by their source: stable ids
        found = self._layer_orders.get(key)
        if found is None or found[0] is not plan:
            held = range(base, base + size)
            order = dict.fromkeys(
                layer for seg in plan.segments for layer in seg.layers if layer in held
            )
            found = self._layer_orders[key] = (plan, tuple(order))
        return found[1]

    def _signature(
        self, setup: _Setup, rank: int, chunk: Chunk
    ) -> tuple[tuple[Any, ...], dict[str, tuple[int, ...]]]:
        """(models key, groups by axis) of a chunk on a rank: what its timing depends on."""
        p = setup.spec.parallel
        probe = chunk.probe
        key = (id(setup.network), id(setup.layout), rank, p.zero_shard_group_size,
               id(chunk.source), probe.start, probe.stop)  # fmt: skip
        found = self._signatures.get(key)
        if found is None:
            keys = chunk.source.comm_keys(probe)
            per_node = setup.spec.cluster.gpus_per_node
            groups = {
                axis: self._group(setup.layout, rank, axis, p, per_node) for axis, _, _ in keys
            }
            signature = tuple(
                self._collective_s(setup.network, kind, groups[axis], size)
                for axis, kind, size in keys
            )
            found = self._signatures[key] = (signature, groups)
        return (id(setup.compute), found[0]), found[1]

    # --- models, layouts, chunks ------------------------------------------------------

    def _models(self, spec: ExperimentSpec) -> tuple[Any, Any]:
        """The compute and network models ``simulate`` would use, built once per setting."""
        from simtrain.api import network_model_for

        hardware = f"{self._dump(spec.cluster)}|{self._dump(spec.training)}"
        p = spec.parallel
        compute = self._compute_model(spec, hardware)
        # Only the flow model replicates a collective over the layout's groups; the others
        # time a group from the cluster alone, so every layout of a cluster shares one (and
        # its cache of group fabrics and collective times).
        net_key: tuple[Any, ...] = (hardware, self._dump(spec.simulation))
        if spec.simulation.network_model == "flow":
            net_key += (p.tp, p.cp, p.dp, p.pp, p.ep, p.rank_order)
        network = self._network.get(net_key)
        if network is None:
            network = self._network[net_key] = network_model_for(spec)
        return compute, network

    def _compute_model(self, spec: ExperimentSpec, hardware: str) -> _Paced:
        """The compute model at the step's pace, built once per hardware and pace.

        The model itself depends on the accelerator, its calibration and the training
        section only, so the cluster sizes of a search share it (and the op times cached
        on it: :meth:`_task`); the pace depends on the number of GPUs.
        """
        from simtrain.api import check_hardware, compute_model_for

        if hardware not in self._checked:
            check_hardware(spec)
            self._checked.add(hardware)
        variability = spec.simulation.variability
        pace_key = (spec.cluster.num_gpus, variability)
        pace = self._paces.get(pace_key)
        if pace is None:
            pace = self._paces[pace_key] = median_slowest_factor(spec.cluster.num_gpus, variability)
        cluster = spec.cluster
        base_key = (cluster.accelerator, cluster.calibration, self._dump(spec.training))
        base = self._base.get(base_key)
        if base is None:
            base = self._base[base_key] = compute_model_for(spec)
        compute = self._compute.get((base_key, pace))
        if compute is None:
            compute = self._compute[(base_key, pace)] = _Paced(base, pace)
        return compute

    def _stage_ranks(self, layout: RankLayout) -> list[int]:
        """The simulated rank of each pipeline stage (the builder's symmetry reduction)."""
        key = ("stages", id(layout))
        ranks = self._groups.get(key)
        if ranks is None:
            pp = layout.degrees["pp"]
            ranks = self._groups[key] = tuple(layout.rank({"pp": s}) for s in range(pp))
        return list(ranks)

    def _layout(self, spec: ExperimentSpec) -> RankLayout:
        p = spec.parallel
        key = (p.tp, p.cp, p.dp, p.pp, p.ep, p.rank_order)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = RankLayout.from_spec(p)
        return layout

    def _group(
        self, layout: RankLayout, rank: int, axis: str, p: Any, gpus_per_node: int = 0
    ) -> tuple[int, ...]:
        """The rank's process group along ``axis``, as the builder resolves it.

        The two hops of a DeepEP dispatch (``ep_intra``, ``ep_inter``) split the expert group
        by node, so they need the cluster's ``gpus_per_node``.
        """
        key = (id(layout), rank, axis, p.zero_shard_group_size, gpus_per_node)
        group = self._groups.get(key)
        if group is None:
            if axis == SHARD_AXIS:
                dp_axis = "dp-cp" if p.cp > 1 else "dp"
                group = self._shard(layout, rank, dp_axis, p)
            elif axis in EP_HOPS:
                ep_group = self._group(layout, rank, "ep", p)
                group = ep_hop_group(ep_group, rank, gpus_per_node, axis)
            else:
                group = tuple(layout.group_of(rank, axis))
            self._groups[key] = group
        return group

    def _shard(self, layout: RankLayout, rank: int, dp_axis: str, p: Any) -> tuple[int, ...]:
        group = self._group(layout, rank, dp_axis, p)
        return self._split(group, rank, p.zero_shard_group_size)[0]

    def _split(
        self, group: tuple[int, ...], rank: int, shard_size: int | None
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The rank's ZeRO shard and replica groups (the builder's ``shard_groups``)."""
        key = ("split", id(group), rank, shard_size)
        split = self._groups.get(key)
        if split is None:
            split = self._groups[key] = shard_groups(group, rank, shard_size)  # type: ignore[assignment]
        return split  # type: ignore[return-value]

    def _chunks(self, spec: ExperimentSpec, ops_key: str, num_chunks: int) -> list[Chunk]:
        """The experiment's model chunks, their ops shared with every spec of equal ops."""
        shard = None
        chunks = []
        for c, layers in enumerate(chunk_layers(spec.model.num_layers, num_chunks)):
            first, last = c == 0, c == num_chunks - 1
            source = self._sources.get((ops_key, first, last))
            if source is None:
                shard = shard or make_shard(spec)
                layers_ops = self._layer_ops.setdefault(ops_key, {})
                source = self._sources[(ops_key, first, last)] = ChunkSource(
                    spec, shard, first, last, layers=layers_ops
                )
            chunks.append(Chunk(source, layers, *chunk_base(spec, layers)))
        return chunks

    def _ops_key(self, spec: ExperimentSpec, zero_stage: int, profile: Any) -> str:
        """What a chunk's ops depend on: everything but scheduling and placement fields.

        The ZeRO stage matters only through the parameter gathers the builder inserts:
        everywhere under ZeRO-3, in the first forward under FSDP's ZeRO-2.
        """
        p = spec.parallel
        parallel = {
            k: v for k, v in p.model_dump(mode="json").items() if k not in _SCHEDULING_FIELDS
        }
        sharded = (p.dp or 1) * p.cp > 1
        forward_gather = zero_stage == 2 and profile.sharding.zero2_param_gather == "forward"
        parallel["param_gathers"] = sharded and (
            "all" if zero_stage == 3 else "first_forward" if forward_gather else ""
        )
        ops = json.dumps(parallel, sort_keys=True)
        return f"{self._dump(spec.model)}|{ops}|{self._dump(spec.training)}"

    def _dump(self, section: Any) -> str:
        """A spec section as canonical JSON, once per section object.

        Specs are frozen, and a search builds its experiments from a few shared sections.
        """
        found = self._dumps.get(id(section))
        if found is None or found[0] is not section:
            text = json.dumps(section.model_dump(mode="json"), sort_keys=True)
            found = self._dumps[id(section)] = (section, text)
        return found[1]

    # --- cached model calls -----------------------------------------------------------

    def _segment_times(self, setup: _Setup, compute: _Paced, plan: SegmentPlan) -> SegmentTimes:
        """The plan's :class:`SegmentTimes` at the step's pace, once per plan and pace.

        The unpaced times are looked up once per plan and compute model, so that every
        pace (cluster size) shares them; the walk scales device times by the pace (host
        time is not paced).
        """
        key = (id(plan), id(compute))  # plans and models are cached: their ids are stable
        found = self._paced_times.get(key)
        if found is not None and found[0] is plan:
            return found[1]
        model = compute.model
        base_key = (id(plan), id(model))
        base = self._plan_times.get(base_key)
        if base is None or base[0] is not plan:
            base = self._plan_times[base_key] = (
                plan,
                SegmentTimes.of(
                    plan,
                    model.task_time_s,
                    model.host_time_s if setup.host else None,
                    setup.per_collective_s,
                    (lambda ops: model.task_time_s(ops, contended=True))
                    if setup.contended
                    else None,
                ),
            )
        times = base[1]
        paced = SegmentTimes(times.compute_s, times.host_s, times.contended_s, compute.pace)
        self._paced_times[key] = (plan, paced)
        return paced

    def _collective_s(self, network: Any, kind: str, group: tuple[int, ...], size: float) -> float:
        key = (id(network), kind, id(group), size)  # groups are cached tuples: ids are stable
        cached = self._comm_s.get(key)
        if cached is None:
            cached = self._comm_s[key] = network.collective_time_s(kind, group, size)
        return cached


WARMUP_STAGES: dict[str, tuple[int, ...]] = {
    "default": (2, 6, 12),
    "zb-h1": (6, 12, 24),
    "zb-h2": (6, 12, 24),
}
"""Microbatches per pipeline stage before the reduced counts start, tried in turn until the
step is linear there: from 2 (the least DualPipe runs; the other schedules are periodic from
there). The zero-bubble schedules place their weight passes greedily and settle only after
about 5·pp microbatches, or more when the backward is much longer than the forward (full
recomputation); their first increments can repeat before changing, so they start at 6."""


def reduced_microbatches(pp: int, num_microbatches: int, warmup: int = 2) -> tuple[int, ...]:
    """Three smaller microbatch counts whose steps extrapolate to ``num_microbatches``, or ().

    Once every stage is in its steady state, each further group of microbatches adds the
    same time to the step (the schedule repeats), so the step is linear in the microbatch
    count along counts ``Δ = pp`` apart (a multiple of pp, as the interleaved schedule needs;
    even whenever DualPipe runs, which needs an even pp). The three counts are the first at least
    ``warmup·pp`` that are congruent to ``num_microbatches`` modulo Δ; () when that saves
    nothing. The caller checks that the three steps are linear, and tries a longer warm-up
    or the full count if not.

    Examples:
        >>> reduced_microbatches(4, 512)
        (8, 12, 16)
        >>> reduced_microbatches(4, 702)
        (10, 14, 18)
        >>> reduced_microbatches(4, 30)
        ()
    """
    delta = pp
    first = warmup * pp
    start = first + (num_microbatches - first) % delta
    counts = (start, start + delta, start + 2 * delta)
    return () if sum(counts) >= num_microbatches else counts


def _extend(
    samples: list[tuple[float, float, float, int]], counts: tuple[int, ...], target: int
) -> tuple[float, float, float, int] | None:
    """Extrapolate linear samples to ``target`` microbatches; None if they are not linear."""
    (a, b, c), delta = samples, counts[1] - counts[0]
    steps = (target - counts[2]) / delta
    out = []
    for i in range(3):
        inc1, inc2 = b[i] - a[i], c[i] - b[i]
        if abs(inc1 - inc2) > 1e-9 * max(1.0, abs(c[i])):
            return None
        out.append(c[i] + steps * inc2)
    return out[0], out[1], out[2], c[3] + round(steps * (c[3] - b[3]))


def estimate_step(spec: ExperimentSpec) -> StepEstimate:
    """Estimate one step of ``spec`` with a fresh :class:`Estimator` (no shared caches)."""
    return Estimator().estimate(spec)
