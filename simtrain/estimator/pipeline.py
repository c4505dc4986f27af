"""The critical path of a pipeline schedule, action by action, as the engine realises it.

Each pipeline rank runs its schedule's actions in order (:mod:`simtrain.parallel.schedules`).
An action starts when the rank's compute stream is free, the collectives its predecessor left
in flight have ended, and (for a forward of a later stage, or a backward of an earlier one)
the activations or gradients from the neighbouring stage have arrived. It then takes the
times of its chunk's walk (:mod:`simtrain.estimator.chunks`): its compute ends after
``compute_end_s``, what its successor waits for after ``tail_end_s``. Its point-to-point send
queues on the rank's ``pp_comm`` stream. This is the longest path through the same dependency
graph the builder gives the engine, evaluated in one pass in a topological order of the
actions (computed once per schedule shape), with no event queue.

Under the two-microbatch overlap (``parallel.overlap_ep_comm``: DualPipe, Megatron-Core's
combined 1F1B) a forward followed by an independent backward runs as one *paired step*, their
tasks interleaved as the builder interleaves them
(:func:`simtrain.parallel.overlap.feasible_steps`); such a step is one position of the
order, with a transfer in and out for each of its two actions (:class:`PairSlot`, timed by
:mod:`simtrain.estimator.pairs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from simtrain.parallel.overlap import (
    SendKey,
    feasible_steps,
    received,
    schedule_actions,
    sent,
)
from simtrain.parallel.schedules import Action, split_backwards, stage_rank


class Slot(NamedTuple):
    """A kind of action: every action of one rank with the same timing and transfer.

    A named tuple rather than a dataclass: slots key the estimator's per-configuration
    caches, and a tuple hashes without a Python-level ``__hash__`` call.

    Attributes:
        rank: pipeline rank (its stage index in the pp group).
        chunk: model chunk (the action's stage).
        body: the ops it runs: ``first_forward`` (the rank's first forward of the chunk in
            the step), ``forward``, ``backward`` (input and weight gradients),
            ``backward_input`` (a split B) or ``weight`` (a W).
        computes_grads: it computes weight gradients (a W, or a B that is not split).
        owns_grads: it is the rank's last action computing its chunk's weight gradients (the
            data-parallel gradient buckets hook onto its layers).
        peer: pipeline rank its transfer goes to (-1: it sends nothing).
    """

    rank: int
    chunk: int
    body: str
    computes_grads: bool
    owns_grads: bool
    peer: int


@dataclass(frozen=True)
class PairSlot:
    """A kind of paired step: a forward and a backward of another microbatch, interleaved.

    It stands where its backward stands for the gradient reduction (only the backward can
    compute weight gradients), hence the properties below.

    Attributes:
        forward: the forward's slot.
        backward: the backward's slot.
    """

    forward: Slot
    backward: Slot

    @property
    def rank(self) -> int:
        """Pipeline rank of both actions."""
        return self.forward.rank

    @property
    def chunk(self) -> int:
        """The backward's chunk (whose gradients the step may reduce)."""
        return self.backward.chunk

    @property
    def computes_grads(self) -> bool:
        """The backward computes weight gradients."""
        return self.backward.computes_grads

    @property
    def owns_grads(self) -> bool:
        """The backward is the rank's last action computing its chunk's weight gradients."""
        return self.backward.owns_grads


@dataclass(frozen=True)
class ScheduleShape:
    """A schedule compiled for the estimator: flat arrays over a topological order.

    Position i of the arrays is the i-th action in an order where every action comes after
    the action whose transfer it waits for (ranks keep their own order).

    Attributes:
        slots: the distinct kinds of action (and of paired step).
        slot_counts: how many actions (or paired steps) each slot stands for.
        rank: per position, the pipeline rank.
        slot: per position, the slot index.
        recv: per position, the index of the transfer it (a paired step's forward) waits for
            (-1: none).
        send: per position, the index of the transfer it (a paired step's forward) sends
            (-1: none).
        recv2: per position, the transfer a paired step's backward waits for (-1: none, or
            not a paired step).
        send2: per position, the transfer a paired step's backward sends (-1: none).
        send_after_tail: per position, whether its transfer waits for its trailing
            collectives too (a forward's does; a backward's leaves after its last compute).
        num_chunks: model chunks (pp · vpp).
        num_transfers: transfers in the step.
        grad_actions: per rank, the slots of its actions that compute weight gradients, in
            program order (the chain records their start and end).
        key: (schedule, pp, microbatches, vpp, paired): what the shape is compiled from.
        paired: some positions are paired steps.
    """

    slots: tuple[Slot | PairSlot, ...]
    slot_counts: tuple[int, ...]
    rank: tuple[int, ...]
    slot: tuple[int, ...]
    recv: tuple[int, ...]
    send: tuple[int, ...]
    send_after_tail: tuple[bool, ...]
    num_chunks: int
    num_transfers: int
    grad_actions: tuple[tuple[Slot | PairSlot, ...], ...]
    key: tuple[str, int, int, int, bool]
    recv2: tuple[int, ...] = ()
    send2: tuple[int, ...] = ()
    paired: bool = False


@lru_cache(maxsize=4096)
def schedule_shape(
    name: str, pp: int, num_microbatches: int, vpp: int, paired: bool = False
) -> ScheduleShape:
    """Compile schedule ``name`` for the estimator (cached: pure in its inputs).

    With ``paired`` (the two-microbatch overlap) the actions are grouped into the builder's
    steps (:func:`~simtrain.parallel.overlap.feasible_steps`).
    """
    by_rank = schedule_actions(name, pp, num_microbatches, vpp, paired)
    actions = tuple(tuple(by_rank[r]) for r in range(pp))
    num_chunks = 1 + max(a.stage for acts in actions for a in acts)
    slot_of: dict[tuple[int, int], int] = {}  # (rank, position) -> slot index
    slots: dict[Slot | PairSlot, int] = {}
    action_slots: list[list[Slot]] = []
    for rank, acts in enumerate(actions):
        split = split_backwards(list(acts))
        last_grad = {
            a.stage: i
            for i, a in enumerate(acts)
            if a.kind == "W" or (a.kind == "B" and (a.stage, a.microbatch) not in split)
        }
        first_forward: set[int] = set()
        mine: list[Slot] = []
        for i, a in enumerate(acts):
            body = {"F": "forward", "W": "weight"}.get(a.kind) or (
                "backward_input" if (a.stage, a.microbatch) in split else "backward"
            )
            if a.kind == "F" and a.stage not in first_forward:
                first_forward.add(a.stage)
                body = "first_forward"
            computes = a.kind == "W" or (a.kind == "B" and body == "backward")
            out = sent(a, num_chunks)
            peer = -1
            if out is not None:
                target = a.stage + 1 if a.kind == "F" else a.stage - 1
                peer = stage_rank(name, target, a.microbatch, pp, num_microbatches)
            mine.append(Slot(rank, a.stage, body, computes, last_grad.get(a.stage) == i, peer))
        action_slots.append(mine)
    # steps: (rank, position of its first action, number of actions)
    steps, order = _steps(by_rank, pp, num_chunks, paired)
    for rank, rank_steps in enumerate(steps):
        for first, count in rank_steps:
            kind: Slot | PairSlot = action_slots[rank][first]
            if count == 2:
                kind = PairSlot(action_slots[rank][first], action_slots[rank][first + 1])
            slot_of[(rank, first)] = slots.setdefault(kind, len(slots))
    transfers: dict[SendKey, int] = {}
    for rank, i, count in order:
        for a in actions[rank][i : i + count]:
            key = sent(a, num_chunks)
            if key is not None:
                transfers[key] = len(transfers)

    def index(wanted: SendKey | None) -> int:
        return -1 if wanted is None else transfers[wanted]

    recv, send, recv2, send2 = [], [], [], []
    for rank, i, count in order:
        first = actions[rank][i]
        recv.append(index(received(first, num_chunks)))
        send.append(index(sent(first, num_chunks)))
        second = actions[rank][i + 1] if count == 2 else None
        recv2.append(-1 if second is None else index(received(second, num_chunks)))
        send2.append(-1 if second is None else index(sent(second, num_chunks)))
    counts = [0] * len(slots)
    for slot_index in slot_of.values():
        counts[slot_index] += 1
    by_index = list(slots)
    grad_actions = tuple(
        tuple(
            by_index[slot_of[(r, first)]]
            for first, _ in rank_steps
            if by_index[slot_of[(r, first)]].computes_grads
        )
        for r, rank_steps in enumerate(steps)
    )
    is_paired = any(count == 2 for rank_steps in steps for _, count in rank_steps)
    return ScheduleShape(
        slots=tuple(slots),
        slot_counts=tuple(counts),
        rank=tuple(rank for rank, _, _ in order),
        slot=tuple(slot_of[(rank, i)] for rank, i, _ in order),
        recv=tuple(recv),
        send=tuple(send),
        send_after_tail=tuple(actions[r][i].kind == "F" for r, i, _ in order),
        num_chunks=num_chunks,
        num_transfers=len(transfers),
        grad_actions=grad_actions,
        key=(name, pp, num_microbatches, vpp, paired),
        recv2=tuple(recv2) if is_paired else (),
        send2=tuple(send2) if is_paired else (),
        paired=is_paired,
    )


def _steps(
    by_rank: dict[int, list[Action]], pp: int, num_chunks: int, paired: bool
) -> tuple[tuple[tuple[tuple[int, int], ...], ...], tuple[tuple[int, int, int], ...]]:
    """The builder's steps of each rank and an order they can run in.

    Steps as (position of the first action, number of actions); the order as (rank, position
    of the step's first action, number of actions). A paired step waits for the transfers of
    both its actions (:func:`~simtrain.parallel.overlap.feasible_steps`).
    """
    rank_steps, order = feasible_steps(by_rank, num_chunks, paired)
    starts = []
    for r in range(pp):
        first, mine = 0, []
        for step in rank_steps[r]:
            mine.append((first, len(step)))
            first += len(step)
        starts.append(tuple(mine))
    steps = tuple(starts)
    return steps, tuple((r, *steps[r][s]) for r, s in order)
