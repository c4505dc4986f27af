"""The host stream: the CPU thread that issues a rank's kernels, ahead of its device.

A framework issues every kernel and collective of a rank from one host thread, in program
order. The host may run ahead of the device (kernel launches are asynchronous), so issuing
costs nothing while kernels are longer than their issue time; when they are shorter (small
per-GPU work, eager PyTorch), the device waits for the host and the host sets the pace. The
host also stops at synchronisation points: an eager pipeline engine synchronises the device
after each point-to-point exchange, the optimizer step waits for the gradient reduction
(gradient-norm and overflow checks read device values), and a task marked ``host_sync`` waits
for the rank's compute stream to drain (the stack reads a device value on the host before
issuing it: a batch's shapes, a logged loss).

For each compute task of a rank, with ops ``0..n-1``, the host issues op ``i`` once it has
spent ``H_i`` (the issue times of ops ``0..i``), and the device, once started, reaches op
``i`` after ``d·f_i`` (``d`` the task's device time, ``f_i`` the share of it taken by ops
``0..i-1``). The device never starves once started if the host has run for

    r = max_i (H_i - d·f_i)

before it starts: kernel by kernel, so short kernels (norms, elementwise) that follow long
ones (GEMMs) cost nothing, while a run of short kernels at the start of a task, or after the
long ones are done, makes the device wait. With ``n`` equal ops this is the first launch
``h/n`` when device-bound and ``h - (n-1)/n·d`` when host-bound. A host task of length
``r`` precedes the compute task; the rest of the issue time (with the collectives and
transfers the task produces, issued after its ops), is carried into the next host task, or,
before a synchronisation point, paid as a host task of its own.

Examples:
    >>> profile = ((1.0, 2.0, 3.0, 4.0), (0.0, 0.25, 0.5, 0.75))  # four equal ops
    >>> op_readiness(profile, d=40.0)  # device-bound: only the first launch is waited for
    1.0
    >>> op_readiness(profile, d=2.0)  # host-bound: the device is paced by the host
    2.5
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simtrain.compute.roofline import ComputeModel
from simtrain.parallel.program import Program, Task
from simtrain.workload.ops import Op

HOST_STREAM = "host"
P2P_CATEGORY = "pp_comm"  # pipeline transfers (any stream: replays split send and recv)


IssueProfile = tuple[tuple[float, ...], tuple[float, ...]]
"""Of a run of ops: the host seconds to issue ops ``0..i``, and the share of the run's device
time taken by ops ``0..i-1``, for every op ``i``."""


def issue_profile(ops: Sequence[Op], compute: ComputeModel) -> IssueProfile:
    """How the host's issue of ``ops`` and the device's work on them advance, op by op."""
    return profile_of([(compute.op_time_s(op), compute.host_time_s((op,))) for op in ops])


def profile_of(times: Sequence[tuple[float, float]]) -> IssueProfile:
    """The issue profile of a run of ops from each op's (device, host) seconds, in order."""
    total = sum(device for device, _ in times) or 1.0
    issued, before = [], []
    host = device = 0.0
    for seconds, issue in times:
        host += issue
        issued.append(host)
        before.append(device / total)
        device += seconds
    return tuple(issued), tuple(before)


def op_readiness(profile: IssueProfile, d: float) -> float:
    """Host time before a task can start on the device without starving, op by op.

    The device runs op ``i`` ``d * before[i]`` after the task starts and the host has
    issued it ``issued[i]`` after it began, so the device never waits once started if it
    starts ``max_i(issued[i] - d * before[i])`` after the host began: long kernels after
    short ones hide the issue of what follows, short kernels after long ones do not.
    """
    issued, before = profile
    if not issued:
        return 0.0
    return max([h - d * b for h, b in zip(issued, before, strict=True)])


@dataclass(slots=True)
class HostPlan:
    """What each simulated rank's host does before each of its compute tasks.

    Host task durations follow from the program alone; only their start times need the
    replay (a host task stopped at a synchronisation point starts when the last of them
    ends). So the engine keeps each rank's host clock in the rank's compute stream, by
    arithmetic, and host tasks become records only when a timeline asks for them
    (:func:`issued_program`). Lists are indexed like the program's tasks.

    Attributes:
        issue_s: host seconds of the host task issuing each compute task (0 for others).
        tail_s: issue time carried from the previous compute task and paid, as a host task
            of its own (``host:tail``), before this one's synchronisation point (0 if none).
        sync: tasks whose end the host waits for before issuing each compute task: the
            previous compute task and the pipeline transfers (or, for the optimizer step,
            every dependency); empty when the host runs ahead.
        waits: per compute task, the synchronisation tasks that are not already its
            dependencies (this rank's own sends): the compute task waits for them too.
        order: compute task indices in the order their host tasks are recorded, rank by
            rank.
        spans: (rank, number of its compute tasks) of each rank, in ``order``.
    """

    issue_s: list[float]
    tail_s: list[float]
    sync: list[tuple[int, ...]]
    waits: dict[int, tuple[int, ...]]
    order: list[int]
    spans: list[tuple[int, int]]


