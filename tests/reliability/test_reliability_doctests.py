import doctest
import importlib

import pytest

MODULES = ["simtrain.reliability.closed_form", "simtrain.reliability.montecarlo"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0
