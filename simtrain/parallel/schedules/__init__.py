"""Pipeline schedules: pure functions from (pp, num_microbatches, vpp) to per-rank actions.

Importing this package registers every built-in schedule: ``gpipe``, ``1f1b``, ``interleaved``,
``zb-h1``, ``zb-h2`` and ``dualpipe``. Use :func:`build_schedule` to get validated action lists.
"""

from __future__ import annotations

# Import order is registration order, the order users see the names in.
# isort: off
from simtrain.parallel.schedules import gpipe as _gpipe
from simtrain.parallel.schedules import one_f_one_b as _one_f_one_b
from simtrain.parallel.schedules import interleaved as _interleaved
from simtrain.parallel.schedules import zero_bubble as _zero_bubble
from simtrain.parallel.schedules import dualpipe as _dualpipe

# isort: on
from simtrain.parallel.schedules.base import (
    SCHEDULES,
    Action,
    ActionKind,
    PipelineSchedule,
    RankActions,
    action_deps,
    get_schedule,
    num_stages_of,
    register_schedule,
)
from simtrain.parallel.schedules.check import format_grid, validate_schedule
from simtrain.parallel.schedules.dualpipe import dualpipe_rank_of

del _dualpipe, _gpipe, _interleaved, _one_f_one_b, _zero_bubble

__all__ = [
    "SCHEDULES",
    "Action",
    "ActionKind",
    "PipelineSchedule",
    "RankActions",
    "action_deps",
    "build_schedule",
    "dualpipe_rank_of",
    "format_grid",
    "get_schedule",
    "num_stages_of",
    "register_schedule",
    "split_backwards",
    "stage_rank",
    "validate_schedule",
]


def stage_rank(name: str, stage: int, microbatch: int, pp: int, num_microbatches: int) -> int:
    """Pipeline rank that runs ``stage`` for ``microbatch`` under schedule ``name``.

    Virtual stage s runs on rank s mod pp (plain and interleaved schedules); under DualPipe the
    microbatch's direction decides (:func:`dualpipe_rank_of`).

    Examples:
        >>> stage_rank("interleaved", 5, 0, pp=4, num_microbatches=8)
        1
        >>> stage_rank("dualpipe", 1, 6, pp=4, num_microbatches=8)
        2
    """
    if name == "dualpipe":
        return dualpipe_rank_of(Action(stage, "F", microbatch), pp, num_microbatches)
    return stage % pp


def split_backwards(actions: list[Action]) -> set[tuple[int, int]]:
    """(stage, microbatch) pairs whose backward is split into B and a later W on this rank.

    Decide per pair, not per rank: DualPipe splits only some of a rank's backwards.

    Examples:
        >>> sorted(split_backwards(build_schedule("dualpipe", 2, 4)[0]))
        [(0, 1)]
    """
    return {(a.stage, a.microbatch) for a in actions if a.kind == "W"}


def build_schedule(name: str, pp: int, num_microbatches: int, vpp: int = 1) -> RankActions:
    """Look up schedule ``name``, build its action lists and validate them.

    Raises:
        SpecError: unknown name or arguments the schedule cannot run.
        ScheduleError: the lists are inconsistent (a bug in the schedule function).

    Examples:
        >>> acts = build_schedule("interleaved", pp=2, num_microbatches=4, vpp=2)
        >>> num_stages_of(acts)
        4
    """
    actions = get_schedule(name)(pp, num_microbatches, vpp)
    validate_schedule(actions, num_microbatches, num_stages_of(actions))
    return actions
