"""Small builders of plain-number run parameters for the reliability tests."""

from simtrain.reliability.checkpoint import CheckpointPlan, CheckpointTier
from simtrain.reliability.failures import FailureSource
from simtrain.reliability.recovery import RecoveryPlan
from simtrain.reliability.run import RunParams


def restart_params(
    failures_per_s: float,
    interval_s: float,
    stall_s: float,
    restart_s: float,
    total_work_s: float,
    step_time_s: float = 1.0,
    num_spare_nodes: int = 10**6,
) -> RunParams:
    """A sync-checkpoint, restart-on-spare job with one exponential failure source."""
    return RunParams(
        total_work_s=total_work_s,
        step_time_s=step_time_s,
        num_nodes=128,
        dp=16,
        sources=(FailureSource("gpu", failures_per_s, True),) if failures_per_s > 0 else (),
        checkpoint=CheckpointPlan(interval_s, stall_s, (CheckpointTier(1, 0.0, 0.0),), stall_s),
        recovery=RecoveryPlan(
            "restart",
            detection_s=0.0,
            restart_s=restart_s,
            num_spare_nodes=num_spare_nodes,
            repair_s=7200.0,
        ),
    )
