"""SimulationResult: everything one simulated step produced, and its JSON report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from simtrain.metrics.cost import cost_summary
from simtrain.metrics.flops import StepFlops, flops_per_token_by_convention
from simtrain.metrics.timeline import RankTime
from simtrain.parallel.program import Program
from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.hardware import AcceleratorSpec
from simtrain.workload.optimizers import OPTIMIZERS


@dataclass
class MemorySummary:
    """Peak device memory of the fullest rank, by category, against capacity."""

    peak_bytes: float
    capacity_bytes: float
    breakdown_bytes: dict[str, float]
    near_limit_bytes: float = 0.0

    @property
    def verdict(self) -> str:
        """``fits``, ``near_limit`` or ``oom`` (``simtrain.memory.memory_verdict``)."""
        from simtrain.memory.estimate import memory_verdict

        return memory_verdict(self.peak_bytes, self.capacity_bytes, self.near_limit_bytes)

    @property
    def fits(self) -> bool:
        """False only when the peak exceeds the capacity beyond the near-limit band."""
        return self.verdict != "oom"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (report key ``memory``)."""
        return {
            "peak_bytes": self.peak_bytes,
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "verdict": self.verdict,
            "near_limit_bytes": self.near_limit_bytes,
            "breakdown_bytes": dict(self.breakdown_bytes),
        }


class Replay(Protocol):
    """The tasks of a replayed step and their times (``simtrain.engine.EngineResult``)."""

    @property
    def program(self) -> Program:
        """The replayed program."""
        ...

    @property
    def start_s(self) -> np.ndarray:
        """Start time of each task."""
        ...

    @property
    def end_s(self) -> np.ndarray:
        """End time of each task."""
        ...

    @property
    def num_tasks(self) -> int:
        """Tasks of the program (without recording any)."""
        ...


