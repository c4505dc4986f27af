import doctest
import importlib

import pytest

MODULES = [
    "simtrain.parallel.layout",
    "simtrain.parallel.schedule_timing",
    "simtrain.parallel.schedules",
    "simtrain.parallel.schedules.base",
    "simtrain.parallel.schedules.check",
    "simtrain.parallel.schedules.dualpipe",
    "simtrain.parallel.schedules.gpipe",
    "simtrain.parallel.schedules.interleaved",
    "simtrain.parallel.schedules.one_f_one_b",
    "simtrain.parallel.schedules.zero_bubble",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0
