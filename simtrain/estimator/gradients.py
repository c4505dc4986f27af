"""The data-parallel gradient reduction of a step: buckets, optimizer, parameter gather.

The builder's reducer (``simtrain.parallel.builder._GradientReducer``) replayed on sizes: a
reducing action issues a bucket once its layers' gradients fill one, on the rank's gradient
stream; the buckets slow the compute they overlap by the engine's interference rule; the
optimizer step waits for the reduction, and ZeRO-1/2 stacks gather the parameters after it.
:class:`GradientReduction` works out a rank's buckets (:meth:`GradientReduction._grads`) and
:class:`Gradients` places them on the rank's timeline once the schedule is chained.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from simtrain.engine.host import issue_profile, op_readiness
from simtrain.estimator.chain import Mark
from simtrain.estimator.chunks import Chunk
from simtrain.estimator.pipeline import PairSlot, ScheduleShape, Slot
from simtrain.estimator.walk import NO_HOST, ActionTiming
from simtrain.specs.framework import GRAD_REDUCE_BYTES
from simtrain.workload.linear import weight_cast_op
from simtrain.workload.ops import Op
from simtrain.workload.optimizers import optimizer_op
from simtrain.workload.primitives import ACT_BYTES

if TYPE_CHECKING:
    from simtrain.estimator.setup import Setup

Flush = tuple[float | None, float, float, float, float, float]
"""One gradient bucket: (offset of the layer that fills it from its action's start, or None
for a flush at the action's end; the host's share of that offset (``max(a, x + b)``, see
:mod:`simtrain.estimator.walk`); the received gradients' share (``y + c`` in a paired step,
:mod:`simtrain.estimator.pairs`; ``NO_HOST`` otherwise); seconds on the gradient stream;
seconds of the cross-group all-reduce when it runs on a stream of its own, else 0; whether
it issues anything (1/0))."""

UNKNOWN_NEXT = "unknown"
"""The next action of a reducing action when the rank's orders disagree (``Estimator._grads``)."""


