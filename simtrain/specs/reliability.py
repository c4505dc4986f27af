"""ReliabilitySpec: failures, checkpointing and recovery over a whole training run.

The section is optional in an experiment; with it, simtrain co-simulates the failures of the
cluster with the training they interrupt (``simtrain.reliability``). Sources of the default
numbers are in ``docs/references/reliability.md`` (cited by section, "§x").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from simtrain.specs.base import Spec, bounded

ComponentClass = Literal[
    "gpu", "hbm", "gpu_sram_processor", "nic", "switch_cable", "host", "software", "unknown"
]
"""Component classes of Llama 3's interruption taxonomy (Table 5, reliability.md §3.2)."""

FailurePresetName = Literal["llama3-405b", "rsc-1", "rsc-1-observed", "rsc-2"]
"""Failure-rate presets shipped as YAML in ``simtrain/reliability/presets/``."""


class ExponentialInterArrival(Spec):
    """Memoryless inter-arrival times (a Poisson process): the usual fleet-level assumption."""

    kind: Literal["exponential"] = "exponential"
    """Distribution family."""


class WeibullInterArrival(Spec):
    """Weibull inter-arrival times with the same mean as the rate implies.

    A shape below 1 gives bursts of failures (infant mortality, lemon nodes); above 1, wear-out.
    """

    kind: Literal["weibull"] = "weibull"
    """Distribution family."""
    shape: float = bounded(
        ge=0.05, le=100, why="published fits lie in 0.3-3; outside 0.05-100 the mean overflows"
    )
    """Weibull shape k (1 is exponential)."""


InterArrivalSpec = Annotated[
    ExponentialInterArrival | WeibullInterArrival, Field(discriminator="kind")
]


class FailureProcessSpec(Spec):
    """Job-interrupting failures of one component class, as a rate per device-hour."""

    component: ComponentClass
    """Component class, used to report interruptions and lost GPU-hours by cause."""
    rate_per_device_hour: float = bounded(
        ge=0, le=1, why="one failure per device-hour; fleets see about 1e-5"
    )
    """Failures per device-hour of the job; the job-level rate is this times the devices used."""
    device: Literal["gpu", "node"] = "gpu"
    """Device the rate counts per: one GPU or one node."""
    inter_arrival: InterArrivalSpec = ExponentialInterArrival()
    """Distribution of the time between two failures of this class across the whole job."""
    loses_node: bool = True
    """The failure takes a node out until it is repaired (hardware); false for faults that a
    restart clears (software bugs, NCCL timeouts)."""
    source: str = ""
    """Where the rate comes from, with the arithmetic."""


class StragglerSpec(Spec):
    """Fail-slow episodes: one rank runs slower for a while, slowing its synchronous job."""

    rate_per_gpu_hour: float = bounded(ge=0, le=1, why="one episode per GPU-hour")
    """Episodes per GPU-hour of the job."""
    slowdown_factor: float = bounded(
        ge=1, le=1000, why="a job 1,000x slower is stopped, not slowed"
    )
    """Step-time multiplier of the whole job while the episode lasts (1.34 in GREYHOUND)."""
    duration_s: float = bounded(gt=0, le=1e7, why="about 116 days, longer than any run")
    """Length of one episode in seconds (GREYHOUND: ≈24 min for communication fail-slows)."""
    inter_arrival: InterArrivalSpec = ExponentialInterArrival()
    """Distribution of the time between two episodes across the whole job."""


class MaintenanceSpec(Spec):
    """Planned interruptions (firmware, kernel upgrades): announced, so no work is lost."""

    interval_hours: float = bounded(ge=0.01, le=1e5, why="between every 36 s and every 11 years")
    """Hours between two planned interruptions (Llama 3: 54·24/47 ≈ 27.6 h)."""
    downtime_s: float = bounded(600.0, ge=0, le=1e7, why="about 116 days")
    """Seconds the job is down per planned interruption, restart included."""


