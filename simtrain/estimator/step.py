"""The analytical step-time estimate: the engine's program, combined in closed form.

:class:`Estimator` times a training step from the same pieces the discrete-event engine
replays, without building the program or running SimPy:

- the ops of each model chunk come from :func:`simtrain.parallel.builder.chunk_ops` and are
  cut into tasks by :func:`simtrain.parallel.segments.segment_ops`, as the builder does; a
  chunk is sampled on a few layers and extrapolated (:mod:`simtrain.estimator.chunks`);
- compute tasks are timed by the experiment's compute model (``ComputeModel.task_time_s``),
  collectives and transfers by its network model (``collective_time_s``, ``p2p_time_s``),
  both obtained as :func:`simtrain.api.simulate` obtains them;
- each action is walked on its streams (:mod:`simtrain.estimator.walk`; a paired step's two
  actions interleaved: :mod:`simtrain.estimator.pairs`), the schedule's actions are chained
  along their dependencies (:mod:`simtrain.estimator.pipeline`,
  :mod:`simtrain.estimator.chain`), the data-parallel gradient buckets are issued at the
  layer ends the builder hooks them to, and the optimizer step and the ZeRO parameter
  all-gather close the step (:mod:`simtrain.estimator.gradients`);
- long schedules are timed on fewer microbatches and extrapolated
  (:mod:`simtrain.estimator.microbatches`).

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
from typing import Any

from simtrain.catalog.frameworks import get_framework
from simtrain.engine.host import collective_issue_s
from simtrain.engine.variability import median_slowest_factor
from simtrain.errors import SpecError
from simtrain.estimator.bound import bound_lines, walked_bound
from simtrain.estimator.chain import ChainState, chain_actions
from simtrain.estimator.chunks import SAMPLE_LAYERS, Chunk, ChunkSource, chunk_base
from simtrain.estimator.gradients import GradientReduction, every_layer, sample_buckets
from simtrain.estimator.microbatches import WARMUP_STAGES, extend_samples, reduced_microbatches
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
from simtrain.estimator.setup import Context, Paced, Setup, issues_from_host
from simtrain.estimator.walk import ActionTiming, OpTimes, SegmentTimes, walk
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
from simtrain.specs.framework_resolve import effective_zero_stage
from simtrain.workload.ops import Op

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


Signature = tuple[int, dict[str, tuple[int, ...]], dict[tuple[str, str, float], float]]
"""(models key, groups by axis, seconds by collective) of a chunk on a rank
(:meth:`Estimator._signature`)."""

_UNKNOWN = object()
"""Not in a cache whose values may be None."""

FORWARDS = frozenset({"forward", "first_forward"})
"""Bodies of a forward action (its transfer leaves after its trailing collectives)."""


def _cut(
    shape: ScheduleShape,
) -> tuple[int, dict[Slot | PairSlot, int], tuple[int, ...]]:
    """Where the chains of a shape's configurations part (``Estimator._resumed``).

    (the first position whose action owns gradients, 0 if none; the first position of each
    slot; the transfers sent before that position and received from it on).
    """
    owning = [i for i, k in enumerate(shape.slot) if shape.slots[k].owns_grads]
    position = owning[0] if owning else 0
    first: dict[Slot | PairSlot, int] = {}
    for i, k in enumerate(shape.slot):
        first.setdefault(shape.slots[k], i)
    sent = {j for j in shape.send[:position] if j >= 0}
    return position, first, tuple(sorted(sent.intersection(shape.recv[position:])))


@dataclass
class Estimator(GradientReduction):
    """Step-time estimates with caches shared across configurations (see the module doc).

    Examples:
        >>> from simtrain.specs.loader import load_experiment
        >>> estimator = Estimator()
        >>> spec = load_experiment("experiments/quickstart.yaml")
        >>> estimate = estimator.estimate(spec)
        >>> 0 < estimate.compute_s < estimate.step_time_s
        True
    """

    _compute: dict[tuple[Any, ...], Paced] = field(default_factory=dict)
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
    _op_times: dict[int, OpTimes] = field(default_factory=dict)
    _comm_s: dict[tuple[Any, ...], float] = field(default_factory=dict)
    _chains: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _orders: dict[tuple[int, int], Any] = field(default_factory=dict)
    _signatures: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _models_ids: dict[tuple[int, tuple[float, ...]], int] = field(default_factory=dict)
    _dumps: dict[int, tuple[Any, str]] = field(default_factory=dict)
    _contexts: dict[tuple[Any, ...], Context] = field(default_factory=dict)
    _bounds: dict[tuple[Any, ...], tuple[tuple[float, float], ...]] = field(default_factory=dict)
    _steps: dict[tuple[Any, ...], tuple[float, float]] = field(default_factory=dict)
    _cuts: dict[tuple[Any, ...], tuple[int, dict[Slot | PairSlot, int], tuple[int, ...]]] = field(
        default_factory=dict
    )
    _prefixes: dict[tuple[Any, ...], ChainState] = field(default_factory=dict)
    stats: Counter[str] = field(default_factory=Counter)
    """Estimates ``extrapolated`` in the microbatch count, and ``not_linear`` (chained in
    full because the reduced counts were not linear yet)."""

    def estimate(self, spec: ExperimentSpec) -> StepEstimate:
        """Estimate one training step of ``spec`` (a validated experiment).

        Raises:
            SpecError: the spec names hardware the catalog lacks (as ``simulate`` does), or
                ``parallel.dp`` is unresolved.
        """
        estimate = self.estimate_within(spec, None)
        assert estimate is not None  # no limit: always estimated
        return estimate

    def estimate_within(self, spec: ExperimentSpec, limit_s: float | None) -> StepEstimate | None:
        """:meth:`estimate`, or None once the step is sure to take longer than ``limit_s``.

        A search that only keeps layouts faster than the best it has found passes that
        step time: each action's walk is needed for the estimate anyway, and once the
        walks show that some pipeline rank's actions alone, one after another, take longer
        (:func:`~simtrain.estimator.bound.walked_bound`), the rest of the estimate (the
        chain, the gradient reduction) is skipped. Not for paired steps, nor for steps
        extrapolated from fewer microbatches (:func:`reduced_microbatches`), which need not
        stay above the bound. None (no limit) always estimates.

        Raises:
            SpecError: as :meth:`estimate`.
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
            context = self._contexts[context_key] = Context(
                self._chunks(spec, ops_key, p.pp * p.vpp)
            )
        host = issues_from_host(compute)
        setup = Setup(
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
        warmups = WARMUP_STAGES.get(name, WARMUP_STAGES["default"])
        if limit_s is not None and not reduced_microbatches(p.pp, m, warmups[0]):
            # chained in full (an extrapolated step need not stay above the bound)
            shape = schedule_shape(name, p.pp, m, p.vpp, bool(p.overlap_ep_comm))
            rows = self._rows(setup, shape, chunks)
            if not shape.paired and walked_bound(shape, rows, len(ranks)) > limit_s:
                return None
        result = None
        tried = False
        for warmup in warmups:
            fewer = reduced_microbatches(p.pp, m, warmup)
            if not fewer:
                break
            tried = True
            samples = [self._step(setup, name, count, chunks) for count in fewer]
            result = extend_samples(samples, fewer, m)
            if result is not None:
                break
        if tried:
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
            chunks = self._chunks(spec, ops_key, p.pp * p.vpp)
            lines = self._bounds[key] = bound_lines(chunks, compute.model, name, p.pp)
        m = p.num_microbatches
        return compute.pace * max(fixed + m * per_microbatch for fixed, per_microbatch in lines)

    def _step(
        self, setup: Setup, name: str, num_microbatches: int, chunks: list[Chunk]
    ) -> tuple[float, float, float, int]:
        """(step, mean busy, mean exposed communication, actions) with that many microbatches."""
        p = setup.spec.parallel
        shape = schedule_shape(name, p.pp, num_microbatches, p.vpp, bool(p.overlap_ep_comm))
        table = self._rows(setup, shape, chunks)
        step, busy, waited = self._chain(setup, shape, table)
        num = len(setup.ranks)
        return step, sum(busy) / num, sum(waited) / num, len(shape.rank)

    def _rows(self, setup: Setup, shape: ScheduleShape, chunks: list[Chunk]) -> list[Any]:
        """The rows of the shape's slots (:meth:`_slot`), cached in the setup's context."""
        return self._table(setup, shape, chunks)[0]

    def _table(
        self, setup: Setup, shape: ScheduleShape, chunks: list[Chunk]
    ) -> tuple[list[Any], tuple[float, ...], tuple[float, ...]]:
        """(rows, per-rank busy time, per-rank time waited inside actions) of a shape.

        Cached per shape in the setup's context, which the configurations of one placement
        and ops share (their ZeRO stages and schedules of one compiled shape): the sums
        depend on the slots' timings alone (the gradient buckets' interference is added
        to the rows' copies in :meth:`_chain`).
        """
        found = setup.context.tables.get(shape.key)
        if found is None:
            table = []
            known = setup.context.slots
            for slot in shape.slots:
                row = known.get(slot)
                if row is None:
                    row = known[slot] = self._slot(setup, slot, chunks)
                table.append(row)
            num = len(setup.ranks)
            busy, waited = [0.0] * num, [0.0] * num
            for k, slot in enumerate(shape.slots):
                timing = table[k][-1]
                busy[slot.rank] += shape.slot_counts[k] * timing.busy_s
                waited[slot.rank] += shape.slot_counts[k] * (timing.at(0.0)[0] - timing.busy_s)
            found = setup.context.tables[shape.key] = (table, tuple(busy), tuple(waited))
        return found

    # --- the chain of actions ---------------------------------------------------------

    def _chain(
        self,
        setup: Setup,
        shape: ScheduleShape,
        table: list[tuple[Any, ...]],
    ) -> tuple[float, list[float], list[float]]:
        """Run the compiled schedule: returns the step and per-rank busy and waited time.

        The gradient buckets an action issues slow its own remaining compute (interference):
        that is added to the action's times before chaining (:attr:`Gradients.inside`); the
        rank's next action starts no earlier than the slowdown the buckets still in flight
        at the end add to it (:attr:`Gradients.trailing`), so that a wait for a transfer
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
        rules = (setup.sync_on_p2p, setup.blocking_sends, setup.host_syncs(shape))
        # the rows are the context's for the shape, slowed by ``inside`` and ``trail``: a
        # key of those rather than of every row (contexts live as long as the estimator)
        key = (id(setup.context), shape.key, rules, tuple(inside.items()), tuple(trail.items()))
        chained = self._chains.get(key)
        if chained is None and shape.paired:
            rows = [
                row[:7]
                if isinstance(slot, PairSlot)
                else single_row(row, slot.body in FORWARDS, slot.peer >= 0)
                for slot, row in zip(shape.slots, table, strict=True)
            ]
            computes = [slot.computes_grads for slot in shape.slots]
            # paired steps (DualPipe) run under no stack that syncs the host on batches or loss
            chained = self._chains[key] = chain_steps(shape, rows, computes, num, *rules[:2])  # type: ignore[arg-type]
        elif chained is None:
            state = self._resumed(setup, shape, table, rules, inside.keys() | trail.keys())
            begin = self._cuts[shape.key][0] if state is not None else 0
            state = chain_actions(shape, table, num, *rules, state, begin)
            chained = self._chains[key] = (
                state.compute_free, state.hold, state.pp_free, state.marks, state.host_free
            )  # fmt: skip
        compute_free, hold, pp_free, marks, host_free = chained
        _, summed_busy, summed_waited = setup.context.tables[shape.key]
        busy, waited = list(summed_busy), list(summed_waited)
        step = 0.0
        for r, grads in enumerate(all_grads):
            last, opt_busy, opt_waited = grads.finish(
                marks[r], compute_free[r], hold[r], pp_free[r], host_free[r]
            )
            busy[r] += opt_busy
            waited[r] += opt_waited
            step = max(step, last)
        return step, busy, waited

    def _resumed(
        self,
        setup: Setup,
        shape: ScheduleShape,
        table: list[tuple[Any, ...]],
        rules: tuple[bool, bool],
        adjusted: Any,
    ) -> ChainState | None:
        """The chain's state at its first action that owns gradients, shared (see below).

        The configurations of one context (ZeRO stages and gradient settings of one
        placement) chain the same rows (the context's table) except those of the actions
        whose gradient buckets slow them (``adjusted``, :meth:`_chain`), and those are the
        actions that reduce gradients: actions owning their chunk's gradients, late in the
        step (after 65-99 % of the order under 1F1B, interleaved and zero-bubble schedules),
        unless the stack reduces after every microbatch. Up to the first of them, their
        chains are one: it is run once per context, shape and rules, and resumed from a
        copy. None (chain from the start) when an adjusted action comes earlier.
        """
        cut = self._cuts.get(shape.key)
        if cut is None:
            cut = self._cuts[shape.key] = _cut(shape)
        position, first, transfers = cut
        if position == 0 or any(first[slot] < position for slot in adjusted):
            return None
        key = (id(setup.context), shape.key, rules)  # contexts live as long as the estimator
        prefix = self._prefixes.get(key)
        if prefix is None:
            state = chain_actions(shape, table, len(setup.ranks), *rules, end=position)
            prefix = self._prefixes[key] = state.kept(transfers)
        return prefix.resumed(transfers, shape.num_transfers)

    # --- slots: one kind of action's timing ---------------------------------------------

    def _slot(self, setup: Setup, slot: Slot | PairSlot, chunks: list[Chunk]) -> tuple[Any, ...]:
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

    def _p2p_s(self, setup: Setup, slot: Slot) -> float:
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

    def _pair_slot(self, setup: Setup, slot: PairSlot, chunks: list[Chunk]) -> tuple[Any, ...]:
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
        (models_f, groups_f, durations_f), (models_b, groups_b, durations_b) = (
            self._rank_signature(setup, s.rank, s.chunk, chunks[s.chunk]) for s in (f, b)
        )
        cf, cb = chunks[f.chunk], chunks[b.chunk]
        key = ("pair", id(cf.source), len(cf.layers), cf.base, f.body, models_f,
               id(cb.source), len(cb.layers), cb.base, b.body, hooks, models_b, p2p,
               (f.peer >= 0, b.peer >= 0, receives, setup.sync_on_p2p))  # fmt: skip
        timing = self._timings.get(key)
        if timing is None:
            groups = {**groups_f, **groups_b}
            durations = {**durations_f, **durations_b}  # one rank: equal where both hold one
            network = setup.network

            def comm_s(op: Op) -> float:
                seconds = durations.get((op.axis, op.comm, op.comm_bytes))
                if seconds is None:  # not among the probes' collectives
                    seconds = self._collective_s(network, op.comm, groups[op.axis], op.comm_bytes)
                return seconds

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

    def _rank_signature(self, setup: Setup, rank: int, index: int, chunk: Chunk) -> Signature:
        """:meth:`_signature` of chunk ``index`` on pipeline rank ``rank``, cached."""
        found = setup.context.signatures.get((rank, index))
        if found is None:
            found = setup.context.signatures[(rank, index)] = self._signature(
                setup, setup.ranks[rank], chunk
            )
        return found

    def _slot_timing(self, setup: Setup, slot: Slot, chunks: list[Chunk]) -> ActionTiming:
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
        setup: Setup,
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
        models, groups, durations = self._rank_signature(setup, slot.rank, slot.chunk, chunk)
        body = slot.body
        if body == "first_forward":
            body = chunk.source.body(body, chunk.probe)
        stream = setup.bucket_stream if buckets or incoming else None
        key = (id(chunk.source), len(chunk.layers), chunk.base, body, hooks, models, buckets,
               incoming, stream)  # fmt: skip
        known = self._timings.get(key, _UNKNOWN)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        compute, network = setup.compute, setup.network

        def comm_s(op: Op) -> float:
            seconds = durations.get((op.axis, op.comm, op.comm_bytes))
            if seconds is None:  # not among the probe's collectives
                seconds = self._collective_s(network, op.comm, groups[op.axis], op.comm_bytes)
            return seconds

        def walked(
            plan: SegmentPlan,
            named: tuple[tuple[int, float], ...],
            flying: tuple[tuple[float, float], ...],
            on: str | None,
        ) -> ActionTiming:
            walk_key = (id(plan), models, named, flying, on)  # plans are cached: stable ids
            done = self._walks.get(walk_key)
            if done is None:
                times = self._segment_times(setup, compute, plan)
                done = self._walks[walk_key] = walk(plan, times, comm_s, named, flying, on)
            return done

        def walker(plan: SegmentPlan) -> ActionTiming:
            named = sample_buckets(self._order(plan, chunk), chunk, buckets) if buckets else ()
            return walked(plan, named, incoming, stream)

        timing: ActionTiming | None
        if not (buckets or incoming):
            timing = chunk.timing(body, hooks, walker)
        elif not chunk.sampled or (buckets and not every_layer(buckets, len(chunk.layers))):
            timing = chunk.whole(body, hooks, walker)  # the samples cannot carry its buckets
        elif buckets:
            timing = chunk.extrapolated(body, hooks, walker, exact=False)
        else:  # collectives in flight at its start: they delay a sample as they delay it
            plain = self._timing(setup, slot, chunks)
            assert plain is not None
            probe = chunk.source.plan(body, hooks, range(chunk.base, chunk.base + SAMPLE_LAYERS[1]))
            delay = walker(probe).compute_end_s - walked(probe, (), (), None).compute_end_s
            timing = plain._replace(compute_end_s=plain.compute_end_s + delay)
        self._timings[key] = timing
        return timing

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

    def _signature(self, setup: Setup, rank: int, chunk: Chunk) -> Signature:
        """(models key, groups by axis, collective seconds) of a chunk on a rank.

        The models key stands for what the chunk's timing depends on besides its ops: the
        compute model and the seconds of each of its collectives on the rank's groups (a
        small number, one per distinct pair: cache keys holding it hash an int, not the
        seconds). The collective seconds are by (axis, kind, size), as the walks ask.
        """
        p = setup.spec.parallel
        probe = chunk.probe
        key = (id(setup.network), id(setup.layout), rank, p.zero_shard_group_size,
               id(chunk.source), probe.start, probe.stop)  # fmt: skip
        found = self._signatures.get(key)
        if found is None:
            keys = chunk.source.comm_keys(probe)
            per_node = setup.spec.cluster.gpus_per_node
            axes = dict.fromkeys(axis for axis, _, _ in keys)  # a group per axis, not per op
            groups = {axis: self._group(setup.layout, rank, axis, p, per_node) for axis in axes}
            signature = tuple(
                self._collective_s(setup.network, kind, groups[axis], size)
                for axis, kind, size in keys
            )
            durations = dict(zip(keys, signature, strict=True))
            found = self._signatures[key] = (signature, groups, durations)
        signature, groups, durations = found
        models = self._models_ids.setdefault((id(setup.compute), signature), len(self._models_ids))
        return models, groups, durations

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

    def _compute_model(self, spec: ExperimentSpec, hardware: str) -> Paced:
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
            compute = self._compute[(base_key, pace)] = Paced(base, pace)
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
        everywhere under ZeRO-3, in the first forward under FSDP's ZeRO-2. The parallel
        fields are read as validated (their ``repr``), not dumped: every configuration has
        a section of its own, so this runs once per estimate.
        """
        p = spec.parallel
        parallel = sorted((k, v) for k, v in p.__dict__.items() if k not in _SCHEDULING_FIELDS)
        sharded = (p.dp or 1) * p.cp > 1
        forward_gather = zero_stage == 2 and profile.sharding.zero2_param_gather == "forward"
        gathers = sharded and (
            "all" if zero_stage == 3 else "first_forward" if forward_gather else ""
        )
        return f"{self._dump(spec.model)}|{parallel!r}|{gathers!r}|{self._dump(spec.training)}"

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

    def _segment_times(self, setup: Setup, compute: Paced, plan: SegmentPlan) -> SegmentTimes:
        """The plan's :class:`SegmentTimes` at the step's pace, once per plan and pace.

        The unpaced times are looked up once per plan and compute model, so that every
        pace (cluster size) shares them; they are scaled to the pace once per plan
        (:meth:`SegmentTimes.at_pace`: host time is not paced).
        """
        key = (id(plan), id(compute))  # plans and models are cached: their ids are stable
        found = self._paced_times.get(key)
        if found is not None and found[0] is plan:
            return found[1]
        model = compute.model
        base_key = (id(plan), id(model))
        base = self._plan_times.get(base_key)
        if base is None or base[0] is not plan:
            ops = self._op_times.get(id(model))
            if ops is None or ops.model is not model:
                ops = self._op_times[id(model)] = OpTimes(model)
            base = self._plan_times[base_key] = (
                plan,
                SegmentTimes.of(
                    plan,
                    ops.device_s,
                    ops.profile if setup.host else None,
                    setup.per_collective_s,
                    ops.contended_s if setup.contended else None,
                ),
            )
        times = base[1]
        paced = times.at_pace(compute.pace)
        self._paced_times[key] = (plan, paced)
        return paced

    def _collective_s(self, network: Any, kind: str, group: tuple[int, ...], size: float) -> float:
        key = (id(network), kind, id(group), size)  # groups are cached tuples: ids are stable
        cached = self._comm_s.get(key)
        if cached is None:
            cached = self._comm_s[key] = network.collective_time_s(kind, group, size)
        return cached


def estimate_step(spec: ExperimentSpec) -> StepEstimate:
    """Estimate one step of ``spec`` with a fresh :class:`Estimator` (no shared caches)."""
    return Estimator().estimate(spec)
