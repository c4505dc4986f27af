"""Pipeline schedules: pure functions from (pp, num_microbatches, vpp) to per-rank actions.

Importing this package registers every built-in schedule: ``gpipe``, ``1f1b``, ``interleaved``,
``zb-h1``, ``zb-h2`` and ``dualpipe``. Use :func:`build_schedule` to get validated action lists.
"""

from __future__ import annotations

from simtrain.parallel.schedules import dualpipe as _dualpipe
from simtrain.parallel.schedules import gpipe as _gpipe
from simtrain.parallel.schedules import interleaved as _interleaved
from simtrain.parallel.schedules import one_f_one_b as _one_f_one_b
from simtrain.parallel.schedules import zero_bubble as _zero_bubble
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
    "validate_schedule",
]


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
