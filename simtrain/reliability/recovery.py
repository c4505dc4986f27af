"""Recovery policies as data: what a job does after a failure, in plain numbers.

Every policy restarts from the last checkpoint after a failure that loses no node (a software
fault crashes the whole job). They differ on failures that take a node out:

- ``restart``: roll back to the last checkpoint, take a hot spare (or wait for the repair),
  restart and load;
- ``elastic``: drop the data-parallel replica of the lost node and continue with the others
  (only the step in progress is lost); the replica rejoins after the repair;
- ``live_migration`` (Oobleck): re-plan the pipelines on the surviving nodes and copy the lost
  node's shard from a healthy replica; throughput follows the number of live nodes;
- ``redundant`` (Bamboo): a neighbour already holds the lost node's work, so the job fails over
  after a short pause, at the price of a constant step-time overhead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simtrain.specs.reliability import (
    ElasticRecoverySpec,
    LiveMigrationRecoverySpec,
    RedundantRecoverySpec,
    ReliabilitySpec,
)

NodeLossAction = Literal["restart", "elastic", "live_migration", "redundant"]


@dataclass(frozen=True)
class RecoveryPlan:
    """A recovery policy in plain numbers."""

    node_loss: NodeLossAction
    """What happens when a failure takes a node out."""
    detection_s: float
    """Seconds from a failure to its detection."""
    restart_s: float
    """Seconds to reschedule and initialise before a checkpoint load."""
    num_spare_nodes: int = 0
    """Hot spares of the ``restart`` policy."""
    reconfigure_s: float = 0.0
    """Pause of the no-rollback policies when a node leaves or rejoins."""
    migrate_s: float = 0.0
    """Seconds to copy one node's shard of the model state from a healthy replica."""
    base_speed: float = 1.0
    """Throughput relative to the failure-free job (below 1 for redundant computation)."""
    repair_s: float = 0.0
    """Seconds until a failed node is back."""


def recovery_plan(spec: ReliabilitySpec, model_state_bytes: float, num_nodes: int) -> RecoveryPlan:
    """Resolve the spec's recovery policy into a :class:`RecoveryPlan`."""
    rec = spec.recovery
    repair_s = spec.repair_time_hours * 3600.0
    common = {"detection_s": rec.detection_s, "restart_s": rec.restart_s, "repair_s": repair_s}
    if isinstance(rec, ElasticRecoverySpec):
        return RecoveryPlan("elastic", reconfigure_s=rec.reconfigure_s, **common)
    if isinstance(rec, LiveMigrationRecoverySpec):
        # one node's shard crosses the peer link of one node
        node_bytes = model_state_bytes / num_nodes
        migrate_s = node_bytes / spec.storage.peer_copy_bandwidth_bytes_per_s
        return RecoveryPlan(
            "live_migration", reconfigure_s=rec.reconfigure_s, migrate_s=migrate_s, **common
        )
    if isinstance(rec, RedundantRecoverySpec):
        return RecoveryPlan(
            "redundant",
            reconfigure_s=rec.reconfigure_s,
            base_speed=1.0 / (1.0 + rec.overhead_fraction),
            **common,
        )
    return RecoveryPlan("restart", num_spare_nodes=rec.num_spare_nodes, **common)
