"""Every shipped input passes the front door without a warning (warnings are errors here).

The front door refuses what is wrong; what it accepts must not need a warning. This checks
every experiment, sweep and topology preset the repository ships, in-process and without
simulating (``experiments/bench/hostile.py --shipped`` runs the real commands under
``python -X dev -W error::UserWarning``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from simtrain.api import check_hardware, network_model_for
from simtrain.cli.commands_network import load_cluster
from simtrain.limits import check_tasks, check_topology
from simtrain.specs.loader import load_experiment, load_yaml_tree
from simtrain.specs.sweep import load_sweep

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(
    p
    for p in (ROOT / "experiments").rglob("*.yaml")
    if not p.name.startswith("_") and "sweeps" not in p.parts
)
SWEEPS = sorted((ROOT / "experiments" / "sweeps").glob("*.yaml"))
TOPOLOGIES = sorted((ROOT / "topologies").glob("*.yaml"))


def test_there_are_shipped_inputs():
    assert len(EXPERIMENTS) >= 5 and SWEEPS and len(TOPOLOGIES) >= 5


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_experiment_is_accepted_without_a_warning(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = load_experiment(path)
        check_hardware(spec)
        check_tasks(spec, None)
        network_model_for(spec)


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_shipped_sweep_is_accepted_without_a_warning(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_sweep(path)


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.name)
def test_shipped_topology_is_accepted_without_a_warning(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_yaml_tree(path)
        check_topology(load_cluster(str(path)))
