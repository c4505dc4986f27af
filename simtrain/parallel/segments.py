"""Cut an op sequence into engine tasks: runs of compute ops between communication ops.

Fewer, larger tasks make the engine faster, so consecutive compute ops share one task unless
something needs the boundary: a communication op, a change of phase (compute vs recompute,
kept apart for the time breakdown), or, when ``split_layers`` is set, a change of layer (the
data-parallel gradient buckets hook onto the end of each layer's weight gradients).

A communication op blocks the compute after it, except that weight-gradient ops directly
after an input-gradient collective run concurrently with it (Megatron's asynchronous
tensor-parallel communication); the first compute segment that is not a weight gradient
waits for the pending collectives (``waits_for_comm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simtrain.workload.ops import Op


@dataclass(frozen=True)
class Segment:
    """One future task.

    Attributes:
        ops: the ops of the task (one op for communication).
        is_comm: a communication task (on the op's axis stream) rather than compute.
        waits_for_comm: a compute task that must wait for the collectives issued before it.
        layer: layer of the first op.
    """

    ops: tuple[Op, ...]
    is_comm: bool
    waits_for_comm: bool
    layer: int


def segment_ops(ops: Sequence[Op], split_layers: bool) -> tuple[Segment, ...]:
    """Cut ``ops`` into segments (see the module docstring)."""
    segments: list[Segment] = []
    buffer: list[Op] = []
    pending_comm = False
    waits = False

    def flush() -> None:
        nonlocal buffer, waits
        if buffer:
            segments.append(Segment(tuple(buffer), False, waits, buffer[0].layer))
            buffer, waits = [], False

    for op in ops:
        if op.is_comm:
            flush()
            segments.append(Segment((op,), True, False, op.layer))
            pending_comm = True
            continue
        if buffer and (
            op.phase != buffer[0].phase or (split_layers and op.layer != buffer[-1].layer)
        ):
            flush()
        if pending_comm and op.phase != "bwd_weight":
            flush()
            waits, pending_comm = True, False
        buffer.append(op)
    flush()
    return tuple(segments)
