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
from dataclasses import dataclass, field
from typing import Any

from simtrain.errors import SpecError
from simtrain.estimator.chunks import Chunk, ChunkSource, chunk_base
from simtrain.estimator.pipeline import ScheduleShape, Slot, schedule_shape
from simtrain.estimator.walk import ActionTiming, walk
from simtrain.parallel.builder import GRAD_BYTES, SHARD_AXIS, make_shard, p2p_op, shard_groups
from simtrain.parallel.layout import RankLayout
from simtrain.parallel.segments import SegmentPlan
from simtrain.parallel.stages import chunk_layers
from simtrain.specs.experiment import ExperimentSpec
from simtrain.workload.ops import Op
from simtrain.workload.primitives import ACT_BYTES
from simtrain.workload.transformer import optimizer_op

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

    _compute: dict[str, Any] = field(default_factory=dict)
    _network: dict[str, Any] = field(default_factory=dict)
    _layouts: dict[tuple[Any, ...], RankLayout] = field(default_factory=dict)
    _groups: dict[tuple[Any, ...], tuple[int, ...]] = field(default_factory=dict)
    _sources: dict[tuple[Any, ...], ChunkSource] = field(default_factory=dict)
    _timings: dict[tuple[Any, ...], ActionTiming] = field(default_factory=dict)
    _walks: dict[tuple[Any, ...], ActionTiming] = field(default_factory=dict)
    _task_s: dict[tuple[int, int], tuple[tuple[Op, ...], float]] = field(default_factory=dict)
    _comm_s: dict[tuple[Any, ...], float] = field(default_factory=dict)

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
        name = p.pipeline_schedule if p.pp > 1 else "1f1b"
        shape = schedule_shape(name, p.pp, p.num_microbatches, p.vpp)
        chunks = self._chunks(spec, shape.num_chunks)
        dp_axis = "dp-cp" if p.cp > 1 else "dp"
        ranks = self._stage_ranks(layout)
        setup = _Setup(
            spec, compute, network, layout, ranks, dp_axis,
            [p.overlap_grad_reduce and len(self._group(layout, r, dp_axis, p)) > 1
             for r in ranks],
            p2p_op(spec).comm_bytes,
        )  # fmt: skip
        table = [self._slot(setup, slot, chunks) for slot in shape.slots]
        step, busy, waited = self._chain(setup, shape, table, chunks)
        num = len(ranks)
        compute_s, exposed = sum(busy) / num, sum(waited) / num
        return StepEstimate(
            step_time_s=step,
            compute_s=compute_s,
            exposed_comm_s=exposed,
            bubble_s=max(0.0, step - compute_s - exposed),
            num_actions=len(shape.rank),
            wall_time_s=time.perf_counter() - began,
        )

    # --- the chain of actions ---------------------------------------------------------

    def _chain(
        self,
        setup: _Setup,
        shape: ScheduleShape,
        table: list[tuple[float, float, float, ActionTiming]],
        chunks: list[Chunk],
    ) -> tuple[float, list[float], list[float]]:
        """Run the compiled schedule: returns the step and per-rank busy and waited time."""
        num = len(setup.ranks)
        compute_free, hold, pp_free = [0.0] * num, [0.0] * num, [0.0] * num
        arrival = [0.0] * shape.num_transfers
        owners: list[tuple[int, int, float]] = []  # (position, slot, start) owning gradients
        ranks, slots, recvs, sends, tails = (
            shape.rank, shape.slot, shape.recv, shape.send, shape.send_after_tail
        )  # fmt: skip
        owning = [s.owns_grads for s in shape.slots]
        for i in range(len(ranks)):
            r, k = ranks[i], slots[i]
            compute_end, tail_end, p2p_s, _ = table[k]
            start = compute_free[r]
            if hold[r] > start:
                start = hold[r]
            j = recvs[i]
            if j >= 0 and arrival[j] > start:
                start = arrival[j]
            end = compute_free[r] = start + compute_end
            tail = hold[r] = start + tail_end
            j = sends[i]
            if j >= 0:
                ready = tail if tails[i] else end
                if pp_free[r] > ready:
                    ready = pp_free[r]
                pp_free[r] = arrival[j] = ready + p2p_s
            if owning[k]:
                owners.append((r, k, start))
        timings = [row[3] for row in table]
        return self._finish(setup, shape, timings, chunks, compute_free, hold, pp_free, owners)

    def _finish(
        self,
        setup: _Setup,
        shape: ScheduleShape,
        timings: list[ActionTiming],
        chunks: list[Chunk],
        compute_free: list[float],
        hold: list[float],
        pp_free: list[float],
        owners: list[tuple[int, int, float]],
    ) -> tuple[float, list[float], list[float]]:
        """Gradient buckets, the optimizer and the parameter all-gather of every rank."""
        spec, p = setup.spec, setup.spec.parallel
        grad_bytes = GRAD_BYTES[spec.training.grad_reduce_dtype]
        num = len(setup.ranks)
        busy, waited = [0.0] * num, [0.0] * num
        for k, slot in enumerate(shape.slots):
            timing = timings[k]
            busy[slot.rank] += shape.slot_counts[k] * timing.busy_s
            waited[slot.rank] += shape.slot_counts[k] * (timing.compute_end_s - timing.busy_s)
        dp_free, pending, issued = [0.0] * num, [0.0] * num, [False] * num
        elements = [0] * num
        parts = [self._reduce_parts(setup, r) for r in range(num)]
        network = setup.network
        for r, k, start in owners:
            slot = shape.slots[k]
            chunk = chunks[slot.chunk]
            per_layer, total = chunk.source.elements(chunk)
            elements[r] += total
            for layer, layer_end in timings[k].layer_end_s:
                pending[r] += per_layer.get(layer, 0) * grad_bytes
                if setup.hooks[r] and pending[r] >= p.grad_bucket_size_bytes:
                    dp_free[r] = self._reduce(
                        network, parts[r], pending[r], start + layer_end, dp_free[r]
                    )
                    issued[r] = issued[r] or bool(parts[r])
                    pending[r] = 0.0
        step = 0.0
        for r in range(num):
            if pending[r] > 0:
                dp_free[r] = self._reduce(
                    network, parts[r], pending[r], compute_free[r], dp_free[r]
                )
                issued[r] = issued[r] or bool(parts[r])
            shard = self._shard(setup.layout, setup.ranks[r], setup.dp_axis, p)
            factor = len(shard) if p.zero_stage >= 1 else 1
            ready = max(compute_free[r], hold[r])
            begin = max(ready, dp_free[r]) if issued[r] else ready
            optimizer = setup.compute.task_time_s(
                (optimizer_op(elements[r] / factor, spec.training.optimizer),)
            )
            end = begin + optimizer
            busy[r] += optimizer
            waited[r] += begin - ready
            last = max(end, pp_free[r])
            if p.zero_stage in (1, 2) and len(shard) > 1:
                gather = max(end, dp_free[r]) + self._collective_s(
                    setup.network, "all_gather", shard, elements[r] * ACT_BYTES
                )
                waited[r] += max(0.0, gather - max(end, pp_free[r]))
                last = max(last, gather)
            step = max(step, last)
        return step, busy, waited

    def _reduce_parts(self, setup: _Setup, r: int) -> list[tuple[str, tuple[int, ...], float]]:
        """The collectives of one gradient bucket, as the builder's reducer issues them.

        ZeRO 0 all-reduces the bucket over the data-parallel group; ZeRO >= 1 reduce-scatters
        it over the shard group and, under hybrid sharding, all-reduces the shard across the
        groups. Each part is (kind, group, fraction of the bucket's bytes).
        """
        p = setup.spec.parallel
        rank = setup.ranks[r]
        group = self._group(setup.layout, rank, setup.dp_axis, p)
        if len(group) == 1:
            return []
        if p.zero_stage == 0:
            return [("all_reduce", group, 1.0)]
        shard, replica = self._split(group, rank, p.zero_shard_group_size)
        parts = [("reduce_scatter", shard, 1.0)] if len(shard) > 1 else []
        if len(replica) > 1:
            parts.append(("all_reduce", replica, 1.0 / len(shard)))
        return parts

    def _reduce(
        self,
        network: Any,
        parts: list[tuple[str, tuple[int, ...], float]],
        size: float,
        after: float,
        dp_free: float,
    ) -> float:
        """Issue a bucket of ``size`` bytes once ``after``; returns when the stream is free."""
        if size <= 0:
            return dp_free
        for kind, members, fraction in parts:
            dp_free = max(after, dp_free) + self._collective_s(
                network, kind, members, size * fraction
            )
        return dp_free

    # --- slots: one kind of action's timing ---------------------------------------------

    def _slot(
        self, setup: _Setup, slot: Slot, chunks: list[Chunk]
    ) -> tuple[float, float, float, ActionTiming]:
        """(compute end, tail end, transfer time, timing) of a slot's actions from their start."""
        timing = self._slot_timing(setup, slot, chunks)
        p2p_s = 0.0
        if slot.peer >= 0:
            src, dst = setup.ranks[slot.rank], setup.ranks[slot.peer]
            size = setup.p2p_bytes
            key = (id(setup.network), "p2p", src, dst, size)
            p2p_s = self._comm_s.get(key, -1.0)
            if p2p_s < 0:
                p2p_s = self._comm_s[key] = setup.network.p2p_time_s(src, dst, size)
        return timing.compute_end_s, timing.tail_end_s, p2p_s, timing

    def _slot_timing(self, setup: _Setup, slot: Slot, chunks: list[Chunk]) -> ActionTiming:
        """Timing of a slot's chunk action on its rank, shared by all equal-timed ranks."""
        chunk = chunks[slot.chunk]
        rank = setup.ranks[slot.rank]
        hooks = slot.owns_grads and setup.hooks[slot.rank]
        p = setup.spec.parallel
        network = setup.network
        groups = {
            axis: self._group(setup.layout, rank, axis, p)
            for axis in {axis for axis, _, _ in chunk.source.comm_keys(chunk.probe)}
        }
        signature = tuple(
            self._collective_s(network, kind, groups[axis], size)
            for axis, kind, size in chunk.source.comm_keys(chunk.probe)
        )
        models = (id(setup.compute), signature)
        key = (id(chunk.source), chunk.layers, chunk.base, slot.body, hooks, models)
        timing = self._timings.get(key)
        if timing is None:
            compute = setup.compute

            def comm_s(op: Op) -> float:
                return self._collective_s(network, op.comm, groups[op.axis], op.comm_bytes)

            def walker(plan: SegmentPlan) -> ActionTiming:
                walk_key = (id(plan), models)  # plans are cached by their source: stable ids
                done = self._walks.get(walk_key)
                if done is None:
                    done = self._walks[walk_key] = walk(
                        plan, lambda ops: self._task(compute, ops), comm_s
                    )
                return done

            timing = self._timings[key] = chunk.timing(slot.body, hooks, walker)
        return timing

    # --- models, layouts, chunks ------------------------------------------------------

    def _models(self, spec: ExperimentSpec) -> tuple[Any, Any]:
        """The compute and network models ``simulate`` would use, built once per setting."""
        from simtrain.api import check_hardware, compute_model_for, network_model_for

        hardware = json.dumps(
            [spec.cluster.model_dump(mode="json"), spec.training.model_dump(mode="json")],
            sort_keys=True,
        )
        compute = self._compute.get(hardware)
        if compute is None:
            check_hardware(spec)
            compute = self._compute[hardware] = compute_model_for(spec)
        p = spec.parallel
        net_key = json.dumps(
            [hardware, spec.simulation.model_dump(mode="json"),
             [p.tp, p.cp, p.dp, p.pp, p.ep, p.rank_order]],
            sort_keys=True,
        )  # fmt: skip
        network = self._network.get(net_key)
        if network is None:
            network = self._network[net_key] = network_model_for(spec)
        return compute, network

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

    def _group(self, layout: RankLayout, rank: int, axis: str, p: Any) -> tuple[int, ...]:
        """The rank's process group along ``axis``, as the builder resolves it."""
        key = (id(layout), rank, axis, p.zero_shard_group_size)
        group = self._groups.get(key)
        if group is None:
            if axis == SHARD_AXIS:
                dp_axis = "dp-cp" if p.cp > 1 else "dp"
                group = self._shard(layout, rank, dp_axis, p)
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

    def _chunks(self, spec: ExperimentSpec, num_chunks: int) -> list[Chunk]:
        """The experiment's model chunks, their ops shared with every spec of equal ops."""
        ops_key = self._ops_key(spec)
        shard = None
        chunks = []
        for c, layers in enumerate(chunk_layers(spec.model.num_layers, num_chunks)):
            first, last = c == 0, c == num_chunks - 1
            source = self._sources.get((ops_key, first, last))
            if source is None:
                shard = shard or make_shard(spec)
                source = self._sources[(ops_key, first, last)] = ChunkSource(
                    spec, shard, first, last
                )
            chunks.append(Chunk(source, layers, *chunk_base(spec, layers)))
        return chunks

    @staticmethod
    def _ops_key(spec: ExperimentSpec) -> str:
        """What a chunk's ops depend on: everything but scheduling and placement fields."""
        p = spec.parallel
        parallel = {
            k: v for k, v in p.model_dump(mode="json").items() if k not in _SCHEDULING_FIELDS
        }
        parallel["zero3_gathers"] = p.zero_stage == 3 and (p.dp or 1) * p.cp > 1
        return json.dumps(
            [spec.model.model_dump(mode="json"), parallel, spec.training.model_dump(mode="json")],
            sort_keys=True,
        )

    # --- cached model calls -----------------------------------------------------------

    def _task(self, compute: Any, ops: tuple[Op, ...]) -> float:
        """``compute.task_time_s(ops)``, once per ops tuple (plans share their tuples)."""
        key = (id(compute), id(ops))
        cached = self._task_s.get(key)
        if cached is None or cached[0] is not ops:
            cached = self._task_s[key] = (ops, compute.task_time_s(ops))
        return cached[1]

    def _collective_s(self, network: Any, kind: str, group: tuple[int, ...], size: float) -> float:
        key = (id(network), kind, id(group), size)  # groups are cached tuples: ids are stable
        cached = self._comm_s.get(key)
        if cached is None:
            cached = self._comm_s[key] = network.collective_time_s(kind, group, size)
        return cached


def estimate_step(spec: ExperimentSpec) -> StepEstimate:
    """Estimate one step of ``spec`` with a fresh :class:`Estimator` (no shared caches)."""
    return Estimator().estimate(spec)
