"""Memory on the timeline: a rank's bytes over a simulated step, from the engine's task times.

Model states and buffers are held for the whole step; each (stage, microbatch) allocates its
activations over its forward tasks and frees them over its backward (input-gradient) tasks. So
the peak follows from the schedule as the engine actually ran it; for a replay that keeps the
schedule's order it equals :func:`~simtrain.memory.estimate.estimate_memory`'s peak.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from simtrain.memory.estimate import MemoryEstimate
from simtrain.parallel.program import Program
from simtrain.parallel.schedule_timing import task_action


def memory_timeline(
    program: Program,
    start_s: Sequence[float],
    end_s: Sequence[float],
    rank: int,
    estimate: MemoryEstimate,
) -> list[tuple[float, float]]:
    """Bytes in use on ``rank`` after each allocation or free, as (time_s, bytes).

    The activations of a (stage, microbatch) grow over its forward and shrink over its
    backward: each of its forward tasks allocates an equal share when it starts, each of its
    input-gradient tasks frees an equal share when it ends (per-op programs have one task per
    operator, so the curve rises and falls layer by layer; an abstract schedule program has one
    task per action and steps by whole microbatches). Weight-gradient tasks hold nothing more.

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
    forwards: dict[tuple[int, int], list[float]] = defaultdict(list)
    backwards: dict[tuple[int, int], list[float]] = defaultdict(list)
    for i, task in enumerate(program.tasks):
        action = task_action(task) if task.rank == rank else None
        if action is None or action.kind == "W":
            continue
        key = (action.stage, action.microbatch)
        if action.kind == "F":
            forwards[key].append(float(start_s[i]))
        else:
            backwards[key].append(float(end_s[i]))
    chunk = estimate.chunk_activation_bytes
    events = []
    for key, starts in forwards.items():
        events += [(s, chunk / len(starts)) for s in starts]
        frees = backwards.get(key, [])
        events += [(e, -chunk / len(frees)) for e in frees]
    timeline, in_use = [(0.0, static)], 0.0
    # At equal times frees come first: a backward that ends as the next forward starts never
    # holds both microbatches.
    for time_s, delta in sorted(events):
        in_use += delta
        timeline.append((time_s, static + in_use))
    return timeline
