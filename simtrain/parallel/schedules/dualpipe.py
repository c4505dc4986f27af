"""DualPipe (DeepSeek-V3 technical report, arXiv:2412.19437, §3.2.1): a bidirectional pipeline.

Each of the p ranks holds two model stages, one of each copy of the model: microbatches fed at
rank 0 ("down" direction) pass stages 0..p-1 on ranks 0..p-1, microbatches fed at rank p-1
("up" direction) pass stages 0..p-1 on ranks p-1..0. So rank r holds stage r of the down copy
and stage p-1-r of the up copy (2× parameters).

Direction encoding in :class:`~simtrain.parallel.schedules.base.Action`: ``stage`` is the model
stage in 0..p-1 and the *microbatch* carries the direction: microbatches ``0 .. m/2-1`` go down
(stage s runs on rank s), ``m/2 .. m-1`` go up (stage s runs on rank p-1-s).
:func:`dualpipe_rank_of` maps an action to its rank.

The order of each rank follows the eight phases of the reference implementation
(deepseek-ai/DualPipe, ``DualPipe.step``), written here as pure list construction. Rank r with
``h = min(r, p-1-r)`` calls "chunk 0" the direction that enters at its own end of the pipeline
(it runs stage h of it) and "chunk 1" the other (stage p-1-h). Some backwards are split into B
and a deferred W (taken FIFO from a queue); the others are full backwards (no W). The first
rank holds p+1 microbatches in flight (``docs/references/pipeline-theory.md`` §9,
DeepSeek-V3 Table 2).
Requires p even and m even with m >= 2p.

Replayed with F and B run one after the other (the overlap of a forward with a backward chunk
is a communication overlap, not modelled in abstract timing) and free communication, the bubble
per rank does not grow with m, as DeepSeek states; it comes out below DeepSeek's
(p/2 - 1)(F&B + B - 3W) with F&B = F + B (e.g. p = 8, T_F = 1, T_B + T_W = 2, T_W = 1: 3 vs 6).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from simtrain.errors import SpecError
from simtrain.parallel.schedules.base import Action, RankActions, check_args, register_schedule


def dualpipe_rank_of(action: Action, pp: int, num_microbatches: int) -> int:
    """The rank that runs ``action`` in a DualPipe schedule.

    Examples:
        >>> dualpipe_rank_of(Action(0, "F", 0), pp=4, num_microbatches=8)
        0
        >>> dualpipe_rank_of(Action(0, "F", 4), pp=4, num_microbatches=8)
        3
    """
    down = action.microbatch < num_microbatches // 2
    return action.stage if down else pp - 1 - action.stage


@dataclass
class _RankState:
    """One rank's counters while its list is built (internal)."""

    rank: int
    pp: int
    num_microbatches: int
    actions: list[Action] = field(default_factory=list)
    next_f: list[int] = field(default_factory=lambda: [0, 0])
    next_b: list[int] = field(default_factory=lambda: [0, 0])
    weights: deque[Action] = field(default_factory=deque)

    def _stage_and_offset(self, chunk: int) -> tuple[int, int]:
        h = min(self.rank, self.pp - 1 - self.rank)
        first_half = self.rank < self.pp // 2
        down = first_half == (chunk == 0)
        stage = h if chunk == 0 else self.pp - 1 - h
        return stage, 0 if down else self.num_microbatches // 2

    def forward(self, chunk: int) -> None:
        stage, offset = self._stage_and_offset(chunk)
        self.actions.append(Action(stage, "F", offset + self.next_f[chunk]))
        self.next_f[chunk] += 1

    def backward(self, chunk: int, split: bool = False) -> None:
        stage, offset = self._stage_and_offset(chunk)
        microbatch = offset + self.next_b[chunk]
        self.actions.append(Action(stage, "B", microbatch))
        self.next_b[chunk] += 1
        if split:
            self.weights.append(Action(stage, "W", microbatch))

    def weight(self) -> None:
        self.actions.append(self.weights.popleft())


def dualpipe_rank(rank: int, pp: int, num_microbatches: int) -> list[Action]:
    """The DualPipe action list of one rank (phases 1-8 of ``DualPipe.step``)."""
    st = _RankState(rank, pp, num_microbatches)
    half_ranks, half = pp // 2, num_microbatches // 2
    h = min(rank, pp - 1 - rank)
    for _ in range((half_ranks - h - 1) * 2):  # 1: forwards of chunk 0
        st.forward(0)
    for _ in range(h + 1):  # 2: F0 F1 pairs
        st.forward(0)
        st.forward(1)
    for _ in range(half_ranks - h - 1):  # 3: B1 (split) W F1
        st.backward(1, split=True)
        st.weight()
        st.forward(1)
    for _ in range(half - pp + h + 1):  # 4: steady state F0 B1 F1 B0
        st.forward(0)
        st.backward(1)
        st.forward(1)
        st.backward(0)
    for _ in range(half_ranks - h - 1):  # 5: B1 F1 B0
        st.backward(1)
        st.forward(1)
        st.backward(0)
    split = False
    for i in range(h + 1):  # 6: B1 B0, the second half split
        if i == (h + 1) // 2 and h % 2 == 1:
            split = True
        st.backward(1, split=split)
        if i == (h + 1) // 2 and h % 2 == 0:
            split = True
        st.backward(0, split=split)
    for _ in range(half_ranks - h - 1):  # 7: W B0 (split)
        st.weight()
        st.backward(0, split=True)
    while st.weights:  # 8: the remaining Ws
        st.weight()
    return st.actions


@register_schedule("dualpipe")
def dualpipe(pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """DualPipe action lists for every rank.

    Raises:
        SpecError: ``pp`` odd, ``num_microbatches`` odd or below ``2 * pp``.
    """
    check_args(pp, num_microbatches, vpp, name="dualpipe")
    if pp % 2:
        raise SpecError(f"'pp' must be even for the dualpipe schedule (got {pp})")
    if num_microbatches % 2 or num_microbatches < 2 * pp:
        raise SpecError(
            f"'num_microbatches' must be even and at least 2*pp={2 * pp} for the dualpipe "
            f"schedule (got {num_microbatches})"
        )
    return {rank: dualpipe_rank(rank, pp, num_microbatches) for rank in range(pp)}
