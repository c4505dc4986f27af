import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["simtrain.memory.activations", "simtrain.memory.model_states"])
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0
