"""Pause Python's cyclic garbage collector while a program is built or replayed.

Building and replaying a program allocates hundreds of thousands to millions of small
objects (tasks, dependency lists, SimPy events) that hold no reference cycles: reference
counting frees them all. The cyclic collector still runs every few hundred allocations and,
each time the young objects survive, walks ever older generations, so a large program
spends a sixth or more of its build and replay in collections that free nothing
(``experiments/bench/scale.py`` case b: 44 -> 36 CPU seconds with the collector paused).
Pausing restores the caller's setting afterwards; any cyclic garbage made meanwhile is
collected by the next collection after it. A search's stage 1 (estimates of thousands of
configurations) is paused the same way, and freezes what it caches when it ends
(:func:`cyclic_gc_paused`).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def cyclic_gc_paused(freeze: bool = False) -> Iterator[None]:
    """The block run with the cyclic collector paused (if the caller had it enabled).

    ``freeze``: move what survives the block (a search's caches, which hold no reference
    cycles) out of the collector's reach (``gc.freeze``), so that its first pass after the
    block does not walk them all (a quarter of a second per stage-1 task of a plan); they
    are still freed by reference counting when the search drops them.
    """
    enabled = gc.isenabled()  # False: already paused (a nested call) or turned off
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


def without_cyclic_gc(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run with the cyclic collector paused (if the caller had it enabled)."""

    @functools.wraps(function)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with cyclic_gc_paused():
            return function(*args, **kwargs)

    return paused
