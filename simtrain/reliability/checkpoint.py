"""Checkpoint policies as data, and the analytic clock of checkpoints between two events.

A policy is a :class:`CheckpointPlan`: a training interval, a stall per checkpoint and one or
more *tiers* where the checkpoint becomes durable (storage; peer memory then storage). The
whole-run model never schedules one event per checkpoint: :class:`CheckpointClock` computes in
closed form where a run stands after any stretch of uninterrupted training (checkpoints done,
which of them are durable, progress since the last one), which keeps a 90-day run at a few
hundred events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from simtrain.reliability.closed_form import young_interval_s
from simtrain.specs.reliability import (
    InMemoryCheckpointSpec,
    ReliabilitySpec,
    SnapshotCheckpointSpec,
)


@dataclass(frozen=True)
class CheckpointTier:
    """A place checkpoints become durable in."""

    every_n: int
    """Every n-th checkpoint lands in this tier."""
    lag_s: float
    """Wall seconds after the stall until the copy is durable (background persist)."""
    load_s: float
    """Seconds to load the checkpoint back on restart."""
    loss_probability: float = 0.0
    """Probability that a failure also destroys this tier's copy (a lost peer)."""


@dataclass(frozen=True)
class CheckpointPlan:
    """A checkpoint policy in plain numbers."""

    interval_s: float
    """Training seconds between two checkpoints (a whole number of steps)."""
    stall_s: float
    """Seconds training stalls per checkpoint."""
    tiers: tuple[CheckpointTier, ...]
    """Durable places, from the fastest to load (tried first) to the safest."""
    planned_stall_s: float
    """Seconds to write a full checkpoint to storage before a planned interruption."""


def checkpoint_plan(
    spec: ReliabilitySpec,
    checkpoint_bytes: float,
    num_gpus: int,
    num_nodes: int,
    mtbf_s: float,
    step_time_s: float,
) -> CheckpointPlan:
    """Resolve the spec's checkpoint policy for a job into a :class:`CheckpointPlan`.

    Storage moves the whole checkpoint at the aggregate bandwidth; the GPU→host copy moves one
    GPU's shard (``checkpoint_bytes / num_gpus``) on every GPU at once, and the in-memory copy
    one node's shard to a peer. A background persist cannot start before the previous one
    ended, so the interval is at least the persist time.
    """
    ckpt, storage = spec.checkpoint, spec.storage
    write_s = checkpoint_bytes / storage.write_bandwidth_bytes_per_s
    read_s = checkpoint_bytes / storage.read_bandwidth_bytes_per_s
    host_copy_s = checkpoint_bytes / num_gpus / storage.host_copy_bandwidth_bytes_per_s
    min_interval_s = 0.0
    if isinstance(ckpt, SnapshotCheckpointSpec):
        stall_s = host_copy_s
        tiers: tuple[CheckpointTier, ...] = (CheckpointTier(1, write_s, read_s),)
        min_interval_s = write_s
    elif isinstance(ckpt, InMemoryCheckpointSpec):
        peer_s = checkpoint_bytes / num_nodes / storage.peer_copy_bandwidth_bytes_per_s
        stall_s = host_copy_s + peer_s
        tiers = (
            CheckpointTier(1, 0.0, peer_s, ckpt.peer_loss_probability),
            CheckpointTier(ckpt.num_checkpoints_per_persist, write_s, read_s),
        )
        min_interval_s = write_s / ckpt.num_checkpoints_per_persist
    else:
        stall_s = write_s
        tiers = (CheckpointTier(1, 0.0, read_s),)
    if ckpt.interval_s == "young_daly":
        interval_s = young_interval_s(stall_s, mtbf_s) if math.isfinite(mtbf_s) else math.inf
    else:
        interval_s = float(ckpt.interval_s)
    interval_s = max(interval_s, min_interval_s)
    if math.isfinite(interval_s):
        interval_s = max(1, round(interval_s / step_time_s)) * step_time_s
    return CheckpointPlan(interval_s, stall_s, tiers, write_s)


