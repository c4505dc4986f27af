"""A step time the estimate never beats, from the chunks' compute alone (for searches).

:meth:`simtrain.estimator.step.Estimator.lower_bound` uses it: a search skips the layouts
whose bound is already worse than the best it keeps (:mod:`simtrain.sweep.plan_search`).
"""

from __future__ import annotations

from typing import Any

from simtrain.estimator.chunks import BODIES, Chunk


def bound_lines(
    chunks: list[Chunk], compute: Any, name: str, pp: int
) -> tuple[tuple[float, float], ...]:
    """Per pipeline rank, the compute on its critical path as (fixed, per microbatch).

    Each pipeline rank runs its actions one after another on its compute stream, and an
    action's compute ends no earlier than the sum of its compute tasks (``busy``). The
    rank's first action waits for the first forward of every earlier stage; under 1F1B and
    the interleaved schedule its last action is a backward of its first stage, whose
    gradients still pass the backward of every earlier stage. In unpaced seconds
    (``compute`` is the model without the step's pace); ``name`` is the schedule.
    """
    first, forward, backward = [], [], []
    for chunk in chunks:
        busy = {body: chunk.source.busy(chunk, body, compute) for body in BODIES}
        first.append(min(busy["first_forward"], busy["forward"]))
        forward.append(busy["forward"])
        split = busy["backward_input"] + busy["weight"]
        backward.append(min(busy["backward"], split))
    lines = []
    for r in range(pp):
        if name == "dualpipe":  # rank r holds stage r (down) and stage pp-1-r (up)
            held = (r, pp - 1 - r)
            fixed = sum(first[c] - forward[c] for c in held)
            lines.append((fixed, sum(forward[c] + backward[c] for c in held) / 2))
            continue
        held = tuple(range(r, len(chunks), pp))
        fixed = sum(first[c] - forward[c] for c in held) + sum(first[:r])
        if name in ("1f1b", "interleaved"):
            fixed += sum(backward[:r])
        lines.append((fixed, sum(forward[c] + backward[c] for c in held)))
    return tuple(lines)
