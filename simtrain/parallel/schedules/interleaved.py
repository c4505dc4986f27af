"""Interleaved 1F1B (Narayanan et al. 2021 §2.2.2): v model chunks per rank.

Rank r holds chunks c = 0..v-1, the virtual stages ``c * p + r``, so a microbatch visits every
rank v times. The order is Megatron-LM's (``forward_backward_pipelining_with_interleaving``):
the k-th forward of a rank runs chunk ``(k // p) % v`` of microbatch ``(k // (p*v)) * p + k % p``
(microbatches advance in groups of p, chunk by chunk); the k-th backward runs the same
microbatch on chunk ``v - 1 - (k // p) % v``. Rank r warms up with ``2(p-1-r) + (v-1)p``
forwards (at most all v·m of them), then alternates one forward and one backward.

With equal stage times the bubble fraction is (p-1)/(v*m+p-1), activation memory on the first
rank grows by (1 + (p-1)/(p*v)) over 1F1B (Korthikanti §4.2.3), and m must be a multiple of p
(``docs/references/pipeline-theory.md`` §9).
"""

from __future__ import annotations

from simtrain.errors import SpecError
from simtrain.parallel.schedules.base import Action, RankActions, check_args, register_schedule
from simtrain.parallel.schedules.one_f_one_b import one_f_one_b


def _microbatch(k: int, pp: int, vpp: int) -> int:
    return (k // (pp * vpp)) * pp + k % pp


def interleaved_rank(rank: int, pp: int, num_microbatches: int, vpp: int) -> list[Action]:
    """The interleaved-1F1B action list of one rank (``stage`` is the virtual stage).

    Examples:
        >>> " ".join(str(a) for a in interleaved_rank(1, pp=2, num_microbatches=4, vpp=2))
        '1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3'
    """
    total = vpp * num_microbatches
    warmup = min(total, 2 * (pp - 1 - rank) + (vpp - 1) * pp)

    def forward(k: int) -> Action:
        chunk = (k // pp) % vpp
        return Action(chunk * pp + rank, "F", _microbatch(k, pp, vpp))

    def backward(k: int) -> Action:
        chunk = vpp - 1 - (k // pp) % vpp
        return Action(chunk * pp + rank, "B", _microbatch(k, pp, vpp))

    actions = [forward(k) for k in range(warmup)]
    for k in range(total - warmup):
        actions += [forward(warmup + k), backward(k)]
    actions += [backward(k) for k in range(total - warmup, total)]
    return actions


@register_schedule("interleaved")
def interleaved(pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """Interleaved 1F1B action lists; with ``vpp == 1`` this is plain 1F1B.

    Raises:
        SpecError: ``num_microbatches`` is not a multiple of ``pp`` while ``vpp > 1``.
    """
    check_args(pp, num_microbatches, vpp, name="interleaved", allow_vpp=True)
    if vpp == 1:
        return one_f_one_b(pp, num_microbatches)
    if num_microbatches % pp:
        raise SpecError(
            f"'num_microbatches' must be a multiple of 'pp'={pp} for the interleaved schedule "
            f"with vpp={vpp} (got {num_microbatches})"
        )
    return {rank: interleaved_rank(rank, pp, num_microbatches, vpp) for rank in range(pp)}
