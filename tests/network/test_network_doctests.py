import doctest
import importlib

import pytest

MODULES = [
    "simtrain.network.flow",
    "simtrain.network.fabric_clos",
    "simtrain.topology.base",
    "simtrain.topology.build",
    "simtrain.topology.fat_tree",
    "simtrain.topology.rail",
    "simtrain.topology.node_fabric",
    "simtrain.cli.commands_network",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0
