"""Every ``Examples`` section in simtrain's docstrings runs and gives what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import simtrain

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(simtrain.__path__, prefix="simtrain.")
    if not info.name.startswith("simtrain.cli")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
