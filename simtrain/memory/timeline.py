"""Memory on the timeline: a rank's bytes over a simulated step, from the engine's task times.

Model states and buffers are held for the whole step; each (stage, microbatch) allocates its
layers' activations when its first forward task starts and frees them when its last backward
(input-gradient) task ends (:func:`~simtrain.parallel.schedule_timing.inflight_intervals`). So
the peak follows from the schedule as the engine actually ran it; for a replay that keeps the
schedule's order it equals :func:`~simtrain.memory.estimate.estimate_memory`'s peak.
"""

from __future__ import annotations

from collections.abc import Sequence

from simtrain.memory.estimate import MemoryEstimate
from simtrain.parallel.program import Program
from simtrain.parallel.schedule_timing import inflight_intervals


def memory_timeline(
    program: Program,
    start_s: Sequence[float],
    end_s: Sequence[float],
    rank: int,
    estimate: MemoryEstimate,
) -> list[tuple[float, float]]:
    """Bytes in use on ``rank`` after each allocation or free, as (time_s, bytes).

    Args:
        program: the replayed program (compute tasks labelled with their action, ``0F3``).
        start_s: engine start time of each task.
        end_s: engine end time of each task.
        rank: global rank to follow.
        estimate: the memory estimate of the rank's pipeline stage (static bytes and the
            activation bytes of one (stage, microbatch)).
    """
    layers = estimate.breakdown_bytes.get("activations.layers", 0.0)
    static = estimate.peak_bytes - layers
    events = []
    for alloc_s, free_s in inflight_intervals(program, start_s, end_s, rank).values():
        events += [(alloc_s, 1), (free_s, -1)]
    timeline, count = [(0.0, static)], 0
    for time_s, delta in sorted(events):
        count += delta
        timeline.append((time_s, static + count * estimate.chunk_activation_bytes))
    return timeline