class StorageSpec(Spec):
    """Bandwidths that set checkpoint write, persist and load times."""

    write_bandwidth_bytes_per_s: float = bounded(
        2e12, ge=1e6, le=1e16, why="1 MB/s to 5,000x the fastest storage deployed (2 TB/s)"
    )
    """Aggregate storage write bandwidth. Default: Llama 3's Tectonic, 2 TB/s sustained
    (docs/references/training-runs.md §3.3)."""
    read_bandwidth_bytes_per_s: float = bounded(
        2e12, ge=1e6, le=1e16, why="as write_bandwidth_bytes_per_s"
    )
    """Aggregate storage read bandwidth for checkpoint loads (same source)."""
    host_copy_bandwidth_bytes_per_s: float = bounded(
        64e9, ge=1e6, le=1e14, why="1 MB/s to 1,000x PCIe Gen5"
    )
    """GPU→host copy bandwidth per GPU. Default: PCIe Gen5 x16, ≈64 GB/s per direction
    (docs/references/hardware.md §7.2)."""
    peer_copy_bandwidth_bytes_per_s: float = bounded(
        400e9, ge=1e6, le=1e14, why="1 MB/s to 250x eight 400G NICs"
    )
    """Host→peer-host bandwidth per node for in-memory checkpoints. Default: 8 NICs × 400 Gb/s
    = 400 GB/s (Llama 3 RoCE, docs/references/hardware.md §7.3)."""


def _check_interval(value: Any) -> Any:
    """Accept a positive number of seconds or ``young_daly``; reject anything else clearly."""
    if isinstance(value, str) and value == "young_daly":
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number of seconds > 0 or 'young_daly'")
    if not 1 <= value <= 1e7:
        raise ValueError(
            "must be a number of seconds in 1..1e7 (a checkpoint takes seconds to write; 1e7 s "
            "is about 116 days) or 'young_daly'"
        )
    return float(value)


class _CheckpointBase(Spec):
    interval_s: float | Literal["young_daly"] = "young_daly"
    """Training seconds between checkpoints, or ``young_daly`` for sqrt(2 · stall · MTBF)
    (Young 1974; docs/references/reliability.md §8.3)."""

    @field_validator("interval_s", mode="before")
    @classmethod
    def _valid_interval(cls, value: Any) -> Any:
        """Reject intervals ≤ 0 and unknown words with one clear message."""
        return _check_interval(value)


class SyncCheckpointSpec(_CheckpointBase):
    """Training stalls while the whole checkpoint is written to storage."""

    kind: Literal["sync"] = "sync"
    """Checkpoint policy."""


class SnapshotCheckpointSpec(_CheckpointBase):
    """Snapshot-then-persist (CheckFreq, MegaScale): stall only for the GPU→host copy.

    The checkpoint counts once the background write to storage has finished.
    """

    kind: Literal["snapshot"] = "snapshot"
    """Checkpoint policy."""


class InMemoryCheckpointSpec(_CheckpointBase):
    """In-memory checkpoints in peer hosts (GEMINI), persisted to storage every few times."""

    kind: Literal["in_memory"] = "in_memory"
    """Checkpoint policy."""
    num_checkpoints_per_persist: int = bounded(10, ge=1, le=1 << 20, why="a million")
    """Every n-th in-memory checkpoint is also written to storage in the background."""
    peer_loss_probability: float = bounded(0.084, ge=0, le=1, why="a probability")
    """Probability that a failure also loses the peer holding the replica, forcing a load from
    storage. Default: share of network switch/cable interruptions in Llama 3, 35/419 = 0.084
    (docs/references/reliability.md §3.2), assuming such a fault takes down the failed node's
    rack peers too."""


CheckpointSpec = Annotated[
    SyncCheckpointSpec | SnapshotCheckpointSpec | InMemoryCheckpointSpec,
    Field(discriminator="kind"),
]


class _RecoveryBase(Spec):
    detection_s: float = bounded(150.0, ge=0, le=1e7, why="about 116 days")
    """Seconds from a failure to its detection. Default: half of Meta's 5-minute health-check
    period (docs/references/reliability.md §8.1)."""
    restart_s: float = bounded(300.0, ge=0, le=1e7, why="about 116 days")
    """Seconds to reschedule and initialise the job before loading a checkpoint (Meta: u₀ ≈
    5-20 min in total, docs/references/reliability.md §8.1)."""


class RestartRecoverySpec(_RecoveryBase):
    """Restart the whole job from the last checkpoint, on a hot spare or after the repair."""

    kind: Literal["restart"] = "restart"
    """Recovery policy."""
    num_spare_nodes: int = bounded(
        16, ge=0, le=1 << 20, why="as many nodes as the largest job has devices"
    )
    """Hot spare nodes; with none left the job waits for a repair (0 = always wait)."""


