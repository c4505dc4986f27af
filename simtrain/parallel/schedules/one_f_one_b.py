"""1F1B (PipeDream-Flush): warm up with forwards, then alternate one forward, one backward.

Rank i (0-based) runs ``min(p-1-i, m)`` warm-up forwards, then pairs (F, B) while forwards
remain, then the remaining backwards. Same bubble as GPipe, (p-1)/(m+p-1), but stage i holds at
most p-i microbatches' activations instead of m (Narayanan §2.2.1;
``docs/references/pipeline-theory.md`` §9: "stage i holds p−i+1", 1-based).
"""

from __future__ import annotations

from simtrain.parallel.schedules.base import Action, RankActions, check_args, register_schedule


def one_f_one_b_rank(
    rank: int, pp: int, num_microbatches: int, extra_warmup: int = 0
) -> list[Action]:
    """The 1F1B action list of one rank (stage = rank).

    ``extra_warmup`` more forwards before the first backward make every steady-state forward
    independent of the backward after it, so the two can overlap (Megatron-Core's combined
    1F1B, one more microbatch in flight).

    Examples:
        >>> [str(a) for a in one_f_one_b_rank(0, 2, 3)]
        ['0F0', '0F1', '0B0', '0F2', '0B1', '0B2']
        >>> [str(a) for a in one_f_one_b_rank(0, 1, 3, extra_warmup=1)]
        ['0F0', '0F1', '0B0', '0F2', '0B1', '0B2']
    """
    m = num_microbatches
    warmup = min(pp - 1 - rank + extra_warmup, m)
    actions = [Action(rank, "F", j) for j in range(warmup)]
    for j in range(m - warmup):
        actions += [Action(rank, "F", warmup + j), Action(rank, "B", j)]
    actions += [Action(rank, "B", j) for j in range(m - warmup, m)]
    return actions


@register_schedule("1f1b")
def one_f_one_b(pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """1F1B action lists for every rank."""
    check_args(pp, num_microbatches, vpp, name="1f1b")
    return {rank: one_f_one_b_rank(rank, pp, num_microbatches) for rank in range(pp)}