@dataclass
class SimulationResult:
    """The outcome of simulating one training step of an experiment.

    Attributes:
        spec: the fully resolved experiment.
        accelerator: the catalog entry of the cluster's accelerator.
        step_time_s: simulated time of one optimizer step.
        flops: model and hardware FLOPs of the step (whole job).
        ranks: time accounting of each simulated rank.
        weights: how many ranks each simulated rank stands for.
        memory: peak memory summary.
        num_params: model parameters.
        program: the replayed program (tasks), host tasks included (a property of
            ``replay``).
        start_s, end_s: start and end time of each task (properties of ``replay``).
        num_events: engine events processed.
        replay_wall_s: host seconds of the SimPy replay alone (building the program and
            timing its tasks excluded).
        wall_time_s: host seconds the simulation took (build + replay).
        version: simtrain version that produced the result.
        comm_choices: (algorithm, protocol) of each task's communication, as the network
            model chose them (empty strings for compute tasks); worked out on first use by
            ``choices`` (only timelines read them).
        step_times_s: step time of every replayed step (``simulate(repeat=N)``); the first
            is ``step_time_s``.
    """

    spec: ExperimentSpec
    accelerator: AcceleratorSpec
    step_time_s: float
    flops: StepFlops
    ranks: list[RankTime]
    weights: dict[int, int]
    memory: MemorySummary
    num_params: int
    replay: Replay = field(repr=False)
    """The engine's replay of the step: its tasks and their times (``program``, ``start_s``,
    ``end_s``), host tasks recorded on first use."""
    num_events: int = 0
    replay_wall_s: float = 0.0
    wall_time_s: float = 0.0
    version: str = ""
    calibration: dict[str, str] = field(default_factory=dict)
    """Name, provenance (fitted / inherited / assumed) and source of the compute constants."""
    choices: Callable[[], list[tuple[str, str]]] | None = field(default=None, repr=False)
    """Works out ``comm_choices``."""
    step_times_s: tuple[float, ...] = ()

    @cached_property
    def comm_choices(self) -> list[tuple[str, str]]:
        """(algorithm, protocol) of each task's communication (empty for compute tasks)."""
        return self.choices() if self.choices is not None else []

    @property
    def program(self) -> Program:
        """The replayed program, host tasks included."""
        return self.replay.program

    @property
    def start_s(self) -> np.ndarray:
        """Start time of each task, indexed like ``program.tasks``."""
        return self.replay.start_s

    @property
    def end_s(self) -> np.ndarray:
        """End time of each task."""
        return self.replay.end_s

    @property
    def num_gpus(self) -> int:
        """Devices in the job."""
        return self.spec.cluster.num_gpus

    @property
    def tokens_per_step(self) -> int:
        """Tokens consumed by one optimizer step."""
        return self.spec.parallel.global_batch_size * self.spec.model.seq_length

    @property
    def peak_flops_per_gpu(self) -> float:
        """Dense peak FLOP/s of one device at the training dtype."""
        return self.accelerator.peak_flops[self.spec.training.dtype]

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOP/s over the job's dense peak."""
        return self.flops.model / (self.step_time_s * self.num_gpus * self.peak_flops_per_gpu)

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation: as MFU, but counting recomputation."""
        return self.flops.hardware / (self.step_time_s * self.num_gpus * self.peak_flops_per_gpu)

    @property
    def model_state_bytes(self) -> float:
        """Bytes of weights, gradients and optimizer states of the whole job.

        This is the checkpoint basis: the 16-bit weight and gradient (4 bytes) plus the
        optimizer's FP32 master and states, 16 per parameter for mixed-precision Adam.
        """
        per_param = 4 + OPTIMIZERS[self.spec.training.optimizer].state_bytes
        return float(self.num_params * per_param)

    def _mean(self, attribute: str) -> float:
        total = sum(self.weights[r.rank] * getattr(r, attribute) for r in self.ranks)
        return total / sum(self.weights[r.rank] for r in self.ranks)

    def breakdown_s(self) -> dict[str, float]:
        """Mean per-rank time by task category (overlapping communication included)."""
        totals: dict[str, float] = {}
        weight_sum = sum(self.weights[r.rank] for r in self.ranks)
        for r in self.ranks:
            for category, seconds in r.by_category_s.items():
                totals[category] = totals.get(category, 0.0) + self.weights[r.rank] * seconds
        return {k: v / weight_sum for k, v in sorted(totals.items())}

    def exposed_by_category_s(self) -> dict[str, float]:
        """Mean per-rank exposed communication by category (see ``RankTime``)."""
        totals: dict[str, float] = {}
        weight_sum = sum(self.weights[r.rank] for r in self.ranks)
        for r in self.ranks:
            for category, seconds in r.exposed_by_category_s.items():
                totals[category] = totals.get(category, 0.0) + self.weights[r.rank] * seconds
        return {k: v / weight_sum for k, v in sorted(totals.items())}

    def summary(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (the content of ``report.json``)."""
        step = self.step_time_s
        exposed = self._mean("exposed_comm_s")
        bubble = self._mean("bubble_s")
        return {
            "name": self.spec.name,
            "step_time_s": step,
            "tokens_per_s": self.tokens_per_step / step,
            "tflops_per_gpu": self.flops.hardware / step / self.num_gpus / 1e12,
            "model_tflops_per_gpu": self.flops.model / step / self.num_gpus / 1e12,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "exposed_comm_s": exposed,
            "exposed_comm_by_category_s": self.exposed_by_category_s(),
            "exposed_host_s": self._mean("exposed_host_s"),
            "compute_calibration": dict(self.calibration),
            "bubble_s": bubble,
            "bubble_fraction": bubble / step,
            "compute_s": self._mean("busy_s"),
            "breakdown_s": self.breakdown_s(),
            "memory": self.memory.to_dict(),
            "cost": cost_summary(self),
            "num_gpus": self.num_gpus,
            "num_params": self.num_params,
            "tokens_per_step": self.tokens_per_step,
            "model_flops_per_step": self.flops.model,
            "hardware_flops_per_step": self.flops.hardware,
            "model_flops_per_token": flops_per_token_by_convention(self.spec.model),
            "simulation": {
                "wall_time_s": self.wall_time_s,
                "events": self.num_events,
                "replay_wall_s": self.replay_wall_s,
                "events_per_s": (
                    self.num_events / self.replay_wall_s if self.replay_wall_s else 0.0
                ),
                "simulated_ranks": len(self.ranks),
                "tasks": self.replay.num_tasks,
            },
            **self.step_time_distribution(),
            "spec": self.spec.model_dump(mode="json"),
            "simtrain_version": self.version,
        }

    def step_time_distribution(self) -> dict[str, float | int]:
        """Mean, median, 99th percentile and standard deviation of the replayed step times.

        Empty for a single step: the keys of ``simtrain run --repeat N`` (N > 1).
        """
        if len(self.step_times_s) < 2:
            return {}
        times = np.array(self.step_times_s)
        return {
            "step_time_s_mean": float(times.mean()),
            "step_time_s_p50": float(np.percentile(times, 50)),
            "step_time_s_p99": float(np.percentile(times, 99)),
            "step_time_s_std": float(times.std(ddof=1)),
            "step_time_repeats": len(times),
        }

    # Notebook views (simtrain.report draws them; imported on use to keep this module light)

    def to_frame(self) -> Any:
        """Headline metrics as a one-row pandas DataFrame (column names carry units)."""
        from simtrain.report.frames import result_frame

        return result_frame(self)

    def events_frame(self) -> Any:
        """Every task of the step as a pandas DataFrame (rank, stream, label, start_s, ...)."""
        from simtrain.report.frames import events_frame

        return events_frame(self)

    def plot_timeline(self) -> Any:
        """Gantt chart of one pipeline over the step (a matplotlib Figure)."""
        from simtrain.report.plots import plot_timeline

        return plot_timeline(self)

    def plot_breakdown(self) -> Any:
        """Step time by state and communication by kind, per stage (a matplotlib Figure)."""
        from simtrain.report.plots import plot_breakdown

        return plot_breakdown(self)

    def plot_memory(self) -> Any:
        """Memory of each stage over the step against capacity (a matplotlib Figure)."""
        from simtrain.report.plots import plot_memory

        return plot_memory(self)

    def _repr_html_(self) -> str:
        from simtrain.report.frames import result_html

        return result_html(self)
