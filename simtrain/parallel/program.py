"""Programs: what each simulated rank executes, as plain data the engine replays.

A :class:`Program` is a list of :class:`Task` s. A task is a run of ops on one *stream* of one
rank (``compute`` or ``comm``; more streams are allowed) and becomes one engine event. Within
a (rank, stream) pair tasks run in list order; across streams and ranks, order comes only
from ``deps`` (indices of tasks that must finish first). Communication tasks that share a
``collective_key`` are one collective: it starts when every simulated member has reached it
and lasts what the network model says for the whole ``group`` (all its global ranks, also
those not simulated under symmetry reduction).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simtrain.workload.ops import Op

Category = str
"""Time-breakdown bucket of a task, e.g. ``compute``, ``recompute``, ``tp_comm``,
``dp_comm``, ``pp_comm``, ``cp_comm``, ``ep_comm``, ``optimizer``."""


@dataclass(slots=True)
class Task:
    """One engine event: a run of ops on one stream of one rank.

    Attributes:
        rank: global rank executing the task.
        stream: ``compute`` or ``comm`` (tasks on one stream of a rank run one at a time).
        label: short name for timelines, e.g. ``0F3`` (stage 0, forward, microbatch 3).
        category: time-breakdown bucket.
        ops: the operators; their times are summed by the compute/network models.
        duration_s: a fixed duration instead of timing ``ops`` (abstract schedules, replays).
        deps: indices (into ``Program.tasks``) of tasks that must finish before this starts.
        group: for a collective or p2p, all global ranks that take part.
        collective_key: tasks with equal keys are one collective instance (rendezvous).
        stage: pipeline stage (model chunk index for interleaved schedules), -1 if none.
        microbatch: microbatch index, -1 if none.
        host_sync: the host waits for the rank's compute stream to drain before issuing this
            (compute) task: the stack reads a device value on the host first (a batch's
            shapes copied back, a logged loss), so it cannot run ahead past this point.
    """

    rank: int
    stream: str
    label: str
    category: Category = "compute"
    ops: tuple[Op, ...] = ()
    duration_s: float | None = None
    deps: tuple[int, ...] = ()
    group: tuple[int, ...] = ()
    collective_key: str = ""
    stage: int = -1
    microbatch: int = -1
    host_sync: bool = False


@dataclass(slots=True)
class Program:
    """All tasks of all simulated ranks for one training step.

    Attributes:
        tasks: every task; the engine refers to tasks by their index here.
        world_size: ranks in the job (simulated or not).
        simulated_ranks: the ranks that have tasks (all of them in full mode).
        weights: how many ranks each simulated rank stands for (symmetry reduction).
        syncs_on_p2p: an eager host synchronises the device after each pipeline transfer
            (Megatron's batched send/receive with ``batch_p2p_sync``); false when the
            transfers are overlapped (asynchronous, waited for on the device).
    """

    tasks: list[Task] = field(default_factory=list)
    world_size: int = 1
    simulated_ranks: tuple[int, ...] = (0,)
    weights: dict[int, int] = field(default_factory=dict)
    syncs_on_p2p: bool = True

    def add(self, task: Task) -> int:
        """Append ``task`` and return its index, for use in later tasks' ``deps``."""
        self.tasks.append(task)
        return len(self.tasks) - 1