class Gradients(NamedTuple):
    """One rank's gradient reduction, optimizer step and parameter gather.

    A named tuple rather than a dataclass: built once per rank of every configuration
    whose reduction differs, without a Python-level ``__init__``.

    The buckets are fixed by sizes alone; :meth:`finish` places them in time, as the
    builder's ``_GradientReducer`` issues them on the rank's gradient streams.

    Attributes:
        actions: per action that reduces gradients (``positions``), its buckets.
        tail: the last bucket, issued after the rank's last compute.
        optimizer_s: seconds of the optimizer step (with the FP8 weight cast).
        gather_s: seconds of the parameter all-gather after it (0: none).
        optimizer_host_s: host seconds before the optimizer can start once the host reaches
            it (``op_readiness`` of its ops; 0 without a host stream).
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

        slowdowns, trailing = self.slowdowns, self.trailing
        for n, i in enumerate(self.positions):
            start, end, x, y = marks[i]
            sigma = slowdowns[n] if slowdowns else 0.0
            walked = bool(trailing) and trailing[n] >= 0  # priced in the chain
            # max and min spelled out (``b if b > a else a`` is max(a, b)): this runs for
            # every bucket of every reducing action
            for offset, host, received, grad_s, replica_s, issues in self.actions[n]:
                if not issues:
                    continue
                if offset is None:
                    after = end
                else:
                    if x + host > offset:
                        offset = x + host
                    if y + received > offset:
                        offset = y + received
                    after = start + offset
                done = after
                if grad_s:
                    free = grad_free if grad_free > after else after
                    begin = end if end > free else free  # its own action: priced inside
                    done = grad_free = free + grad_s
                    if sigma and not walked and compute_free > begin < done:
                        slowed += sigma * ((compute_free if compute_free < done else done) - begin)
                if replica_s:  # not overlapped: after the backward, on a stream of its own
                    begin = end if end > done else done
                    if replica_free > begin:
                        begin = replica_free
                    done = replica_free = begin + replica_s
                    if sigma and compute_free > begin:
                        slowed += sigma * ((compute_free if compute_free < done else done) - begin)
                if done > reduced:
                    reduced = done
                issued = True
        _, _, _, grad_s, replica_s, issues = self.tail  # after the rank's last compute
        if issues:
            done = compute_free
            if grad_s:
                done = grad_free = max(compute_free, grad_free) + grad_s
            if replica_s:
                begin = max(done, compute_free, replica_free)
                done = replica_free = begin + replica_s
            reduced, issued = max(reduced, done), True
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


def every_layer(buckets: tuple[tuple[int, float], ...], num_layers: int) -> bool:
    """Every transformer layer issues one bucket, all but the first alike.

    Such a chunk's buckets can be walked on its samples (see ``Estimator._timing``).
    """
    layered = [seconds for layer, seconds in buckets if 0 <= layer < num_layers]
    placed = {layer for layer, _ in buckets if 0 <= layer < num_layers}
    return len(layered) == len(placed) == num_layers and len(set(layered[1:])) <= 1


def sample_buckets(
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


class GradientReduction:
    """The gradient reduction of :class:`~simtrain.estimator.step.Estimator` (a mixin).

    Uses the estimator's caches and timings: ``_timing``, ``_group``, ``_split``,
    ``_collective_s`` and ``_follow``.
    """

    _timing: Callable[..., ActionTiming | None]
    _group: Callable[..., tuple[int, ...]]
    _split: Callable[..., tuple[tuple[int, ...], tuple[int, ...]]]
    _collective_s: Callable[..., float]
    _follow: dict[tuple[Any, ...], tuple[tuple[Slot | PairSlot | None, ...], ...]]
    _steps: dict[tuple[Any, ...], tuple[float, float]]

    def _grads(
        self,
        setup: Setup,
        r: int,
        actions: tuple[Slot, ...],
        following: tuple[Slot | PairSlot | None, ...] = (),
    ) -> Gradients:
        """The rank's gradient buckets, optimizer and parameter gather (see :class:`Gradients`).

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

        A reducing action's buckets slow its own compute after them (:attr:`Gradients.inside`)
        and, when still in flight at its end, the start of the rank's next action
        (``following``: the action after each of ``actions``; :attr:`Gradients.trailing`),
        both walked by the engine's rule.
        """
        p = setup.spec.parallel
        rank, network, stage = setup.ranks[r], setup.network, setup.zero_stage
        group = self._group(setup.layout, rank, setup.dp_axis, p)
        shard, replica = self._split(group, rank, p.zero_shard_group_size)
        every_mb = setup.every_mb
        overlap_replica = p.overlap_replica_grad_reduce is not False
        durations: dict[float, Flush] = {}
        # seconds a bucket holds the stream it shares with the gathers (its reduce-scatter;
        # the all-reduce across shard groups runs on a stream of its own)
        walked_s: dict[float, float] = {}

        def bucket(size: float) -> Flush:
            found = durations.get(size)
            if found is None:
                grad_s = replica_s = 0.0
                issues = size > 0 and len(group) > 1
                if issues and setup.all_reduces_grads:
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
            return found

        flushes: list[tuple[Flush, ...]] = []
        slowdowns: list[float] = []
        inside: list[float] = []
        inside_host: list[float] = []
        trailing: list[float] = []
        pending, elements, fp8_elements = 0.0, 0, 0
        positions = (
            range(len(actions))
            if every_mb
            else [i for i, slot in enumerate(actions) if slot.owns_grads]
        )
        # Equal reducing actions with equal bytes pending before them reduce alike (every
        # microbatch's backward of a chunk under ZeRO >= 2 every-microbatch stacks, the same
        # owning actions at the reduced microbatch counts): their buckets are worked out once
        # per context and reused.
        known, grad_key = setup.context.reductions, setup.grad_key
        for i in positions:  # the others reduce nothing
            slot = actions[i]
            nxt = following[i] if i < len(following) else UNKNOWN_NEXT
            key = (grad_key, slot, nxt, pending)
            done = known.get(key)
            if done is None:
                done = known[key] = self._reduction(setup, r, slot, nxt, pending, bucket, walked_s)
            found, sigma, extra, extra_host, after, pending = done
            if slot.owns_grads:
                chunk = setup.context.chunks[slot.chunk]
                _, total, fp8 = chunk.source.elements(chunk)
                elements += total
                fp8_elements += fp8
            slowdowns.append(sigma)
            flushes.append(found)
            inside.append(extra)
            inside_host.append(extra_host)
            trailing.append(after)
        factor = len(shard) if stage >= 1 else 1
        gather = 0.0
        if setup.gathers_after_optimizer and len(shard) > 1:
            gather = self._collective_s(network, "all_gather", shard, elements * ACT_BYTES)
        optimizer_s, optimizer_host_s = self._optimizer_step(setup, elements / factor, fp8_elements)
        slowed = any(inside) or any(inside_host)  # any reducing action's own buckets add time
        return Gradients(
            actions=tuple(flushes),
            positions=tuple(positions),
            tail=bucket(pending),
            optimizer_s=optimizer_s,
            gather_s=gather,
            optimizer_host_s=optimizer_host_s,
            slowdowns=tuple(slowdowns) if any(slowdowns) else (),
            inside=tuple(inside) if slowed else (),
            inside_host=tuple(inside_host) if slowed else (),
            trailing=tuple(trailing) if any(x >= 0 for x in trailing) else (),
        )

    def _optimizer_step(
        self, setup: Setup, local_elements: float, fp8_elements: int
    ) -> tuple[float, float]:
        """(seconds, host seconds before it can start) of a rank's optimizer step, cached.

        The step updates ``local_elements`` parameters (and refreshes the FP8 weight copies
        of ``fp8_elements``); with a host stream, the host's lead before it is
        ``op_readiness`` of its ops (a parameter gather after it is issued after them).
        Ranks and configurations with equal sizes on one compute model share it.
        """
        training = setup.spec.training
        key = (id(setup.compute), local_elements, fp8_elements, training.optimizer,
               setup.fp8_recipe, setup.host)  # fmt: skip
        found = self._steps.get(key)
        if found is None:
            step: tuple[Op, ...] = (optimizer_op(local_elements, training.optimizer),)
            if fp8_elements:  # the FP8 weight copies are refreshed once per step
                step += (weight_cast_op(fp8_elements, setup.fp8_recipe),)
            optimizer_s = setup.compute.task_time_s(step)
            optimizer_host_s = 0.0
            if setup.host:
                optimizer_host_s = op_readiness(issue_profile(step, setup.compute), optimizer_s)
            found = self._steps[key] = (optimizer_s, optimizer_host_s)
        return found

    def _reduction(
        self,
        setup: Setup,
        r: int,
        slot: Slot | PairSlot,
        nxt: Slot | PairSlot | str | None,
        pending: float,
        bucket: Callable[[float], Flush],
        walked_s: dict[float, float],
    ) -> tuple[tuple[Flush, ...], float, float, float, float, float]:
        """One reducing action's buckets (a step of :meth:`_grads`).

        ``nxt``: the rank's next action (None: none; :data:`UNKNOWN_NEXT`: the orders disagree);
        ``pending``: gradient bytes not yet in a bucket before it; ``bucket``: the
        :data:`Flush` of a bucket of those bytes at the action's end (cached; a layer's
        takes its offsets); ``walked_s``: seconds a bucket of those bytes holds a stream
        shared with the gathers (filled by ``bucket``). Returns its
        buckets, its compute's slowdown under a collective, :attr:`Gradients.inside` and
        ``inside_host``, :attr:`Gradients.trailing` and the bytes pending after it.
        """
        spec = setup.spec
        grad_bytes = GRAD_REDUCE_BYTES[spec.training.grad_reduce_dtype]
        per_unit = setup.zero_stage == 3 and (
            setup.profile.sharding.reduce_scatter_granularity == "per_unit"
        )
        bucket_bytes = 1 if per_unit else spec.parallel.grad_bucket_size_bytes
        every_mb, shared = setup.every_mb, setup.bucket_stream is not None
        chunk = setup.context.chunks[slot.chunk]
        per_layer = chunk.source.elements(chunk)[0]
        timing = setup.context.slots[slot][-1]
        sigma = timing.slowdown if setup.contended else 0.0
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
                sized = bucket(pending)
                found.append((layer_end, host_end, recv_end, sized[3], sized[4], sized[5]))
                where.append(j)
                if sized[5]:
                    issued.append((layer, walked_s[pending] if shared else sized[3]))
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
                        extra_host = max(0.0, slowed.compute_end_host_s - timing.compute_end_host_s)
                    ends, host_ends = slowed.layer_end_s, slowed.layer_end_host_s
                    for n, j in enumerate(where):
                        found[n] = (ends[j][1], host_ends[j], *found[n][2:])
                    left = list(slowed.trailing_s)
            elif not found:
                left = []
        if left is not None:
            final = bucket(pending)[3] if every_mb and pending > 0 else 0.0
            if final > 0:  # flushed at its end, after the others
                begin = left[-1][1] if left else 0.0
                left.append((begin, begin + final))
            after = self._trailing(setup, nxt, left)
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
            found.append(bucket(pending))
            pending = 0.0
        host_extra = extra if extra_host is None else extra_host
        return tuple(found), sigma, extra, host_extra, after, pending

    def _trailing(
        self,
        setup: Setup,
        nxt: Slot | PairSlot | str | None,
        left: list[tuple[float, float]],
    ) -> float:
        """Compute seconds the buckets ``left`` in flight by a reducing action add to the next.

        The rank's next action ``nxt`` is walked with them in flight from its start (it
        starts as the reducing action ends); 0 when nothing follows on the rank (None); -1
        (priced in :meth:`Gradients.finish`) when a paired step follows or the order is
        unknown (:data:`UNKNOWN_NEXT`).
        """
        if not left:
            return 0.0
        if nxt is None:
            return 0.0
        if isinstance(nxt, (PairSlot, str)):
            return -1.0
        chunks = setup.context.chunks
        base = setup.context.slots[nxt][-1]
        slowed = self._timing(setup, nxt, chunks, incoming=tuple(left))
        if slowed is None:
            return -1.0
        return max(0.0, slowed.compute_end_s - base.compute_end_s)

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
