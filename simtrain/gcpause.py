"""Pause Python's cyclic garbage collector while a program is built or replayed.

Building and replaying a program allocates hundreds of thousands to millions of small
objects (tasks, dependency lists, SimPy events) that hold no reference cycles: reference
counting frees them all. The cyclic collector still runs every few hundred allocations and,
each time the young objects survive, walks ever older generations, so a large program
spends a sixth or more of its build and replay in collections that free nothing
(``experiments/bench/scale.py`` case b: 44 -> 36 CPU seconds with the collector paused).
Pausing restores the caller's setting afterwards; any cyclic garbage made meanwhile is
collected by the next collection after it.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def without_cyclic_gc(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run with the cyclic collector paused (if the caller had it enabled)."""

    @functools.wraps(function)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():  # already paused (a nested call) or turned off by the caller
            return function(*args, **kwargs)
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.enable()

    return paused
