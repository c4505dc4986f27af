"""Cut an op sequence into engine tasks: runs of compute ops between communication ops.

Fewer, larger tasks make the engine faster, so consecutive compute ops share one task unless
something needs the boundary: a communication op, a change of phase (compute vs recompute,
kept apart for the time breakdown), or, when ``split_layers`` is set, a change of layer (the
data-parallel gradient buckets hook onto the end of each layer's weight gradients).

A communication op is issued after the compute before it. It blocks the compute after it,
except for the ``overlap_ops`` compute ops that directly follow it: those run while it is in
flight (Megatron's weight-gradient GEMM during the input-gradient all-reduce, a ring-attention
block during the next key/value transfer, a ZeRO-3 layer during the next layer's parameter
all-gather). The first compute op past that window waits for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from simtrain.workload.ops import Op


@dataclass(frozen=True)
class Segment:
    """One future task.

    Attributes:
        ops: the ops of the task (one op for communication).
        is_comm: a communication task (on the op's axis stream) rather than compute.
        waits_for: positions (in the segment list) of communication segments this compute
            segment must wait for.
        layer: layer of the first op.
        layers: the distinct layers of its ops, in order.
    """

    ops: tuple[Op, ...]
    is_comm: bool
    waits_for: tuple[int, ...]
    layer: int
    layers: tuple[int, ...]


@dataclass(frozen=True)
class SegmentPlan:
    """The segments of one op sequence, and the collectives still in flight at its end."""

    segments: tuple[Segment, ...]
    trailing: tuple[int, ...]

    @cached_property
    def streams(self) -> tuple[str, ...]:
        """Per segment, the stream its collective runs on (``<axis>_comm``); "" for compute.

        Computed once per plan: the estimator walks one plan many times.
        """
        return tuple(f"{seg.ops[0].axis}_comm" if seg.is_comm else "" for seg in self.segments)


def segment_ops(ops: Sequence[Op], split_layers: bool) -> SegmentPlan:
    """Cut ``ops`` into segments (see the module docstring)."""
    segments: list[Segment] = []
    buffer: list[Op] = []
    waits: list[int] = []
    pending: dict[int, int] = {}  # comm segment position -> compute ops it still overlaps

    def flush() -> None:
        nonlocal buffer, waits
        if buffer:
            layers = tuple(dict.fromkeys(op.layer for op in buffer))
            segments.append(Segment(tuple(buffer), False, tuple(waits), buffer[0].layer, layers))
            buffer, waits = [], []

    for op in ops:
        if op.is_comm:
            flush()
            pending[len(segments)] = op.overlap_ops
            segments.append(Segment((op,), True, (), op.layer, (op.layer,)))
            continue
        due = [position for position, window in pending.items() if window == 0]
        if due or (
            buffer
            and (op.phase != buffer[0].phase or (split_layers and op.layer != buffer[-1].layer))
        ):
            flush()
        for position in due:
            del pending[position]
        waits += due
        for position in pending:
            pending[position] -= 1
        buffer.append(op)
    flush()
    return SegmentPlan(tuple(segments), tuple(pending))
