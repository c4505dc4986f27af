"""simtrain: a discrete-event simulator of LLM training clusters.

Describe a model, a parallel configuration and a cluster; simtrain replays the operator-level
program of every rank on a SimPy engine and reports step time, MFU, pipeline bubble, exposed
communication, memory, goodput and cost.

Importing ``simtrain`` does no work: the public names below are loaded on first use (PEP 562),
so ``simtrain --help`` and ``simtrain list`` never import the engine, pandas, matplotlib or
networkx (``tests/test_startup.py`` guards this).

Examples:
    >>> import simtrain
    >>> spec = simtrain.load_experiment("experiments/quickstart.yaml")  # doctest: +SKIP
    >>> simtrain.simulate(spec).summary()["mfu"]  # doctest: +SKIP
    0.41...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The subpackage ``simtrain.sweep`` is imported (it is light) before the functions ``sweep``
# and ``plan`` below are bound, so they shadow it as attributes of ``simtrain`` for good;
# import its submodules by their full path (``from simtrain.sweep.run import run_sweep``).
import simtrain.sweep as _sweep_package  # noqa: F401

if TYPE_CHECKING:
    from simtrain.api import load_experiment, simtrain_version, simulate
    from simtrain.specs import (
        ClusterSpec,
        ExpectedSpec,
        ExperimentSpec,
        ModelSpec,
        ParallelSpec,
        SimulationSpec,
        TopologySpec,
        TrainingSpec,
    )
    from simtrain.specs.reliability import ReliabilitySpec
    from simtrain.specs.sweep import SweepSpec
    from simtrain.sweep.planner import PlanResult

__all__ = [
    "ClusterSpec",
    "ExpectedSpec",
    "ExperimentSpec",
    "ModelSpec",
    "ParallelSpec",
    "ReliabilitySpec",
    "SimulationSpec",
    "SweepSpec",
    "TopologySpec",
    "TrainingSpec",
    "load_experiment",
    "plan",
    "simtrain_version",
    "simulate",
    "sweep",
]

_LAZY: dict[str, str] = {
    "load_experiment": "simtrain.api",
    "simtrain_version": "simtrain.api",
    "simulate": "simtrain.api",
    "ReliabilitySpec": "simtrain.specs.reliability",
    "SweepSpec": "simtrain.specs.sweep",
    **dict.fromkeys(
        (
            "ClusterSpec",
            "ExpectedSpec",
            "ExperimentSpec",
            "ModelSpec",
            "ParallelSpec",
            "SimulationSpec",
            "TopologySpec",
            "TrainingSpec",
        ),
        "simtrain.specs",
    ),
}
"""Public name -> module that defines it, imported on first access."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simtrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def sweep(spec: Any, **kwargs: Any) -> Any:
    """Run a sweep and return its table; see :func:`simtrain.sweep.run.sweep`."""
    from simtrain.sweep.run import sweep as run

    return run(spec, **kwargs)


def plan(*args: Any, **kwargs: Any) -> PlanResult:
    """Plan a whole training run; see :func:`simtrain.sweep.planner.plan`."""
    from simtrain.sweep.planner import plan as make_plan

    return make_plan(*args, **kwargs)
