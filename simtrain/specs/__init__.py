"""User-facing specifications (pydantic): what to simulate, validated before anything runs.

The names below load on first use (PEP 562): a command that needs one spec class (the
catalog's ``AcceleratorSpec`` for ``simtrain list``) does not build every other model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simtrain.specs.cluster import ClusterSpec, TopologySpec
    from simtrain.specs.experiment import ExperimentSpec
    from simtrain.specs.loader import apply_overrides, experiment_from_dict, load_experiment
    from simtrain.specs.model import ModelSpec
    from simtrain.specs.parallel import MeshAxis, ParallelSpec
    from simtrain.specs.training import ExpectedSpec, SimulationSpec, TrainingSpec

__all__ = [
    "ClusterSpec",
    "ExpectedSpec",
    "ExperimentSpec",
    "MeshAxis",
    "ModelSpec",
    "ParallelSpec",
    "SimulationSpec",
    "TopologySpec",
    "TrainingSpec",
    "apply_overrides",
    "experiment_from_dict",
    "load_experiment",
]

_LAZY: dict[str, str] = {
    "ClusterSpec": "cluster",
    "TopologySpec": "cluster",
    "ExperimentSpec": "experiment",
    "apply_overrides": "loader",
    "experiment_from_dict": "loader",
    "load_experiment": "loader",
    "ModelSpec": "model",
    "MeshAxis": "parallel",
    "ParallelSpec": "parallel",
    "ExpectedSpec": "training",
    "SimulationSpec": "training",
    "TrainingSpec": "training",
}
"""Public name -> the submodule of ``simtrain.specs`` that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simtrain.specs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"simtrain.specs.{module}"), name)
