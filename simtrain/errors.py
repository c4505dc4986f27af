"""Exceptions raised by simtrain.

The tree::

    SimtrainError                     base of everything simtrain raises on purpose
    ├── SpecError (also ValueError)   bad user input: a field, its value, what is valid
    ├── TraceFormatError (ValueError) a trace file that does not follow the schema
    ├── ScheduleError                 a pipeline schedule that cannot run (carries the grid)
    └── EngineDeadlock                the engine stopped with ranks still waiting

An infeasible configuration (out of memory, a degree that does not divide) found by a sweep is a
*verdict* in a result, not an exception; these exceptions are for input that cannot be
simulated at all. The CLI prints their message on one line and exits non-zero.
"""

from __future__ import annotations


class SimtrainError(Exception):
    """Base class of every error simtrain raises deliberately."""


class SpecError(SimtrainError, ValueError):
    """A user specification is invalid.

    The message has the shape ``'<field path>' must be <constraint> (got <value>)``.
    """


class TraceFormatError(SimtrainError, ValueError):
    """A trace does not follow the trace schema."""


class ScheduleError(SimtrainError):
    """A pipeline schedule is inconsistent; ``grid`` shows it step by step."""

    def __init__(self, message: str, grid: str = "") -> None:
        super().__init__(message if not grid else f"{message}\n{grid}")
        self.grid = grid


class EngineDeadlock(SimtrainError):
    """The simulation ended while some ranks still waited for a peer or a dependency."""
