"""What one estimate works with: its models, placement, settings and shared caches.

:class:`Setup` gathers everything an estimate needs besides the compiled schedule;
:class:`Context` holds the caches that configurations with equal chunks, models, placement
and hooks share; :class:`Paced` runs a compute model at the step's pace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from simtrain.estimator.chunks import Chunk
from simtrain.estimator.gradients import Gradients
from simtrain.estimator.pipeline import Slot
from simtrain.estimator.walk import ActionTiming
from simtrain.parallel.builder import SHARD_AXIS
from simtrain.parallel.layout import RankLayout
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.framework_resolve import all_reduces_grads


@dataclass
class Context:
    """Caches shared by configurations with equal chunks, models, placement and hooks.

    Attributes:
        chunks: the model chunks.
        slots: slot -> (compute end, tail end, transfer time, timing) of its actions.
        grads: (rank's owning slots, ZeRO stage, bucket bytes) -> its gradient reduction.
        signatures: (rank, chunk) -> (models key, groups by axis, collective seconds) of the
            chunk on the rank (``Estimator._signature``).
        reductions: (gradient key, reducing action, next action, bytes pending) -> its
            buckets (``Estimator._reduction``).
        tables: schedule shape key -> its slots' rows and per-rank busy and waited sums
            (``Estimator._table``).
    """

    chunks: list[Chunk]
    slots: dict[Slot, tuple[float, float, float, ActionTiming]] = field(default_factory=dict)
    grads: dict[tuple[Any, ...], Gradients] = field(default_factory=dict)
    signatures: dict[tuple[int, int], Any] = field(default_factory=dict)
    reductions: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict)
    tables: dict[tuple[Any, ...], tuple[list[Any], tuple[float, ...], tuple[float, ...]]] = field(
        default_factory=dict
    )


@dataclass(frozen=True)
class Paced:
    """A compute model whose device times run at a step's pace (the slowest rank's factor).

    The engine multiplies every compute task of a rank by that rank's speed factor, and the
    ranks of a step wait for the slowest at every collective; the estimator uses the median
    factor of the slowest rank of the world (:func:`median_slowest_factor`). Host issue
    times are not paced, as in the engine.
    """

    model: Any
    pace: float

    def task_time_s(self, ops: Any, contended: bool = False) -> float:
        """The model's device seconds of ``ops``, at the step's pace."""
        return self.model.task_time_s(ops, contended=contended) * self.pace

    def host_time_s(self, ops: Any) -> float:
        """The model's host seconds to issue ``ops`` (not paced)."""
        return self.model.host_time_s(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@dataclass
class Setup:
    """Everything one estimate needs besides the compiled schedule ."""

    spec: ExperimentSpec
    compute: Any
    network: Any
    layout: RankLayout
    ranks: list[int]
    dp_axis: str
    hooks: list[bool]
    p2p_bytes: float
    context: Context
    zero_stage: int
    profile: Any
    fp8_recipe: str
    host: bool = False
    sync_on_p2p: bool = False
    per_collective_s: float = 0.0
    contended: bool = False
    blocking_sends: bool = False

    def host_syncs(self, shape: Any) -> tuple[bool, ...]:
        """Per slot of ``shape``, whether the host waits for the device before its action.

        The builder's rule (:attr:`Task.host_sync`): the first and last chunks' forwards when
        the stack reads each batch's shapes on the host, the last chunk's backward when it
        reads the loss; empty when neither (or no host stream is modelled).
        """
        batch, loss = self.profile.syncs_on_batch_load, self.profile.syncs_on_loss
        if not self.host or not (batch or loss):
            return ()
        last = shape.num_chunks - 1
        return tuple(
            (batch and body in ("forward", "first_forward") and chunk in (0, last))
            or (loss and body in ("backward", "backward_input") and chunk == last)
            for body, chunk in ((getattr(s, "body", ""), s.chunk) for s in shape.slots)
        )

    @cached_property
    def all_reduces_grads(self) -> bool:
        """Each gradient bucket is all-reduced (:func:`all_reduces_grads`, the builder's rule)."""
        return all_reduces_grads(self.spec)

    @cached_property
    def every_mb(self) -> bool:
        """The stack reduces sharded gradients after every microbatch's backward."""
        return self.zero_stage >= 2 and self.profile.sharding.reduce_every_microbatch

    @cached_property
    def bucket_stream(self) -> str | None:
        """The stream the gradient buckets share with the backward's parameter gathers.

        ZeRO-3 reduce-scatters and gathers over the shard group's one communicator unless
        the stack gives the reduce-scatters a group of their own (as the builder's reducer);
        None: the buckets' stream holds nothing else of the action.
        """
        if self.zero_stage == 3 and not self.profile.sharding.separate_reduce_scatter_group:
            return f"{SHARD_AXIS}_comm"
        return None

    @cached_property
    def grad_key(self) -> tuple[Any, ...]:
        """What a rank's gradient reduction depends on besides its actions and context.

        The ZeRO stage enters only through what the reducer does with it (all-reduce or
        reduce-scatter, per-unit buckets, buckets after every microbatch, the parameter
        gather after the optimizer), so stages that reduce alike (ZeRO-1 and ZeRO-2 on a
        stack that gathers after the optimizer and reduces once per step) share reductions.
        """
        p, stage = self.spec.parallel, self.zero_stage
        return (self.all_reduces_grads, stage == 3, self.every_mb, self.gathers_after_optimizer,
                p.grad_bucket_size_bytes, p.overlap_replica_grad_reduce,
                self.spec.training.grad_reduce_dtype, self.bucket_stream)  # fmt: skip

    @cached_property
    def gathers_after_optimizer(self) -> bool:
        """The updated parameters are all-gathered once after the optimizer step.

        ZeRO-1 does; so does ZeRO-2 on a stack that does not gather them layer by layer in
        the next forward.
        """
        stage = self.zero_stage
        return stage == 1 or (
            stage == 2 and self.profile.sharding.zero2_param_gather == "after_optimizer"
        )


def issues_from_host(compute: Any) -> bool:
    """Whether issuing kernels costs the host anything (the engine's rule for a host stream)."""
    cost = getattr(compute, "host", None)
    return cost is not None and (cost.per_kernel_s > 0 or cost.per_collective_s > 0)
