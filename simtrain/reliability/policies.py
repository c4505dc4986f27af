"""Named checkpoint/recovery policies that ``simtrain reliability --policies`` compares.

A policy is a function from the experiment's ``ReliabilitySpec`` to a variant of it: it replaces
the checkpoint and recovery sections and keeps everything else (failure rates, storage,
detection and restart times), so every policy faces the same cluster.
"""

from __future__ import annotations

from collections.abc import Callable

from simtrain.errors import SpecError
from simtrain.specs.reliability import (
    CheckpointSpec,
    ElasticRecoverySpec,
    InMemoryCheckpointSpec,
    LiveMigrationRecoverySpec,
    RecoverySpec,
    RedundantRecoverySpec,
    ReliabilitySpec,
    RestartRecoverySpec,
    SnapshotCheckpointSpec,
    SyncCheckpointSpec,
)

PolicyFactory = Callable[[ReliabilitySpec], ReliabilitySpec]
POLICIES: dict[str, PolicyFactory] = {}
"""Registry of named policies, filled by :func:`policy`."""


def policy(name: str, description: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Register a policy factory under ``name``."""

    def register(factory: PolicyFactory) -> PolicyFactory:
        factory.__doc__ = description
        POLICIES[name] = factory
        return factory

    return register


def get_policy(name: str) -> PolicyFactory:
    """Look a policy up by name.

    Raises:
        SpecError: unknown name; the message lists the known ones.
    """
    if name not in POLICIES:
        raise SpecError(
            f"'--policies' must name known policies: {', '.join(POLICIES)} (got {name!r})"
        )
    return POLICIES[name]


def _with(
    spec: ReliabilitySpec, checkpoint: CheckpointSpec, recovery: RecoverySpec
) -> ReliabilitySpec:
    return spec.model_copy(update={"checkpoint": checkpoint, "recovery": recovery})


def _restart(spec: ReliabilitySpec, num_spare_nodes: int | None = None) -> RestartRecoverySpec:
    rec = spec.recovery
    spares = rec.num_spare_nodes if isinstance(rec, RestartRecoverySpec) else 16
    return RestartRecoverySpec(
        detection_s=rec.detection_s,
        restart_s=rec.restart_s,
        num_spare_nodes=spares if num_spare_nodes is None else num_spare_nodes,
    )


def _times(spec: ReliabilitySpec) -> dict[str, float]:
    return {"detection_s": spec.recovery.detection_s, "restart_s": spec.recovery.restart_s}


@policy("spec", "the experiment's own checkpoint and recovery sections")
def _spec(spec: ReliabilitySpec) -> ReliabilitySpec:
    return spec


@policy("sync-hourly", "synchronous checkpoint to storage every hour; restart on a hot spare")
def _sync_hourly(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SyncCheckpointSpec(interval_s=3600.0), _restart(spec))


@policy("sync-young-daly", "synchronous checkpoint at the Young/Daly interval; hot spare")
def _sync_yd(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SyncCheckpointSpec(), _restart(spec))


@policy("sync-no-spares", "synchronous checkpoint at the Young/Daly interval; wait for repair")
def _sync_no_spares(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SyncCheckpointSpec(), _restart(spec, num_spare_nodes=0))


@policy("snapshot", "snapshot to host then persist (Meta-like); restart on a hot spare")
def _snapshot(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SnapshotCheckpointSpec(), _restart(spec))


@policy("in-memory", "GEMINI in-memory checkpoint to peers, persisted every 10; hot spare")
def _in_memory(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, InMemoryCheckpointSpec(), _restart(spec))


@policy("elastic", "snapshot checkpoints; continue with fewer data-parallel replicas")
def _elastic(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SnapshotCheckpointSpec(), ElasticRecoverySpec(**_times(spec)))


@policy("live-migration", "snapshot checkpoints; Oobleck-style re-planning, no rollback")
def _live_migration(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SnapshotCheckpointSpec(), LiveMigrationRecoverySpec(**_times(spec)))


@policy("redundant", "snapshot checkpoints; Bamboo-style redundant computation (+15 % time)")
def _redundant(spec: ReliabilitySpec) -> ReliabilitySpec:
    return _with(spec, SnapshotCheckpointSpec(), RedundantRecoverySpec(**_times(spec)))
