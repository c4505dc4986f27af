"""Abstract timing of a pipeline schedule: action lists → a Program → bubble, step, memory.

:func:`schedule_program` turns per-rank action lists into a
:class:`~simtrain.parallel.program.Program` of fixed-duration compute tasks (one per action, on
the rank's ``compute`` stream, in list order) with the schedule's data dependencies
(:func:`~simtrain.parallel.schedules.base.action_deps`). The engine replays it;
:func:`schedule_metrics` then reads the bubble fraction, step time and peak in-flight
microbatches off the engine's task times. This is the teaching and testing view of pipelines
(``simtrain schedule``); real runs expand each action into the ops of its layers instead.

Durations (:class:`StageTimes`) are per microbatch for one *full* pipeline stage (the layers of
one rank in a plain schedule):

- ``F`` costs ``forward_s``;
- a ``B`` with no ``W`` for its (stage, microbatch) is a full backward and costs
  ``backward_s``; a split ``B`` (a ``W`` follows) costs ``backward_s - weight_s`` and its ``W``
  costs ``weight_s``. So T_B + T_W = t_b, as in Zero Bubble
  (``docs/references/pipeline-theory.md`` §9), and split and non-split schedules do the same work;
- with v model chunks per rank (interleaved) every action covers 1/v of a stage and costs 1/v of
  the above; DualPipe's actions are full stages (each rank holds two);
- ``p2p_s`` > 0 adds a transfer task between consecutive stages on different ranks, on a
  per-destination stream ``pp_comm:<dst>`` of the sender (transfers to one peer are serial).

With equal stage times and ``p2p_s = 0`` the engine reproduces the closed forms exactly: bubble
fraction (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v·m+p-1) for interleaved, ZB-H1 bubble time
(p-1)(T_F+T_B-T_W) (DESIGN.md "Key definitions"; ``docs/references/pipeline-theory.md`` §9).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from simtrain.errors import SpecError
from simtrain.parallel.program import Program, Task
from simtrain.parallel.schedules.base import Action, RankActions, action_deps, num_stages_of


@dataclass(frozen=True)
class StageTimes:
    """Abstract per-microbatch times of one full pipeline stage.

    Attributes:
        forward_s: forward pass (T_F).
        backward_s: full backward, input plus weight gradients (T_B + T_W).
        weight_s: the weight-gradient part a split schedule runs as ``W`` (T_W).
        p2p_s: transfer of activations or gradients between ranks (0 = free).
    """

    forward_s: float = 1.0
    backward_s: float = 2.0
    weight_s: float = 1.0
    p2p_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("forward_s", "backward_s", "weight_s", "p2p_s"):
            if getattr(self, name) < 0:
                raise SpecError(f"'{name}' must be >= 0 (got {getattr(self, name)})")
        if self.weight_s > self.backward_s:
            raise SpecError(
                f"'weight_s' must be at most 'backward_s'={self.backward_s}, the full backward "
                f"it is part of (got {self.weight_s})"
            )


def schedule_program(actions: RankActions, times: StageTimes) -> Program:
    """Build the Program that replays ``actions`` with abstract durations.

    Task ``i`` for ``i < number of actions`` is an action (ranks in order, each in list order);
    transfer tasks follow.

    Examples:
        >>> from simtrain.parallel.schedules import build_schedule
        >>> program = schedule_program(build_schedule("1f1b", 2, 2), StageTimes())
        >>> [(t.label, t.duration_s, t.deps) for t in program.tasks if t.rank == 1]
        [('1F0', 1.0, (0,)), ('1B0', 2.0, (4,)), ('1F1', 1.0, (1,)), ('1B1', 2.0, (6,))]
    """
    num_stages = num_stages_of(actions)
    scale = len(actions) / num_stages
    keys = [(r, a) for r in sorted(actions) for a in actions[r]]
    index = {(a.stage, a.kind, a.microbatch): i for i, (_, a) in enumerate(keys)}
    rank_of = {(a.stage, a.microbatch): r for r, a in keys}
    tasks: list[Task] = []
    for rank, a in keys:
        split = (a.stage, "W", a.microbatch) in index
        duration = {
            "F": times.forward_s,
            "B": times.backward_s - times.weight_s if split else times.backward_s,
            "W": times.weight_s,
        }[a.kind]
        tasks.append(
            Task(
                rank=rank,
                stream="compute",
                label=str(a),
                duration_s=duration * scale,
                stage=a.stage,
                microbatch=a.microbatch,
            )
        )
    deps: list[list[int]] = [[] for _ in tasks]
    for i, (rank, a) in enumerate(keys):
        for dep in action_deps(a, num_stages):
            src = index[dep]
            src_rank = rank_of[(dep[0], dep[2])]
            if src_rank != rank and times.p2p_s > 0:
                tasks.append(
                    Task(
                        rank=src_rank,
                        stream=f"pp_comm:{rank}",
                        label=f"{tasks[src].label}>{rank}",
                        category="pp_comm",
                        duration_s=times.p2p_s,
                        deps=(src,),
                        group=(src_rank, rank),
                        stage=dep[0],
                        microbatch=dep[2],
                    )
                )
                src = len(tasks) - 1
            deps[i].append(src)
    for i, dep_list in enumerate(deps):
        tasks[i].deps = tuple(dep_list)
    ranks = tuple(sorted(actions))
    return Program(tasks=tasks, world_size=len(ranks), simulated_ranks=ranks)


@dataclass(frozen=True)
class ScheduleMetrics:
    """What a replayed schedule shows.

    Attributes:
        step_time_s: end of the last task (the step starts at 0).
        bubble_fraction: mean over ranks of idle compute time / step time.
        bubble_time_s: each rank's idle compute time inside the step.
        peak_inflight_microbatches: per rank, the most microbatches whose forward has started
            and whose backward (B) has not finished, in units of one full stage's activations
            (an interleaved chunk counts 1/v).
    """

    step_time_s: float
    bubble_fraction: float
    bubble_time_s: tuple[float, ...]
    peak_inflight_microbatches: tuple[float, ...]


_ACTION_LABEL = re.compile(r"^(\d+)([FBW])(\d+)")


def task_action(task: Task) -> Action | None:
    """The schedule action a compute task belongs to, read from its label (``0F3...``).

    Both the abstract program here and the per-op programs of the builder label every compute
    task of an action with ``str(action)`` (optionally followed by more text).

    Examples:
        >>> task_action(Task(rank=0, stream="compute", label="2B5"))
        Action(stage=2, kind='B', microbatch=5)
        >>> task_action(Task(rank=0, stream="compute", label="optimizer")) is None
        True
    """
    match = _ACTION_LABEL.match(task.label)
    if task.stream != "compute" or match is None:
        return None
    return Action(int(match[1]), match[2], int(match[3]))  # type: ignore[arg-type]


def inflight_intervals(
    program: Program, start_s: Sequence[float], end_s: Sequence[float], rank: int
) -> dict[tuple[int, int], tuple[float, float]]:
    """When each (stage, microbatch) of ``rank`` holds activations: (first F start, last B end).

    An action may span several tasks (one per layer in a per-op program); activations live
    from the start of its first forward task to the end of its last input-gradient task.
    """
    alloc: dict[tuple[int, int], float] = {}
    free: dict[tuple[int, int], float] = {}
    for i, task in enumerate(program.tasks):
        action = task_action(task) if task.rank == rank else None
        if action is None or action.kind == "W":
            continue
        key = (action.stage, action.microbatch)
        if action.kind == "F":
            alloc[key] = min(alloc.get(key, float("inf")), float(start_s[i]))
        else:
            free[key] = max(free.get(key, float("-inf")), float(end_s[i]))
    return {key: (t, free.get(key, float("inf"))) for key, t in alloc.items()}


def inflight_timeline(
    program: Program, start_s: Sequence[float], end_s: Sequence[float], rank: int
) -> list[tuple[float, float]]:
    """In-flight microbatches of ``rank`` over the step, as (time, count after the event).

    Counts are in units of one full stage (an interleaved chunk counts 1/v). At equal times
    frees come first (a rank's next forward starts as its backward ends).
    """
    actions = [task_action(t) for t in program.tasks]
    num_stages = 1 + max(a.stage for a in actions if a is not None)
    per_chunk = len(program.simulated_ranks) / num_stages
    events = []
    for alloc_s, free_s in inflight_intervals(program, start_s, end_s, rank).values():
        events += [(alloc_s, 1), (free_s, -1)]
    timeline, count = [], 0
    for time_s, delta in sorted(events):
        count += delta
        timeline.append((time_s, count * per_chunk))
    return timeline


def schedule_metrics(
    program: Program, start_s: Sequence[float], end_s: Sequence[float]
) -> ScheduleMetrics:
    """Bubble, step time and peak in-flight microbatches from a replay of ``program``."""
    step = max(float(e) for e in end_s)
    ranks = program.simulated_ranks
    busy = dict.fromkeys(ranks, 0.0)
    for i, task in enumerate(program.tasks):
        if task.stream == "compute":
            busy[task.rank] += float(end_s[i]) - float(start_s[i])
    idle = tuple(step - busy[r] for r in ranks)
    peaks = tuple(
        max((c for _, c in inflight_timeline(program, start_s, end_s, r)), default=0.0)
        for r in ranks
    )
    fraction = sum(idle) / (len(ranks) * step) if step > 0 else 0.0
    return ScheduleMetrics(step, fraction, idle, peaks)
