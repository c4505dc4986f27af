"""Whole-run simulation: a SimPy model of one training run from the first step to the target.

The job is one SimPy process. Failure sources, planned maintenance, stragglers and the horizon
are renewal processes driven by timeout callbacks that interrupt the job; a repair is a timeout
whose callback returns the node. The job trains until interrupted and handles the event. Between
events, progress and checkpoints are computed in closed form by
:class:`~simtrain.reliability.checkpoint.CheckpointClock`, so a run costs a few SimPy events
per failure, not one per step or checkpoint. Every wall second ends up either as useful work
or in one ``lost_s`` bucket, so ``wall_s = work_s + sum(lost_s.values())``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from simtrain.reliability.checkpoint import CheckpointClock, CheckpointPlan
from simtrain.reliability.failures import FailureSource, InterArrivalSampler
from simtrain.reliability.recovery import RecoveryPlan

JobEvent = tuple[str, Any]
"""What interrupts the job: (kind, payload) with kind failure, straggler, maint, rejoin or
horizon."""


@dataclass(frozen=True)
class StragglerSource:
    """Job-level fail-slow episodes in plain numbers."""

    rate_per_s: float
    """Job-level episodes per second."""
    slowdown_factor: float
    """Step-time multiplier while an episode lasts."""
    duration_s: float
    """Length of one episode."""
    weibull_shape: float | None = None
    """Weibull shape, or None for exponential inter-arrivals."""


@dataclass(frozen=True)
class RunParams:
    """Everything one whole-run simulation needs, as plain numbers."""

    total_work_s: float
    """Failure-free training time to reach the token target."""
    step_time_s: float
    """One optimizer step; no-rollback policies lose only the step in progress."""
    num_nodes: int
    """Nodes of the job (the unit live migration loses per failure)."""
    dp: int
    """Data-parallel replicas (the unit elastic recovery loses per failure)."""
    sources: tuple[FailureSource, ...]
    """Job-level failure processes."""
    checkpoint: CheckpointPlan
    """Checkpoint interval, stall and tiers."""
    recovery: RecoveryPlan
    """What the job does after a failure."""
    horizon_s: float = math.inf
    """Stop at this wall time even if the target is not reached."""
    max_wall_s: float = math.inf
    """Give up at this wall time: a policy that cannot outrun the failures (no checkpoints,
    intervals far beyond the MTBF) would otherwise never finish. The result says so."""
    maintenance_interval_s: float = math.inf
    """Wall seconds between planned interruptions (inf for none)."""
    maintenance_downtime_s: float = 0.0
    """Wall seconds down per planned interruption, after a full checkpoint."""
    stragglers: tuple[StragglerSource, ...] = ()
    """Fail-slow processes."""


@dataclass
class RunResult:
    """Outcome of one simulated run."""

    wall_s: float
    """Wall-clock seconds from the first step to the end (target, horizon or give-up)."""
    work_s: float
    """Failure-free training seconds achieved and kept."""
    interruptions: Counter[str] = field(default_factory=Counter)
    """Unexpected interruptions by cause."""
    planned_interruptions: int = 0
    """Planned maintenance interruptions that hit a running job."""
    num_checkpoints: int = 0
    """Checkpoints completed (rolled-back ones included)."""
    finished: bool = True
    """False when the run hit ``max_wall_s`` before reaching its target."""
    lost_s: Counter[str] = field(default_factory=Counter)
    """Wall seconds not turned into kept work, by cause (failure classes, ``checkpoint``,
    ``maintenance``, ``straggler``, ``degraded``, ``redundancy``, ``rejoin``)."""

    @property
    def ettr(self) -> float:
        """Effective training time ratio: kept training time / wall time."""
        return self.work_s / self.wall_s if self.wall_s > 0 else 1.0


def simulate_run(params: RunParams, rng: np.random.Generator) -> RunResult:
    """Simulate one run; every random draw comes from ``rng`` (same generator, same result)."""
    return _RunModel(params, rng).run()


class _RunModel:
    def __init__(self, p: RunParams, rng: np.random.Generator) -> None:
        self.p = p
        self.env = simpy.Environment()
        self.clock = CheckpointClock(p.checkpoint, p.total_work_s)
        self.result = RunResult(0.0, 0.0)
        self.elastic = p.recovery.node_loss == "elastic"
        self.full = p.dp if self.elastic else p.num_nodes
        self.live = self.full
        self.spares = p.recovery.num_spare_nodes
        self.nodes_needed = 0
        self.spare_ready: simpy.JobEvent | None = None
        self.stopped = False
        self.job = self.env.process(self._train())
        streams = rng.spawn(len(p.sources) + len(p.stragglers) + 1)
        self.coins = streams[-1]  # peer-loss draws
        for src, stream in zip(p.sources, streams, strict=False):
            sampler = InterArrivalSampler(stream, 1.0 / src.rate_per_s, src.weibull_shape)
            self._arm(sampler, ("failure", src))
        for slow, stream in zip(p.stragglers, streams[len(p.sources) :], strict=False):
            sampler = InterArrivalSampler(stream, 1.0 / slow.rate_per_s, slow.weibull_shape)
            self._arm(sampler, ("straggler", slow))
        if math.isfinite(p.maintenance_interval_s):
            self._arm(lambda: p.maintenance_interval_s, ("maint", None))
        stop_s = min(p.horizon_s, p.max_wall_s)
        if math.isfinite(stop_s):
            self._arm(lambda: stop_s, ("horizon", None))

    def run(self) -> RunResult:
        self.env.run(until=self.job)
        self.result.wall_s = self.env.now
        self.result.work_s = self.clock.work_s
        self.result.num_checkpoints = self.clock.num_checkpoints
        self.result.finished = self.env.now < self.p.max_wall_s
        return self.result

    @property
    def speed(self) -> float:
        return self.p.recovery.base_speed * self.live / self.full

    def _arm(self, gap: Callable[[], float], event: JobEvent) -> None:
        """Renewal process: after each gap, interrupt the job with ``event`` and re-arm.

        Timeout callbacks instead of one SimPy process per source halve the events per
        failure, which is what keeps 100 runs of a 90-day job within seconds.
        """

        def fire(_: simpy.Event) -> None:
            if self.job.is_alive:
                self.job.interrupt(event)
                self.env.timeout(gap()).callbacks.append(fire)

        self.env.timeout(gap()).callbacks.append(fire)

    def _wait(self, target: simpy.Event) -> Generator[simpy.Event, Any, JobEvent | None]:
        """Wait for ``target``; return the interrupting event instead if one comes first."""
        try:
            yield target
        except simpy.Interrupt as interrupt:
            return interrupt.cause
        return None

    def _train(self) -> Generator[simpy.Event, Any, None]:
        while not self.stopped:
            t0, speed = self.env.now, self.speed
            if speed == 0:  # every replica is down: wait for a repaired node
                event = yield from self._wait(self.env.event())
                self.result.lost_s["degraded"] += self.env.now - t0
            else:
                event = yield from self._wait(
                    self.env.timeout(self.clock.finish_time(t0, speed) - t0)
                )
                self._account(t0, speed)
                if event is None:
                    self.clock.work_s = self.p.total_work_s
                    return
            yield from self._dispatch(event)

    def _account(self, t0: float, speed: float) -> None:
        gained = self.clock.advance(t0, self.env.now, speed)
        base = self.p.recovery.base_speed
        lost = self.result.lost_s
        lost["checkpoint"] += (self.env.now - t0) - gained / speed
        lost["redundancy"] += gained / base - gained
        lost["degraded"] += gained / speed - gained / base

    def _dispatch(self, event: JobEvent | None) -> Generator[simpy.Event, Any, None]:
        while event is not None and not self.stopped:
            kind, payload = event
            if kind == "failure":
                event = yield from self._on_failure(payload)
            elif kind == "maint":
                self.result.planned_interruptions += 1
                self.clock.commit_all()
                pause = self.p.checkpoint.planned_stall_s + self.p.maintenance_downtime_s
                event = yield from self._down(pause, "maintenance")
            elif kind == "straggler":
                # the whole synchronous job runs 1/f as fast for the episode: the same loss as
                # a pause of d·(1 − 1/f) with the checkpoint clock frozen
                pause = payload.duration_s * (1.0 - 1.0 / payload.slowdown_factor)
                event = yield from self._down(pause, "straggler")
            elif kind == "rejoin":
                self.live = min(self.full, self.live + 1)
                rec = self.p.recovery
                pause = 0.0 if rec.node_loss == "redundant" else rec.reconfigure_s
                event = yield from self._down(pause, "rejoin")
            else:  # horizon
                self.stopped = True

    def _on_failure(self, src: FailureSource) -> Generator[simpy.Event, Any, JobEvent | None]:
        rec, cause = self.p.recovery, src.cause
        self.result.interruptions[cause] += 1
        if src.loses_node:
            self.env.timeout(rec.repair_s).callbacks.append(self._repaired)
        if not src.loses_node or rec.node_loss == "restart":
            lost_tiers = {
                i
                for i, tier in enumerate(self.p.checkpoint.tiers)
                if tier.loss_probability > 0 and self.coins.random() < tier.loss_probability
            }
            lost_work, load_s = self.clock.restore(self.env.now, lost_tiers)
            self.result.lost_s[cause] += lost_work
            if src.loses_node:
                self.nodes_needed += 1
                event = yield from self._acquire_spares(cause)
                if event is not None:
                    return event
            return (yield from self._down(rec.detection_s + rec.restart_s + load_s, cause))
        self.result.lost_s[cause] += self.clock.rollback_to_step(self.p.step_time_s)
        pause = rec.detection_s + rec.reconfigure_s
        if rec.node_loss in ("elastic", "live_migration"):
            self.live = max(0, self.live - 1)
        if rec.node_loss == "live_migration":
            pause += rec.migrate_s
        return (yield from self._down(pause, cause))

    def _repaired(self, _: simpy.Event) -> None:
        """A repaired node becomes a spare (restart policy) or rejoins the job (the others)."""
        if self.p.recovery.node_loss != "restart":
            if self.job.is_alive:
                self.job.interrupt(("rejoin", None))
            return
        self.spares += 1
        if self.spare_ready is not None and not self.spare_ready.triggered:
            self.spare_ready.succeed()

    def _acquire_spares(self, cause: str) -> Generator[simpy.Event, Any, JobEvent | None]:
        """Take a node per lost node: a hot spare, or else wait for a repaired one."""
        while self.nodes_needed > self.spares:
            t0, self.spare_ready = self.env.now, self.env.event()
            event = yield from self._wait(self.spare_ready)
            self.result.lost_s[cause] += self.env.now - t0
            if event is not None and event[0] in ("failure", "horizon"):
                return event
        self.spares -= self.nodes_needed
        self.nodes_needed = 0
        return None

    def _down(self, duration_s: float, cause: str) -> Generator[simpy.Event, Any, JobEvent | None]:
        """Stay down for ``duration_s``; return a failure or the horizon if one cuts it short.

        Stragglers and maintenance have no effect on a job that is down; a repaired node
        rejoins at once.
        """
        end = self.env.now + duration_s
        while True:
            t0 = self.env.now
            event = yield from self._wait(self.env.timeout(max(0.0, end - t0)))
            self.result.lost_s[cause] += self.env.now - t0
            if event is None or event[0] in ("failure", "horizon"):
                return event
            if event[0] == "rejoin":
                self.live = min(self.full, self.live + 1)
