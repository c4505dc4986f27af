"""GPipe: every rank runs all forwards, then all backwards (Huang et al. 2019).

Bubble fraction (p-1)/(m+p-1) of the step with equal stage times; every stage stashes the
activations of all m microbatches (``docs/references/pipeline-theory.md`` §9, Narayanan
§2.2.1).
"""

from __future__ import annotations

from simtrain.parallel.schedules.base import Action, RankActions, check_args, register_schedule


@register_schedule("gpipe")
def gpipe(pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """All forwards in microbatch order, then all backwards in the same order.

    Examples:
        >>> [str(a) for a in gpipe(2, 3)[0]]
        ['0F0', '0F1', '0F2', '0B0', '0B1', '0B2']
    """
    check_args(pp, num_microbatches, vpp, name="gpipe")
    m = range(num_microbatches)
    return {
        rank: [Action(rank, "F", j) for j in m] + [Action(rank, "B", j) for j in m]
        for rank in range(pp)
    }
