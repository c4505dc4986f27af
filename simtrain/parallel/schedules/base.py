"""Pipeline-schedule data: actions, the schedule registry, and argument checks.

A pipeline schedule is a pure function ``(pp, num_microbatches, vpp=1) -> dict[rank,
list[Action]]``: for every pipeline rank, the compute actions it runs, in order. It knows
nothing about time; :mod:`simtrain.parallel.schedule_timing` turns the lists into a
:class:`~simtrain.parallel.program.Program` for the engine, and
:mod:`simtrain.parallel.schedules.check` validates them and prints them as a step × rank grid.
This follows PyTorch pipelining (``torch/distributed/pipelining/schedules.py``: ``_Action``,
``_calculate_single_rank_operations``), which also separates the per-rank action lists from
their execution.

Conventions shared by every schedule:

- ``stage`` is the *model* stage an action computes: ``0 .. num_stages-1`` in model order. For
  plain schedules it equals the rank. For the interleaved schedule it is the virtual stage
  ``chunk * pp + rank`` (Megatron's layout of model chunks). For DualPipe see
  :mod:`simtrain.parallel.schedules.dualpipe`: the direction is carried by the microbatch.
- ``F`` is a forward, ``B`` a backward, ``W`` a weight-gradient pass. A schedule that splits the
  backward (zero-bubble, part of DualPipe) emits ``B`` for the input gradient and a later ``W``
  for the weight gradient; when a (stage, microbatch) has no ``W``, its ``B`` is the full
  backward (input and weight gradients).
- Data dependencies are :func:`action_deps`: ``F(s, j)`` after ``F(s-1, j)``; ``B(s, j)`` after
  ``F(s, j)`` and ``B(s+1, j)`` (the last stage's backward follows its own forward, through the
  loss); ``W(s, j)`` after ``B(s, j)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from simtrain.errors import SpecError

ActionKind = Literal["F", "B", "W"]
ACTION_KINDS: tuple[ActionKind, ...] = ("F", "B", "W")


@dataclass(frozen=True, slots=True, order=True)
class Action:
    """One compute action of a pipeline rank.

    Attributes:
        stage: model stage (virtual stage for interleaved schedules).
        kind: ``F`` forward, ``B`` backward (input gradient, or full when no ``W`` follows),
            ``W`` weight gradient.
        microbatch: 0-based microbatch index.

    Examples:
        >>> str(Action(0, "F", 3))
        '0F3'
    """

    stage: int
    kind: ActionKind
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


RankActions = dict[int, list[Action]]
"""Each pipeline rank's actions in execution order."""


class PipelineSchedule(Protocol):
    """A schedule function: per-rank action lists for ``pp`` ranks and ``num_microbatches``."""

    def __call__(self, pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
        """Return each rank's actions in execution order."""
        ...


SCHEDULES: dict[str, PipelineSchedule] = {}
"""Registry of schedule functions by name (filled by :func:`register_schedule`)."""


def register_schedule(name: str) -> Callable[[PipelineSchedule], PipelineSchedule]:
    """Decorator that adds a schedule function to :data:`SCHEDULES` under ``name``."""

    def decorate(fn: PipelineSchedule) -> PipelineSchedule:
        SCHEDULES[name] = fn
        return fn

    return decorate


def get_schedule(name: str) -> PipelineSchedule:
    """Look up a schedule function by name.

    Raises:
        SpecError: ``name`` is not registered; the message lists the valid names.

    Examples:
        >>> [str(a) for a in get_schedule("1f1b")(2, 2)[1]]
        ['1F0', '1B0', '1F1', '1B1']
    """
    try:
        return SCHEDULES[name]
    except KeyError:
        valid = ", ".join(SCHEDULES)
        raise SpecError(f"'schedule' must be one of {valid} (got {name!r})") from None


def check_args(
    pp: int, num_microbatches: int, vpp: int = 1, *, name: str, allow_vpp: bool = False
) -> None:
    """Reject degrees a schedule cannot run, naming the argument and what is valid.

    Raises:
        SpecError: ``pp`` or ``num_microbatches`` below 1, or ``vpp`` other than 1 for a
            schedule without model chunks.
    """
    if pp < 1:
        raise SpecError(f"'pp' must be at least 1 (got {pp})")
    if num_microbatches < 1:
        raise SpecError(f"'num_microbatches' must be at least 1 (got {num_microbatches})")
    if vpp < 1:
        raise SpecError(f"'vpp' must be at least 1 (got {vpp})")
    if vpp != 1 and not allow_vpp:
        raise SpecError(f"'vpp' must be 1 for the {name} schedule (got {vpp}); use interleaved")


def action_deps(action: Action, num_stages: int) -> tuple[tuple[int, ActionKind, int], ...]:
    """The (stage, kind, microbatch) keys that must finish before ``action`` can start.

    Examples:
        >>> action_deps(Action(1, "B", 0), num_stages=3)
        ((1, 'F', 0), (2, 'B', 0))
        >>> action_deps(Action(2, "B", 0), num_stages=3)
        ((2, 'F', 0),)
    """
    s, j = action.stage, action.microbatch
    if action.kind == "F":
        return ((s - 1, "F", j),) if s > 0 else ()
    if action.kind == "B":
        return ((s, "F", j), (s + 1, "B", j)) if s < num_stages - 1 else ((s, "F", j),)
    return ((s, "B", j),)


def num_stages_of(actions: RankActions) -> int:
    """Number of model stages the action lists cover (highest stage index + 1)."""
    return 1 + max((a.stage for acts in actions.values() for a in acts), default=-1)
