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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from simtrain.parallel.schedules import Action, get_schedule, split_backwards, stage_rank

SendKey = tuple[str, int, int]  # (kind, chunk, microbatch) of the action that sends


@dataclass(frozen=True)
class Slot:
    """A kind of action: every action of one rank with the same timing and transfer.

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
class ScheduleShape:
    """A schedule compiled for the estimator: flat arrays over a topological order.

    Position i of the arrays is the i-th action in an order where every action comes after
    the action whose transfer it waits for (ranks keep their own order).

    Attributes:
        slots: the distinct kinds of action.
        slot_counts: how many actions each slot stands for.
        rank: per position, the pipeline rank.
        slot: per position, the slot index.
        recv: per position, the index of the transfer it waits for (-1: none).
        send: per position, the index of the transfer it sends (-1: none).
        send_after_tail: per position, whether its transfer waits for its trailing
            collectives too (a forward's does; a backward's leaves after its last compute).
        num_chunks: model chunks (pp · vpp).
        num_transfers: transfers in the step.
        grad_actions: per rank, the slots of its actions that compute weight gradients, in
            program order (the chain records their start and end).
        key: (schedule, pp, microbatches, vpp): what the shape is compiled from.
    """

    slots: tuple[Slot, ...]
    slot_counts: tuple[int, ...]
    rank: tuple[int, ...]
    slot: tuple[int, ...]
    recv: tuple[int, ...]
    send: tuple[int, ...]
    send_after_tail: tuple[bool, ...]
    num_chunks: int
    num_transfers: int
    grad_actions: tuple[tuple[Slot, ...], ...]
    key: tuple[str, int, int, int]


def received(action: Action, num_chunks: int) -> SendKey | None:
    """The transfer ``action`` waits for, if any.

    The previous stage's activations for a forward, the next stage's gradients for a backward
    (the builder's ``F{c-1}`` / ``B{c+1}`` keys).
    """
    if action.kind == "F" and action.stage > 0:
        return ("F", action.stage - 1, action.microbatch)
    if action.kind == "B" and action.stage < num_chunks - 1:
        return ("B", action.stage + 1, action.microbatch)
    return None


def sent(action: Action, num_chunks: int) -> SendKey | None:
    """The transfer ``action`` sends once done (to the next or previous stage), if any."""
    if action.kind == "F" and action.stage < num_chunks - 1:
        return ("F", action.stage, action.microbatch)
    if action.kind == "B" and action.stage > 0:
        return ("B", action.stage, action.microbatch)
    return None


@lru_cache(maxsize=4096)
def schedule_shape(name: str, pp: int, num_microbatches: int, vpp: int) -> ScheduleShape:
    """Compile schedule ``name`` for the estimator (cached: pure in its inputs)."""
    by_rank = get_schedule(name)(pp, num_microbatches, vpp)
    actions = tuple(tuple(by_rank[r]) for r in range(pp))
    num_chunks = 1 + max(a.stage for acts in actions for a in acts)
    slot_of: dict[tuple[int, int], int] = {}  # (rank, position) -> slot index
    slots: dict[Slot, int] = {}
    for rank, acts in enumerate(actions):
        split = split_backwards(list(acts))
        last_grad = {
            a.stage: i
            for i, a in enumerate(acts)
            if a.kind == "W" or (a.kind == "B" and (a.stage, a.microbatch) not in split)
        }
        first_forward: set[int] = set()
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
            slot = Slot(rank, a.stage, body, computes, last_grad.get(a.stage) == i, peer)
            slot_of[(rank, i)] = slots.setdefault(slot, len(slots))
    order = _topological(actions, num_chunks)
    transfers: dict[SendKey, int] = {}
    for rank, i in order:
        key = sent(actions[rank][i], num_chunks)
        if key is not None:
            transfers[key] = len(transfers)
    recv, send = [], []
    for rank, i in order:
        wait = received(actions[rank][i], num_chunks)
        recv.append(-1 if wait is None else transfers[wait])
        out = sent(actions[rank][i], num_chunks)
        send.append(-1 if out is None else transfers[out])
    counts = [0] * len(slots)
    for index in slot_of.values():
        counts[index] += 1
    by_index = list(slots)
    grad_actions = tuple(
        tuple(
            by_index[slot_of[(r, i)]]
            for i in range(len(acts))
            if by_index[slot_of[(r, i)]].computes_grads
        )
        for r, acts in enumerate(actions)
    )
    return ScheduleShape(
        slots=tuple(slots),
        slot_counts=tuple(counts),
        rank=tuple(rank for rank, _ in order),
        slot=tuple(slot_of[key] for key in order),
        recv=tuple(recv),
        send=tuple(send),
        send_after_tail=tuple(actions[r][i].kind == "F" for r, i in order),
        num_chunks=num_chunks,
        num_transfers=len(transfers),
        grad_actions=grad_actions,
        key=(name, pp, num_microbatches, vpp),
    )


def _topological(
    actions: tuple[tuple[Action, ...], ...], num_chunks: int
) -> tuple[tuple[int, int], ...]:
    """Ranks advance in turn as far as their received transfers allow."""
    position = [0] * len(actions)
    done: set[SendKey] = set()
    order: list[tuple[int, int]] = []
    progress = True
    while progress:
        progress = False
        for rank, acts in enumerate(actions):
            i = position[rank]
            while i < len(acts):
                wait = received(acts[i], num_chunks)
                if wait is not None and wait not in done:
                    break
                key = sent(acts[i], num_chunks)
                if key is not None:
                    done.add(key)
                order.append((rank, i))
                i += 1
                progress = True
            position[rank] = i
    if len(order) != sum(map(len, actions)):
        raise ValueError("the schedule's transfers form a cycle (a bug in the schedule)")
    return tuple(order)
