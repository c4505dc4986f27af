"""Chain a compiled schedule's single actions: the step's critical path, rank by rank.

The rules are those of :mod:`simtrain.estimator.pipeline`; the actions' times come from
their slots' rows (:meth:`~simtrain.estimator.step.Estimator._slot`). Schedules with paired
steps are chained by :func:`simtrain.estimator.pairs.chain_steps` with the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simtrain.estimator.pipeline import ScheduleShape
from simtrain.estimator.walk import NO_HOST

Mark = tuple[float, ...]
"""(start, end, host offset, received gradients' offset) of an action (or paired step) that
computes weight gradients (end: of its backward)."""


@dataclass
class ChainState:
    """Where a chain stands after the first positions of its order.

    Attributes:
        compute_free: per rank, when its compute stream frees.
        hold: per rank, when its last action's trailing collectives end.
        pp_free: per rank, when its transfers end.
        host_free: per rank, when its host has issued everything so far.
        unsynced: per rank, the end of the transfers it sent since its last compute
            (``NO_HOST``: none).
        arrival: per transfer, when it arrives (0 where not sent yet, or not needed).
        marks: per rank, the :data:`Mark` of each of its actions so far that computes
            weight gradients.
    """

    compute_free: list[float]
    hold: list[float]
    pp_free: list[float]
    host_free: list[float]
    unsynced: list[float]
    arrival: list[float]
    marks: list[list[Mark]]

    @classmethod
    def start(cls, num: int, num_transfers: int) -> ChainState:
        """The state before the first action of a chain of ``num`` ranks."""
        return cls(
            [0.0] * num, [0.0] * num, [0.0] * num, [0.0] * num, [NO_HOST] * num,
            [0.0] * num_transfers, [[] for _ in range(num)],
        )  # fmt: skip

    def kept(self, transfers: tuple[int, ...]) -> ChainState:
        """A copy to keep and resume from later (:meth:`resumed`), small.

        Its arrivals are only those of ``transfers`` (those sent so far that the positions
        still to run receive), in that order.
        """
        return ChainState(
            list(self.compute_free), list(self.hold), list(self.pp_free), list(self.host_free),
            list(self.unsynced), [self.arrival[j] for j in transfers],
            [list(m) for m in self.marks],
        )  # fmt: skip

    def resumed(self, transfers: tuple[int, ...], num_transfers: int) -> ChainState:
        """A state to resume from, copied from one :meth:`kept` with ``transfers``."""
        arrival = [0.0] * num_transfers
        for j, arrived in zip(transfers, self.arrival, strict=True):
            arrival[j] = arrived
        return ChainState(
            list(self.compute_free), list(self.hold), list(self.pp_free), list(self.host_free),
            list(self.unsynced), arrival, [list(m) for m in self.marks],
        )  # fmt: skip


def chain_actions(
    shape: ScheduleShape,
    table: list[tuple[Any, ...]],
    num: int,
    sync_on_p2p: bool,
    blocking_sends: bool,
    host_syncs: tuple[bool, ...] = (),
    state: ChainState | None = None,
    begin: int = 0,
    end: int | None = None,
) -> ChainState:
    """Chain a compiled schedule's actions (see :mod:`simtrain.estimator.pipeline`).

    Returns, per rank, when its compute stream frees, when its last action's trailing
    collectives end, when its transfers end, the start, end and host offset of each of its
    actions that compute weight gradients, and when its host has issued everything
    (:class:`ChainState`). It depends only on the schedule, the slots' times, ``sync_on_p2p``,
    ``blocking_sends`` and ``host_syncs``, so configurations that share them share it. With
    ``blocking_sends`` (pipeline transfers not overlapped, ``parallel.overlap_p2p_comm`` off)
    a rank's next action waits for its send to end, as the engine's does.

    The host stream runs ahead of the device from action to action (or falls behind it) as
    the engine's does (:mod:`simtrain.engine.host`): an action's host starts where the
    previous action's left off, except that with ``sync_on_p2p`` (eager pipelines) the host
    first waits for the device, the transfer the action receives and the transfers the rank
    sent since its previous compute; and before an action whose slot is marked in
    ``host_syncs`` (the stack reads a batch's shapes or the loss on the host) the host waits
    for the device's compute stream.

    Runs positions ``begin`` to ``end`` (default: to the last) of the order, from ``state``
    (default: the start; it is updated in place): tables equal on the positions before some
    point share the chain up to there (``Estimator._chain``).
    """
    if state is None:
        state = ChainState.start(num, shape.num_transfers)
    compute_free, hold, pp_free = state.compute_free, state.hold, state.pp_free
    host_free, unsynced, arrival, marks = (
        state.host_free, state.unsynced, state.arrival, state.marks
    )  # fmt: skip
    stop = len(shape.rank) if end is None else end
    ranks, slots, recvs, sends, tails = (
        shape.rank[begin:stop], shape.slot[begin:stop], shape.recv[begin:stop],
        shape.send[begin:stop], shape.send_after_tail[begin:stop],
    )  # fmt: skip
    computing = [s.computes_grads for s in shape.slots]
    rows = [row[:7] for row in table]
    # max() is spelled out (``b if b > a else a`` is max(a, b)): this loop runs once per
    # action of every chained schedule
    for r, k, j, out, after_tail in zip(ranks, slots, recvs, sends, tails, strict=True):
        compute_end, tail_end, p2p_s, compute_host, tail_host, host_s, first_comm = rows[k]
        free = compute_free[r]
        start = hold[r]
        if free >= start:
            start = free
        host = host_free[r]
        if j >= 0:
            arrived = arrival[j]
            if arrived > start:
                start = arrived
        if sync_on_p2p:
            synced = unsynced[r]
            if j >= 0 and not first_comm and arrived > synced:
                synced = arrived
            if synced > NO_HOST:  # the host waits for the device and the transfers
                if synced > host:
                    host = synced
                if free > host:
                    host = free
                unsynced[r] = NO_HOST
        if host_syncs and host_syncs[k] and free > host:
            host = free
        x = host - start
        end_s = start + compute_end
        if x + compute_host > compute_end:
            end_s = host + compute_host
        tail = start + tail_end
        if x + tail_host > tail_end:
            tail = host + tail_host
        compute_free[r], hold[r], host_free[r] = end_s, tail, host + host_s
        if out >= 0:
            ready = tail if after_tail else end_s
            busy = pp_free[r]
            if busy > ready:
                ready = busy
            pp_free[r] = arrived = arrival[out] = ready + p2p_s
            if blocking_sends and arrived > end_s:
                compute_free[r] = arrived
            if sync_on_p2p and arrived > unsynced[r]:
                unsynced[r] = arrived
        if computing[k]:
            marks[r].append((start, end_s, x, 0.0))
    return state