@dataclass
class CheckpointClock:
    """Progress and checkpoints of a run, advanced in closed form between events.

    Work is measured in seconds of failure-free training. Checkpoint j (1-based) after a
    stretch that starts at wall time t0 ends its stall at ``A + (j − 1)·L`` and covers work
    ``B + (j − 1)·τ``, with L = τ/speed + stall the wall length of a cycle; A and B are the end
    and the work of the first checkpoint of the stretch (the one in progress, or the next).
    """

    plan: CheckpointPlan
    """The checkpoint policy."""
    total_work_s: float
    """Work of the whole run; no checkpoint is taken once it is reached."""
    work_s: float = 0.0
    """Work done, including work not yet covered by a checkpoint."""
    since_ckpt_s: float = 0.0
    """Work since the last checkpoint (0 while a checkpoint stall is in progress)."""
    stall_left_s: float = 0.0
    """Remaining stall of a checkpoint in progress (covering ``work_s``)."""
    num_checkpoints: int = 0
    """Checkpoints completed so far."""
    tier_work_s: list[float] = field(default_factory=list)
    """Work covered by the last durable checkpoint of each tier."""
    pending: list[tuple[float, int, float]] = field(default_factory=list)
    """Checkpoints not yet durable: (wall time durable, tier index, work covered)."""

    def __post_init__(self) -> None:
        self.tier_work_s = [0.0] * len(self.plan.tiers)

    def _cycle(self, t0: float, speed: float) -> tuple[float, float, float]:
        """(A, B, L) of a stretch starting at ``t0``: see the class docstring."""
        tau, stall = self.plan.interval_s, self.plan.stall_s
        if self.stall_left_s > 0:
            first_end, first_work = t0 + self.stall_left_s, self.work_s
        else:
            first_end = t0 + (tau - self.since_ckpt_s) / speed + stall
            first_work = self.work_s + tau - self.since_ckpt_s
        return first_end, first_work, tau / speed + stall

    def _checkpoints_before_end(self, first_work: float) -> int:
        if self.total_work_s <= first_work:
            return 0
        return math.ceil((self.total_work_s - first_work) / self.plan.interval_s)

    def finish_time(self, t0: float, speed: float) -> float:
        """Wall time the run would finish at if nothing interrupts it from ``t0``."""
        if not math.isfinite(self.plan.interval_s):
            return t0 + (self.total_work_s - self.work_s) / speed
        first_end, first_work, cycle = self._cycle(t0, speed)
        last = self._checkpoints_before_end(first_work)
        if last == 0:
            return t0 + (self.total_work_s - self.work_s) / speed
        last_work = first_work + (last - 1) * self.plan.interval_s
        return first_end + (last - 1) * cycle + (self.total_work_s - last_work) / speed

    def advance(self, t0: float, now: float, speed: float) -> float:
        """Move the state from ``t0`` to ``now`` of uninterrupted training; return work gained."""
        before = self.work_s
        if not math.isfinite(self.plan.interval_s):
            self.work_s = min(self.total_work_s, self.work_s + (now - t0) * speed)
            self.since_ckpt_s += self.work_s - before
            return self.work_s - before
        tau = self.plan.interval_s
        first_end, first_work, cycle = self._cycle(t0, speed)
        last = self._checkpoints_before_end(first_work)
        done = 0 if now < first_end else min(last, math.floor((now - first_end) / cycle) + 1)
        self._record_durable(now, first_end, first_work, cycle, done)
        if done == 0:
            if self.stall_left_s > 0:
                self.stall_left_s = first_end - now
            elif last == 0 or (now - t0) * speed < tau - self.since_ckpt_s:
                gained = min((now - t0) * speed, self.total_work_s - self.work_s)
                self.work_s += gained
                self.since_ckpt_s += gained
            else:
                self.work_s, self.since_ckpt_s, self.stall_left_s = first_work, 0.0, first_end - now
            return self.work_s - before
        self.num_checkpoints += done
        end_k, work_k = first_end + (done - 1) * cycle, first_work + (done - 1) * tau
        ran = (now - end_k) * speed
        if done == last or ran < tau:
            gained = min(ran, self.total_work_s - work_k)
            self.work_s, self.since_ckpt_s, self.stall_left_s = work_k + gained, gained, 0.0
        else:
            self.work_s, self.since_ckpt_s = work_k + tau, 0.0
            self.stall_left_s = end_k + cycle - now
        return self.work_s - before

    def _record_durable(
        self, now: float, first_end: float, first_work: float, cycle: float, done: int
    ) -> None:
        self._settle(now)
        for i, tier in enumerate(self.plan.tiers):
            # checkpoints whose stall ended by now - lag are durable; the later ones are pending
            ready = now - tier.lag_s
            durable = (
                0 if ready < first_end else min(done, math.floor((ready - first_end) / cycle) + 1)
            )
            last = durable - (self.num_checkpoints + durable) % tier.every_n
            if last >= 1:
                work = first_work + (last - 1) * self.plan.interval_s
                self.tier_work_s[i] = max(self.tier_work_s[i], work)
            j = last + tier.every_n if last >= 1 else durable + 1
            j += -(self.num_checkpoints + j) % tier.every_n
            while j <= done:
                end = first_end + (j - 1) * cycle
                self.pending.append(
                    (end + tier.lag_s, i, first_work + (j - 1) * self.plan.interval_s)
                )
                j += tier.every_n

    def _settle(self, now: float) -> None:
        """Turn pending checkpoints durable by ``now`` into durable ones."""
        still = []
        for durable_at, tier, work in self.pending:
            if durable_at <= now:
                self.tier_work_s[tier] = max(self.tier_work_s[tier], work)
            else:
                still.append((durable_at, tier, work))
        self.pending = still

    def restore(self, now: float, lost_tiers: set[int]) -> tuple[float, float]:
        """Roll back after a failure at ``now``; return (work lost, load seconds).

        Background persists still in flight are lost with the failure. The first tier not in
        ``lost_tiers`` is used; the last tier (storage) always survives.
        """
        self._settle(now)
        self.pending.clear()
        usable = [i for i in range(len(self.plan.tiers)) if i not in lost_tiers]
        tier = usable[0] if usable else len(self.plan.tiers) - 1
        restored = self.tier_work_s[tier]
        lost = self.work_s - restored
        self.work_s, self.since_ckpt_s, self.stall_left_s = restored, 0.0, 0.0
        self.tier_work_s = [min(w, restored) for w in self.tier_work_s]
        self.tier_work_s[tier] = restored
        return lost, self.plan.tiers[tier].load_s

    def rollback_to_step(self, step_time_s: float) -> float:
        """Lose the step in progress only (state survives in other replicas); return work lost."""
        kept = math.floor(self.work_s / step_time_s + 1e-9) * step_time_s
        lost = max(0.0, self.work_s - kept)
        if self.stall_left_s > 0:
            self.stall_left_s = 0.0  # the checkpoint in progress is abandoned
        self.work_s = kept
        self.since_ckpt_s = max(0.0, self.since_ckpt_s - lost)
        return lost

    def commit_all(self) -> None:
        """A full checkpoint to storage (before planned maintenance) covers all work."""
        self.pending.clear()
        self.tier_work_s = [self.work_s] * len(self.plan.tiers)
        self.since_ckpt_s, self.stall_left_s = 0.0, 0.0