class ElasticRecoverySpec(_RecoveryBase):
    """Continue with fewer data-parallel replicas; a repaired node rejoins its replica."""

    kind: Literal["elastic"] = "elastic"
    """Recovery policy."""
    reconfigure_s: float = bounded(60.0, ge=0, le=1e7, why="about 116 days")
    """Seconds to rebuild communicators when a replica leaves or rejoins."""


class LiveMigrationRecoverySpec(_RecoveryBase):
    """Oobleck-style live migration: no rollback, the surviving nodes carry on.

    Pipelines are re-instantiated on the surviving nodes and the lost shard is copied from a
    healthy replica.
    """

    kind: Literal["live_migration"] = "live_migration"
    """Recovery policy."""
    reconfigure_s: float = bounded(60.0, ge=0, le=1e7, why="about 116 days")
    """Seconds to switch to a new pipeline template, before the state copy."""


class RedundantRecoverySpec(_RecoveryBase):
    """Bamboo-style redundant computation: a constant throughput overhead, no rollback."""

    kind: Literal["redundant"] = "redundant"
    """Recovery policy."""
    overhead_fraction: float = bounded(0.15, ge=0, lt=1, why="a fraction of the step")
    """Extra step time paid for the redundant computation (assumption; the reference gives
    only Bamboo's 3.7× end-to-end gain over checkpointing on spot instances)."""
    reconfigure_s: float = bounded(30.0, ge=0, le=1e7, why="about 116 days")
    """Seconds to fail over to the redundant copy."""


RecoverySpec = Annotated[
    RestartRecoverySpec | ElasticRecoverySpec | LiveMigrationRecoverySpec | RedundantRecoverySpec,
    Field(discriminator="kind"),
]


class ReliabilitySpec(Spec):
    """Failure processes and checkpoint/recovery policy of a training run."""

    failure_preset: FailurePresetName | None = None
    """Failure rates from a published source (``simtrain/reliability/presets``); combined with
    ``failures`` when both are given."""
    failures: tuple[FailureProcessSpec, ...] = ()
    """Failure processes in addition to the preset."""
    failure_rate_scale: float = bounded(1.0, ge=0, le=1e4, why="10,000x a measured fleet")
    """Multiplier on every failure rate, for what-if studies."""
    stragglers: tuple[StragglerSpec, ...] = ()
    """Fail-slow processes (none by default)."""
    maintenance: MaintenanceSpec | None = None
    """Planned interruptions; omit for none."""
    checkpoint: CheckpointSpec = SyncCheckpointSpec()
    """Checkpoint policy and interval."""
    recovery: RecoverySpec = RestartRecoverySpec()
    """What the job does after a failure."""
    storage: StorageSpec = StorageSpec()
    """Storage, host-copy and peer-copy bandwidths."""
    checkpoint_fraction_of_model_state: float = bounded(0.875, gt=0, le=1, why="a fraction")
    """Checkpoint size over model-state size: Adam keeps 16 bytes per parameter, of which the
    14 of weights, master weights, momentum and variance are saved (gradients are not):
    14/16 = 0.875."""
    repair_time_hours: float = bounded(2.2, gt=0, le=1e5, why="about 11 years")
    """Hours until a failed node is back. Default: the 2.2 h recovery assumed by NCSA Delta's
    spare-sizing study (docs/references/reliability.md §8.2)."""
    horizon_days: float | None = bounded(None, gt=0, le=1e4, why="about 27 years")
    """Stop after this many wall-clock days (a snapshot of a longer run, like Llama 3's 54-day
    window); omit to run to ``training.total_tokens``."""
    num_runs: int = bounded(100, ge=1, le=1 << 20, why="a million runs pin ETTR to 0.1%")
    """Monte Carlo repetitions."""
    gpu_hour_price_usd: float | None = bounded(
        None, ge=0, le=1000, why="100x the highest on-demand GPU price"
    )
    """Price of one GPU-hour; omit for the accelerator's dated preset
    (``simtrain/catalog/prices.py``, from docs/references/hardware.md §7.4)."""