def host_plan(
    program: Program,
    durations_s: Sequence[float],
    compute: ComputeModel,
    sync_on_p2p: bool = True,
) -> HostPlan:
    """The host tasks that issue every compute task of each simulated rank of ``program``.

    Args:
        program: the program to issue (left as it is).
        durations_s: device durations of its tasks.
        compute: the compute model (its ``host_time_s`` prices the issue of each task).
        sync_on_p2p: the framework synchronises the device after each pipeline transfer
            (eager Megatron-style pipeline engines do), so the host cannot run past one.
    """
    tasks = program.tasks
    num_tasks = len(tasks)
    plan = HostPlan([0.0] * num_tasks, [0.0] * num_tasks, [()] * num_tasks, {}, [], [])
    per_rank: dict[int, list[int]] = defaultdict(list)
    is_p2p = []
    # Collectives and transfers a compute task is the producer of: the host issues them
    # right after it (counted per member: a shared collective lists every member's producer).
    launches: dict[int, int] = defaultdict(int)
    for index, task in enumerate(tasks):
        per_rank[task.rank].append(index)
        is_p2p.append(task.category == P2P_CATEGORY)
        if task.stream not in ("compute", HOST_STREAM):
            for dep in task.deps:
                if tasks[dep].stream == "compute":
                    launches[dep] += 1
    sync = sync_on_p2p and any(is_p2p)
    profiles: dict[int, IssueProfile] = {}  # per distinct ops tuple (shared by builders)
    ready: dict[tuple[int, float], tuple[float, float]] = {}  # (issue, lead) per ops, duration
    for rank in program.simulated_ranks:
        before = len(plan.order)
        _plan_rank(plan, tasks, durations_s, compute, sync, is_p2p, launches, profiles, ready,
                   per_rank[rank])  # fmt: skip
        plan.spans.append((rank, len(plan.order) - before))
    return plan


def _plan_rank(
    plan: HostPlan,
    tasks: list[Task],
    durations_s: Sequence[float],
    compute: ComputeModel,
    sync_on_p2p: bool,
    is_p2p: list[bool],
    launches: dict[int, int],
    profiles: dict[int, IssueProfile],
    ready: dict[tuple[int, float], tuple[float, float]],
    indices: list[int],
) -> None:
    per_collective_s = collective_issue_s(compute)
    carry_s = 0.0  # issue time of the previous task not yet paid on the host stream
    sends: list[int] = []  # this rank's transfers since the previous compute task
    previous: int | None = None
    tail_s, sync_of, waits_of, issued = plan.tail_s, plan.sync, plan.waits, plan.issue_s
    order = plan.order
    for index in indices:
        task = tasks[index]
        if task.stream != "compute":
            if sync_on_p2p and is_p2p[index] and task.group[:1] == (task.rank,):
                sends.append(index)  # this rank's own send (replays also list recv copies)
            continue
        ops = task.ops
        d = durations_s[index]
        found = ready.get((id(ops), d))
        if found is None:
            profile = profiles.get(id(ops))
            if profile is None:
                profile = profiles[id(ops)] = issue_profile(ops, compute)
            found = ready[(id(ops), d)] = (profile[0][-1] if ops else 0.0, op_readiness(profile, d))
        h, r = found
        if index in launches:  # issued after the task's ops: they do not delay its start
            h += launches[index] * per_collective_s
        if task.category == "optimizer":
            sync = list(task.deps)  # gradient-norm / overflow checks read reduced gradients
        elif sync_on_p2p:
            sync = [d for d in task.deps if is_p2p[d]] + sends
        else:
            sync = None
        if task.host_sync and previous is not None and not sync:
            sync = [previous]  # a device value read on the host: the compute stream drains
            previous = None  # already listed
        if sync:
            if carry_s > 0:
                tail_s[index] = carry_s
            carry_s = 0.0
            sync_of[index] = tuple(sync) + ((previous,) if previous is not None else ())
            if sends:  # the compute task waits for the host's sync points, deps or not
                own = set(task.deps)
                waits = tuple(d for d in sync if d not in own)
                if waits:
                    waits_of[index] = waits
        if sends:
            sends = []
        issued[index] = carry_s + r
        order.append(index)
        carry_s = h - r
        previous = index


