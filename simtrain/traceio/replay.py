"""Assemble imported per-rank traces into a :class:`~simtrain.parallel.program.Program`.

Each :class:`~simtrain.traceio.model.TraceNode` becomes one task on its rank and stream, in
file order. Dependencies name node ids of the same file. Collectives and transfers are
matched across ranks: by ``collective_key`` when the trace records one (simtrain's export),
otherwise by issue order, as NCCL does: the n-th collective a rank issues on a process group
meets the n-th of every other member, and the n-th send from a to b with a tag meets the
n-th recv. Measured durations are kept (``duration_s``); nodes without one are timed by the
compute and network models. :func:`retarget` re-times measured compute for another
accelerator.

Everything that would make the engine stall or index out of range (duplicate or dangling
ids, cycles through dependencies and stream order, collectives without a partner) is
reported with the rank file and the node id.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from dataclasses import dataclass

from simtrain.errors import TraceFormatError
from simtrain.parallel.program import Program, Task
from simtrain.traceio.model import RankTrace, TraceNode
from simtrain.workload.ops import Op


@dataclass(frozen=True, slots=True)
class RetargetNote:
    """How :func:`retarget` changed the compute tasks of a replay.

    Attributes:
        num_reestimated: tasks whose measured duration was replaced by the compute model's
            estimate (their ops carry FLOPs and shapes).
        num_scaled: tasks whose measured duration was multiplied by ``scale``.
        scale: source peak FLOP/s over target peak FLOP/s.
        scaled_names: up to ten names of scaled tasks, for the report.
    """

    num_reestimated: int
    num_scaled: int
    scale: float
    scaled_names: tuple[str, ...] = ()


def _locate(trace: RankTrace, node: TraceNode) -> str:
    return f"{trace.path}: node {node.node_id} ({node.name or 'unnamed'})"


def _index_nodes(trace: RankTrace, base: int) -> dict[int, int]:
    """Node id -> task index for one rank file, checking ids are unique."""
    ids: dict[int, int] = {}
    for offset, node in enumerate(trace.nodes):
        if node.node_id in ids:
            raise TraceFormatError(f"{_locate(trace, node)}: node id appears twice")
        ids[node.node_id] = base + offset
    return ids


def _check_acyclic(trace: RankTrace, ids: dict[int, int], base: int) -> None:
    """Raise if dependencies plus stream order form a cycle (the engine would stall)."""
    num = len(trace.nodes)
    successors: list[list[int]] = [[] for _ in range(num)]
    indegree = [0] * num
    last_on_stream: dict[str, int] = {}
    for offset, node in enumerate(trace.nodes):
        before = [ids[d] - base for d in node.deps]
        previous = last_on_stream.get(node.stream)
        if previous is not None:
            before.append(previous)
        last_on_stream[node.stream] = offset
        for parent in before:
            successors[parent].append(offset)
            indegree[offset] += 1
    ready = deque(i for i in range(num) if indegree[i] == 0)
    done = 0
    while ready:
        current = ready.popleft()
        done += 1
        for child in successors[current]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if done < num:
        stuck = next(i for i in range(num) if indegree[i] > 0)
        raise TraceFormatError(
            f"{_locate(trace, trace.nodes[stuck])}: dependency cycle (through its "
            f"dependencies or the order of stream '{trace.nodes[stuck].stream}')"
        )


def _match_key(node: TraceNode, rank: int, group: tuple[int, ...], seen: dict) -> str:
    if node.collective_key:
        return node.collective_key
    slot = ("coll", group) if node.kind == "collective" else ("p2p", *group, node.tag)
    number = seen[(rank, slot)]
    seen[(rank, slot)] += 1
    return f"{'|'.join(map(str, slot))}|{number}"


def build_program(traces: list[RankTrace]) -> Program:
    """One program of all ranks' nodes.

    Raises:
        TraceFormatError: duplicate or dangling node ids, a dependency cycle, or a
            collective or transfer whose partners are missing from the other rank files.
    """
    ranks = tuple(t.rank for t in traces)
    world_size = max([t.world_size for t in traces] + [max(ranks) + 1])
    everyone = tuple(range(world_size))
    program = Program(world_size=world_size, simulated_ranks=ranks)
    seen: dict = defaultdict(int)
    members: dict[str, list[tuple[RankTrace, TraceNode]]] = defaultdict(list)
    for trace in traces:
        base = len(program.tasks)
        ids = _index_nodes(trace, base)
        for node in trace.nodes:
            for dep in node.deps:
                if dep not in ids:
                    raise TraceFormatError(
                        f"{_locate(trace, node)}: dependency {dep} is not a node of this file"
                    )
                if dep == node.node_id:
                    raise TraceFormatError(f"{_locate(trace, node)}: depends on itself")
        _check_acyclic(trace, ids, base)
        for node in trace.nodes:
            group, key = node.group, ""
            if node.kind != "compute":
                group = group or everyone
                if trace.rank not in group or max(group) >= world_size:
                    shown = list(group[:6])
                    more = f" and {len(group) - 6} more" if len(group) > 6 else ""
                    raise TraceFormatError(
                        f"{_locate(trace, node)}: process group (pg_ranks) {shown}{more} must "
                        f"contain rank {trace.rank} and ranks below {world_size}"
                    )
                key = _match_key(node, trace.rank, group, seen)
                members[key].append((trace, node))
            program.add(
                Task(
                    rank=trace.rank,
                    stream=node.stream,
                    label=node.name,
                    category=node.category,
                    ops=node.ops,
                    duration_s=node.duration_s,
                    deps=tuple(ids[d] for d in node.deps),
                    group=group,
                    collective_key=key,
                    stage=node.stage,
                    microbatch=node.microbatch,
                )
            )
        program.weights[trace.rank] = trace.weight
    _check_partners(members, set(ranks))
    return program


def _check_partners(members: dict[str, list[tuple[RankTrace, TraceNode]]], ranks: set) -> None:
    for key, found in members.items():
        trace, node = found[0]
        group = node.group or tuple(sorted(ranks))
        expected = ranks.intersection(group)
        arrived = [t.rank for t, _ in found]
        missing = sorted(expected - set(arrived))
        if missing:
            raise TraceFormatError(
                f"{_locate(trace, node)}: {node.kind} '{key}' has no matching node in the "
                f"file of rank {missing[0]}"
            )
        if len(arrived) != len(set(arrived)):
            raise TraceFormatError(
                f"{_locate(trace, node)}: {node.kind} '{key}' appears twice on one rank"
            )


def retarget(program: Program, source_peak_flops: float, target_peak_flops: float) -> RetargetNote:
    """Re-time measured compute tasks for the target accelerator, in place.

    A task whose ops know their FLOPs and GEMM shape (or are attention or memory ops with
    byte counts) drops its measured duration and is timed by the compute model; any other
    measured task is scaled by ``source_peak_flops / target_peak_flops``.
    """
    scale = source_peak_flops / target_peak_flops
    reestimated, scaled_names = 0, []
    for index, task in enumerate(program.tasks):
        if task.duration_s is None or task.stream != "compute" or task.duration_s == 0.0:
            continue
        if task.ops and all(_shape_known(op) for op in task.ops):
            program.tasks[index] = dataclasses.replace(task, duration_s=None)
            reestimated += 1
        else:
            program.tasks[index] = dataclasses.replace(task, duration_s=task.duration_s * scale)
            scaled_names.append(task.label)
    names = tuple(dict.fromkeys(scaled_names))[:10]
    return RetargetNote(reestimated, len(scaled_names), scale, names)


def _shape_known(op: Op) -> bool:
    if op.kind == "gemm":
        return op.m > 0 and op.n > 0 and op.k > 0
    return op.flops > 0 or op.bytes_accessed > 0
