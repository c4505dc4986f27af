"""Validity checks of pipeline action lists, and the step × rank grid that shows them.

:func:`validate_schedule` proves a schedule runnable before any engine sees it: every (stage,
microbatch) gets exactly one F and one B (and at most one W, after its B), all on one rank, and
the per-rank orders admit an execution under the data dependencies of
:func:`~simtrain.parallel.schedules.base.action_deps` (no deadlock). Failures raise
:class:`~simtrain.errors.ScheduleError` carrying :func:`format_grid` of the lists, the format
also used for golden files and the CLI (PyTorch's ``_format_pipeline_order`` does the same).
"""

from __future__ import annotations

from collections import Counter

from simtrain.errors import ScheduleError
from simtrain.parallel.schedules.base import Action, RankActions, action_deps


def format_grid(actions: RankActions) -> str:
    """Render the action lists as a step × rank grid (row k = each rank's k-th action).

    Examples:
        >>> from simtrain.parallel.schedules.gpipe import gpipe
        >>> print(format_grid(gpipe(2, 2)))
        step  rank0 rank1
           0  0F0   1F0
           1  0F1   1F1
           2  0B0   1B0
           3  0B1   1B1
    """
    ranks = sorted(actions)
    cells = {r: [str(a) for a in actions[r]] for r in ranks}
    width = max([len(f"rank{r}") for r in ranks] + [len(c) for cs in cells.values() for c in cs])
    num_steps = max((len(cs) for cs in cells.values()), default=0)
    header = "step  " + " ".join(f"rank{r}".ljust(width) for r in ranks)
    rows = [header.rstrip()]
    for k in range(num_steps):
        row = " ".join((cells[r][k] if k < len(cells[r]) else ".").ljust(width) for r in ranks)
        rows.append(f"{k:>4}  {row}".rstrip())
    return "\n".join(rows)


def _fail(message: str, actions: RankActions) -> ScheduleError:
    return ScheduleError(message, format_grid(actions))


def validate_schedule(actions: RankActions, num_microbatches: int, num_stages: int) -> None:
    """Check that ``actions`` run every F and B once per (stage, microbatch) without deadlock.

    Raises:
        ScheduleError: a missing, repeated or misplaced action, or per-rank orders that wait
            on each other forever; the message names the first problem and shows the grid.
    """
    counts = Counter((a.stage, a.kind, a.microbatch) for acts in actions.values() for a in acts)
    if repeated := sorted(key for key, n in counts.items() if n > 1):
        s, kind, j = repeated[0]
        raise _fail(f"action {Action(s, kind, j)} runs {counts[repeated[0]]} times", actions)
    for s in range(num_stages):
        for j in range(num_microbatches):
            for kind in ("F", "B"):
                if (s, kind, j) not in counts:
                    raise _fail(f"action {Action(s, kind, j)} is missing", actions)
    if extra := sorted(
        key
        for key in counts
        if not (0 <= key[0] < num_stages and 0 <= key[2] < num_microbatches)
        or (key[1] == "W" and (key[0], "B", key[2]) not in counts)
    ):
        raise _fail(f"action {Action(*extra[0])} is not part of the schedule", actions)
    owner: dict[tuple[int, int], int] = {}
    for rank, acts in actions.items():
        for a in acts:
            if owner.setdefault((a.stage, a.microbatch), rank) != rank:
                raise _fail(
                    f"stage {a.stage} microbatch {a.microbatch} runs on ranks "
                    f"{owner[(a.stage, a.microbatch)]} and {rank}",
                    actions,
                )
    _check_progress(actions, num_stages)


def _check_progress(actions: RankActions, num_stages: int) -> None:
    """Advance every rank while its next action's inputs are done; stuck ranks deadlock."""
    done: set[tuple[int, str, int]] = set()
    position = dict.fromkeys(actions, 0)
    progressed = True
    while progressed:
        progressed = False
        for rank, acts in actions.items():
            while position[rank] < len(acts):
                a = acts[position[rank]]
                if not all(dep in done for dep in action_deps(a, num_stages)):
                    break
                done.add((a.stage, a.kind, a.microbatch))
                position[rank] += 1
                progressed = True
    stuck = {r: str(acts[position[r]]) for r, acts in actions.items() if position[r] < len(acts)}
    if stuck:
        waits = ", ".join(f"rank {r} at {a}" for r, a in sorted(stuck.items()))
        raise _fail(f"schedule deadlocks: {waits} wait for each other", actions)
