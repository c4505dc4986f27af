"""Step times the estimate never beats, for searches that skip what cannot win.

:func:`bound_lines` needs the chunks' compute alone
(:meth:`simtrain.estimator.step.Estimator.lower_bound`): a search orders its layouts by it
and stops once the best it keeps is out of reach (:mod:`simtrain.sweep.plan_search`).
:func:`walked_bound` needs the actions' walks, the first half of an estimate
(:meth:`~simtrain.estimator.step.Estimator.estimate_within`): it skips the second half
(chain, gradient reduction) of a layout that cannot enter the best kept.
"""

from __future__ import annotations

from typing import Any

from simtrain.estimator.chunks import BODIES, Chunk
from simtrain.estimator.pipeline import ScheduleShape


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


def walked_bound(shape: ScheduleShape, rows: list[Any], num_ranks: int) -> float:
    """The busiest rank's actions back to back, each as long as its walk's compute end.

    A rank's actions run one after another on its compute stream, and each takes at least
    its walk's compute end (``rows``: the slots' rows, compute end first; the chain starts
    an action no earlier than the previous one's end, and the host, transfers and
    interference only delay it), so a step chained in full is no shorter than the longest
    such sum over the ranks (their optimizer steps and gradient reductions come after).
    For schedules without paired steps.
    """
    per_rank = [0.0] * num_ranks
    for row, slot, count in zip(rows, shape.slots, shape.slot_counts, strict=True):
        per_rank[slot.rank] += count * row[0]
    return max(per_rank)
