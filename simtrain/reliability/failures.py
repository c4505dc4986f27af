"""Failure processes of a job: presets, job-level rates and inter-arrival samplers.

A failure process of the spec gives a rate per device-hour; over a job of N devices its
failures form one job-level renewal process with mean inter-arrival 1 / (N · rate), exponential
or Weibull with that mean. Presets are YAML lists of ``FailureProcessSpec`` in ``presets/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import get_args

import numpy as np
import yaml
from pydantic import TypeAdapter, ValidationError

from simtrain.errors import SpecError
from simtrain.specs.loader import format_validation_error
from simtrain.specs.reliability import (
    FailurePresetName,
    FailureProcessSpec,
    InterArrivalSpec,
    ReliabilitySpec,
    WeibullInterArrival,
)

PRESET_NAMES: tuple[str, ...] = get_args(FailurePresetName)
_SAMPLE_BLOCK = 256  # draws per refill: numpy is ~50x faster per value in blocks


@cache
def load_preset(name: str) -> tuple[FailureProcessSpec, ...]:
    """Failure processes of a named preset (``llama3-405b``, ``rsc-1``, ...).

    Raises:
        SpecError: the name is not a preset; the message lists the valid ones.
    """
    if name not in PRESET_NAMES:
        raise SpecError(
            f"'reliability.failure_preset' must be one of {', '.join(PRESET_NAMES)} (got {name!r})"
        )
    text = resources.files("simtrain.reliability").joinpath(f"presets/{name}.yaml").read_text()
    try:
        return tuple(TypeAdapter(list[FailureProcessSpec]).validate_python(yaml.safe_load(text)))
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, f"preset {name}")) from None


def failure_processes(spec: ReliabilitySpec) -> tuple[FailureProcessSpec, ...]:
    """The preset's processes (if any) followed by the spec's own."""
    preset = load_preset(spec.failure_preset) if spec.failure_preset else ()
    return (*preset, *spec.failures)


@dataclass(frozen=True)
class FailureSource:
    """One job-level failure process in plain numbers."""

    cause: str
    """Component class, the key of the by-cause reports."""
    rate_per_s: float
    """Job-level failures per second."""
    loses_node: bool
    """Whether the failure takes a node out until repaired."""
    weibull_shape: float | None = None
    """Weibull shape, or None for exponential inter-arrivals."""


def job_sources(
    spec: ReliabilitySpec, num_gpus: int, gpus_per_node: int
) -> tuple[FailureSource, ...]:
    """Job-level failure sources of a job on ``num_gpus`` GPUs, by component class.

    Processes of the same class, distribution and node loss are merged (rates add), so a job
    has at most one source per cause and kind.
    """
    num_nodes = -(-num_gpus // gpus_per_node)
    merged: dict[tuple[str, float | None, bool], float] = {}
    for proc in failure_processes(spec):
        devices = num_gpus if proc.device == "gpu" else num_nodes
        rate = proc.rate_per_device_hour * devices * spec.failure_rate_scale / 3600.0
        key = (proc.component, _shape(proc.inter_arrival), proc.loses_node)
        merged[key] = merged.get(key, 0.0) + rate
    return tuple(
        FailureSource(cause, rate, loses, shape)
        for (cause, shape, loses), rate in merged.items()
        if rate > 0
    )


def _shape(inter_arrival: InterArrivalSpec) -> float | None:
    return inter_arrival.shape if isinstance(inter_arrival, WeibullInterArrival) else None


def job_mttf_s(sources: tuple[FailureSource, ...]) -> float:
    """Mean time between failures of the job, all causes together (inf without failures)."""
    total = sum(s.rate_per_s for s in sources)
    return math.inf if total == 0 else 1.0 / total


class InterArrivalSampler:
    """Draws inter-arrival times of one renewal process from its own generator, in blocks."""

    def __init__(self, rng: np.random.Generator, mean_s: float, shape: float | None) -> None:
        self._rng = rng
        self._shape = shape
        # A Weibull with shape k and scale λ has mean λ·Γ(1 + 1/k): pick λ to keep the mean.
        self._scale = mean_s if shape is None else mean_s / math.gamma(1.0 + 1.0 / shape)
        self._block: list[float] = []

    def __call__(self) -> float:
        """Next inter-arrival time in seconds."""
        if not self._block:
            if self._shape is None:
                draws = self._rng.exponential(self._scale, _SAMPLE_BLOCK)
            else:
                draws = self._rng.weibull(self._shape, _SAMPLE_BLOCK) * self._scale
            self._block = draws[::-1].tolist()
        return self._block.pop()
