"""The host stream: the CPU thread that issues a rank's kernels, ahead of its device.

A framework issues every kernel and collective of a rank from one host thread, in program
order. The host may run ahead of the device (kernel launches are asynchronous), so issuing
costs nothing while kernels are longer than their issue time; when they are shorter (small
per-GPU work, eager PyTorch), the device waits for the host and the host sets the pace. The
host also stops at synchronisation points: an eager pipeline engine synchronises the device
after each point-to-point exchange, and the optimizer step waits for the gradient reduction
(gradient-norm and overflow checks read device values).

For each compute task ``t`` of a rank, with ``n`` ops, host issue time ``h`` and device time
``d``, the device can start the task without ever starving once the host has issued

    r = h/n + (n-1)/n · max(h - d, 0)

(the first op, plus whatever the host falls behind while the device works through the
rest). A host task of that length precedes the compute task; the rest of the issue time,
``h - r``, is carried into the next host task, or, before a synchronisation point, paid as a
host task of its own. With uniform ops this reproduces the exact kernel-by-kernel end time of
a task, ``start + max(n·d_op, n·h_op) + min(d_op, h_op)``.

Examples:
    >>> readiness(h=10.0, d=40.0, n=4)  # device-bound: only the first launch is waited for
    2.5
    >>> readiness(h=40.0, d=10.0, n=4)  # host-bound: the device is paced by the host
    32.5
"""

from __future__ import annotations

from collections import defaultdict

from simtrain.compute.roofline import ComputeModel
from simtrain.parallel.program import Program, Task

HOST_STREAM = "host"
P2P_CATEGORY = "pp_comm"  # pipeline transfers (any stream: replays split send and recv)


def readiness(h: float, d: float, n: int) -> float:
    """Host time before a task of ``n`` ops can start on the device without starving."""
    if n <= 0:
        return 0.0
    return h / n + (n - 1) / n * max(h - d, 0.0)


def with_host_stream(
    program: Program,
    durations_s: list[float],
    compute: ComputeModel,
    sync_on_p2p: bool = True,
) -> tuple[Program, list[float]]:
    """A copy of ``program`` with each simulated rank's host tasks, and all task durations.

    Every compute task gains a dependency on the host task that issues it (compute tasks
    are copied; ``program`` is left as it was, so it can be re-timed). Host tasks run on the
    ``host`` stream of their rank, category ``host``.

    Args:
        program: the program to issue.
        durations_s: device durations of its tasks.
        compute: the compute model (its ``host_time_s`` prices the issue of each task).
        sync_on_p2p: the framework synchronises the device after each pipeline transfer
            (eager Megatron-style pipeline engines do), so the host cannot run past one.
    """
    tasks = [_copy(task) if task.stream == "compute" else task for task in program.tasks]
    issued = Program(
        tasks=tasks,
        world_size=program.world_size,
        simulated_ranks=program.simulated_ranks,
        weights=program.weights,
    )
    durations = list(durations_s)
    per_rank: dict[int, list[int]] = defaultdict(list)
    is_p2p = []
    # Collectives and transfers a compute task is the producer of: the host issues them
    # right after it (counted per member: a shared collective lists every member's producer).
    launches: dict[int, int] = defaultdict(int)
    for index, task in enumerate(program.tasks):
        per_rank[task.rank].append(index)
        is_p2p.append(task.category == P2P_CATEGORY)
        if task.stream not in ("compute", HOST_STREAM):
            for dep in task.deps:
                if program.tasks[dep].stream == "compute":
                    launches[dep] += 1
    sync = sync_on_p2p and any(is_p2p)
    for rank in program.simulated_ranks:
        _rank_host_tasks(issued, durations, compute, sync, is_p2p, launches, per_rank[rank])
    return issued, durations


def _copy(task: Task) -> Task:
    """A shallow copy of a compute task (its deps are about to change)."""
    return Task(
        task.rank,
        task.stream,
        task.label,
        task.category,
        task.ops,
        task.duration_s,
        task.deps,
        task.group,
        task.collective_key,
        task.stage,
        task.microbatch,
    )


def _rank_host_tasks(
    program: Program,
    durations_s: list[float],
    compute: ComputeModel,
    sync_on_p2p: bool,
    is_p2p: list[bool],
    launches: dict[int, int],
    indices: list[int],
) -> None:
    tasks = program.tasks
    per_collective_s = collective_issue_s(compute)
    carry_s = 0.0  # issue time of the previous task not yet paid on the host stream
    sends: list[int] = []  # this rank's transfers since the previous compute task
    previous: int | None = None
    issue_s: dict[int, float] = {}  # host time per distinct ops tuple (shared by builders)
    host_time_s = compute.host_time_s
    add_task, add_duration = tasks.append, durations_s.append
    for index in indices:
        task = tasks[index]
        if task.stream != "compute":
            if is_p2p[index] and task.group[:1] == (task.rank,):
                sends.append(index)  # this rank's own send (replays also list recv copies)
            continue
        ops = task.ops
        h = issue_s.get(id(ops))
        if h is None:
            h = issue_s[id(ops)] = host_time_s(ops)
        if index in launches:
            h += launches[index] * per_collective_s
        r = readiness(h, durations_s[index], len(ops))
        if task.category == "optimizer":
            sync = list(task.deps)  # gradient-norm / overflow checks read reduced gradients
        elif sync_on_p2p:
            sync = [d for d in task.deps if is_p2p[d]] + sends
        else:
            sync = []
        deps: tuple[int, ...] = ()
        if sync:
            if carry_s > 0:
                add_task(_host_task(task, carry_s, (), "host:tail"))
                add_duration(carry_s)
            carry_s = 0.0
            deps = tuple(sync) + ((previous,) if previous is not None else ())
        add_task(_host_task(task, carry_s + r, deps, "host:" + task.label))
        add_duration(carry_s + r)
        task.deps = (*task.deps, len(tasks) - 1)
        carry_s = h - r
        sends, previous = [], index


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
