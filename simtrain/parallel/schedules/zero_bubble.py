"""Zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., ICLR 2024, arXiv:2401.10241, §3).

The backward is split into B (input gradient, on the critical path between stages) and W (weight
gradient, needed only by the optimizer step), and the Ws fill the pipeline bubbles. The two
handcrafted schedules differ only in how many microbatches a rank may hold in flight (forward
done, B not yet done):

- ZB-H1: rank i (0-based) holds at most p-i, as in 1F1B, so memory stays at p·M_B on the first
  stage; bubble time (p-1)(T_F+T_B-T_W), a third of 1F1B's when T_F = T_B = T_W.
- ZB-H2: rank i holds at most 2(p-i)-1, so the first stage holds 2p-1 microbatches and the
  warm-up bubble fills with extra forwards (``docs/references/pipeline-theory.md`` §9, ZB Table 2).

Both are built the same way: a list scheduler steps through unit-time slots (the ZB paper's
T_F = T_B = T_W setting) and each rank picks, in this order of priority, the next B whose inputs
are ready, else the next F when ready and under its in-flight limit, else the oldest pending W.
The resulting per-rank order is the schedule; run with other durations, it keeps that order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from simtrain.parallel.schedules.base import (
    Action,
    ActionKind,
    RankActions,
    check_args,
    register_schedule,
)


def _greedy_split_backward(
    pp: int, num_microbatches: int, inflight_limit: Callable[[int], int]
) -> RankActions:
    """Unit-time list scheduling with B > F > W priority and a per-rank in-flight limit."""
    m = num_microbatches
    finish: dict[tuple[int, ActionKind, int], int] = {}
    next_f, next_b = [0] * pp, [0] * pp
    pending_w: list[deque[int]] = [deque() for _ in range(pp)]
    actions: RankActions = {rank: [] for rank in range(pp)}

    def ready(key: tuple[int, ActionKind, int], now: int) -> bool:
        return finish.get(key, now + 1) <= now

    now = 0
    while any(len(acts) < 3 * m for acts in actions.values()):
        for r in range(pp):
            j_b, j_f = next_b[r], next_f[r]
            if (
                j_b < j_f
                and ready((r, "F", j_b), now)
                and (r == pp - 1 or ready((r + 1, "B", j_b), now))
            ):
                action = Action(r, "B", j_b)
                next_b[r] += 1
                pending_w[r].append(j_b)
            elif (
                j_f < m
                and j_f - j_b < inflight_limit(r)
                and (r == 0 or ready((r - 1, "F", j_f), now))
            ):
                action = Action(r, "F", j_f)
                next_f[r] += 1
            elif pending_w[r]:
                action = Action(r, "W", pending_w[r].popleft())
            else:
                continue
            actions[r].append(action)
            finish[(action.stage, action.kind, action.microbatch)] = now + 1
        now += 1
    return actions


@register_schedule("zb-h1")
def zb_h1(pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """ZB-H1: 1F1B memory (p-i in flight on rank i), Ws deferred into the bubbles.

    Examples:
        >>> [" ".join(str(a) for a in acts) for acts in zb_h1(2, 2).values()]
        ['0F0 0F1 0B0 0W0 0B1 0W1', '1F0 1B0 1F1 1B1 1W0 1W1']
    """
    check_args(pp, num_microbatches, vpp, name="zb-h1")
    return _greedy_split_backward(pp, num_microbatches, lambda r: pp - r)


@register_schedule("zb-h2")
def zb_h2(pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """ZB-H2: up to 2(p-i)-1 microbatches in flight on rank i, filling the warm-up bubble."""
    check_args(pp, num_microbatches, vpp, name="zb-h2")
    return _greedy_split_backward(pp, num_microbatches, lambda r: 2 * (pp - r) - 1)
