"""simtrain: a discrete-event simulator of LLM training clusters.

Describe a model, a parallel configuration and a cluster; simtrain replays the operator-level
program of every rank on a SimPy engine and reports step time, MFU, pipeline bubble, exposed
communication, memory, goodput and cost.

Examples:
    >>> import simtrain
    >>> spec = simtrain.load_experiment("experiments/quickstart.yaml")  # doctest: +SKIP
    >>> simtrain.simulate(spec).summary()["mfu"]  # doctest: +SKIP
    0.41...
"""

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

# The functions shadow the subpackage ``simtrain.sweep`` as an attribute of ``simtrain``;
# import submodules by their full path (``from simtrain.sweep.run import run_sweep``).
from simtrain.sweep import plan, sweep

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