@dataclass(slots=True)
class HostTimes:
    """When each simulated rank's host issued its compute tasks, as the replay timed them.

    Kept as one start per compute task rather than as tasks: step-time and breakdown
    callers never need host tasks as records (:meth:`intervals`), a timeline does
    (:meth:`issued_program`).
    """

    plan: HostPlan
    host_start_s: list[float]
    tail_start_s: list[float]

    @property
    def num_tasks(self) -> int:
        """Host tasks: one per compute task, plus one per carried ``host:tail``."""
        tail_s = self.plan.tail_s
        return len(self.plan.order) + sum(1 for index in self.plan.order if tail_s[index] > 0)

    def intervals(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Start and end of each rank's host tasks, in the order :meth:`issued_program` uses."""
        plan = self.plan
        order = np.asarray(plan.order, dtype=np.int64)
        issue = np.asarray(plan.issue_s)[order]
        tail = np.asarray(plan.tail_s)[order]
        at = np.asarray(self.host_start_s)[order]
        has_tail = tail > 0
        # Each compute task's host task, preceded by its host:tail task when it has one.
        host_pos = np.cumsum(1 + has_tail) - 1
        tail_pos = host_pos[has_tail] - 1
        tail_at = np.asarray(self.tail_start_s)[order[has_tail]]
        starts = np.empty(host_pos[-1] + 1 if order.size else 0)
        ends = np.empty_like(starts)
        starts[host_pos], ends[host_pos] = at, at + issue
        starts[tail_pos], ends[tail_pos] = tail_at, tail_at + tail[has_tail]
        bounds = np.cumsum([count for _, count in plan.spans])  # compute tasks per rank
        cuts = [int(host_pos[b - 1]) + 1 if b else 0 for b in bounds]
        result = {}
        first = 0
        for (rank, _), cut in zip(plan.spans, cuts, strict=True):
            result[rank] = (starts[first:cut], ends[first:cut])
            first = cut
        return result

    def issued_program(
        self, program: Program, start_s: np.ndarray, end_s: np.ndarray
    ) -> tuple[Program, np.ndarray, np.ndarray]:
        """``program`` with its host tasks appended, and the start and end of every task.

        Host tasks go on the ``host`` stream of their rank, category ``host``, each rank's in
        program order: a ``host:tail`` task (issue time carried into a synchronisation
        point) before the task issuing compute task ``X``, labelled ``host:X``. ``program``
        is left as it was, so it can be re-timed.
        """
        plan = self.plan
        tasks = program.tasks
        added: list[Task] = []
        add_task = added.append
        tail_s, issue_s, sync = plan.tail_s, plan.issue_s, plan.sync
        for index in plan.order:
            task = tasks[index]
            if tail_s[index] > 0:
                add_task(_host_task(task, tail_s[index], (), "host:tail"))
            add_task(_host_task(task, issue_s[index], sync[index], "host:" + task.label))
        issued = Program(
            tasks=tasks + added,
            world_size=program.world_size,
            simulated_ranks=program.simulated_ranks,
            weights=program.weights,
            syncs_on_p2p=program.syncs_on_p2p,
        )
        intervals = self.intervals()  # rank by rank, in plan order: the order of ``added``
        ranks = [rank for rank, _ in plan.spans]
        return (
            issued,
            np.concatenate([start_s, *(intervals[rank][0] for rank in ranks)]),
            np.concatenate([end_s, *(intervals[rank][1] for rank in ranks)]),
        )


def collective_issue_s(compute: ComputeModel) -> float:
    """Host seconds to issue one collective (0 for a model without a host)."""
    host = getattr(compute, "host", None)
    return host.per_collective_s if host is not None else 0.0


def _host_task(task: Task, duration_s: float, deps: tuple[int, ...], label: str) -> Task:
    """The host task that issues (part of) compute task ``task``."""
    return Task(
        task.rank, HOST_STREAM, label, "host", (), duration_s, deps, (), "", task.stage,
        task.microbatch,
    )  # fmt: skip
