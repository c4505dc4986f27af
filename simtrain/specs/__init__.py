"""User-facing specifications (pydantic): what to simulate, validated before anything runs."""

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
