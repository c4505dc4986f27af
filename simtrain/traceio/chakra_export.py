"""Write a simtrain :class:`~simtrain.parallel.program.Program` as Chakra execution traces.

One ``simtrain.<rank>.et`` per simulated rank. A task becomes one node whose id is the task's
index in the program; its dependencies on the same rank become ``ctrl_deps``. simtrain shares
one task among the members of a collective and lets other ranks depend on it; Chakra has no
cross-rank dependencies, so every simulated member gets its own copy of the node (same id,
same ``collective_key``) on the collective's stream, and a pipeline transfer becomes a
``COMM_SEND_NODE`` on the sender and a ``COMM_RECV_NODE`` on the receiver (on a stream of its
own per sender, in the sender's order). The engine rendezvouses the copies, so the replayed
step time equals the simulated one.

Nodes carry Chakra's standard attributes (``num_ops``, ``tensor_size``, ``comm_type``,
``comm_size``, ``comm_src``/``comm_dst``/``comm_tag``) for other tools, plus simtrain's
(``stream``, ``category``, ``stage``, ``microbatch``, ``collective_key``, ``pg_ranks`` and
the ops as ``op.<field>`` lists).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from simtrain.errors import TraceFormatError
from simtrain.parallel.program import Program, Task
from simtrain.traceio.chakra import COMM_TYPES, OP_FIELDS, schema
from simtrain.traceio.model import HOST_STREAM
from simtrain.workload.ops import Op

_COMM_TYPE_IDS = {name: code for code, name in reversed(COMM_TYPES.items())}


def _encode(message: Any) -> bytes:
    body = message.SerializeToString()
    size, prefix = len(body), bytearray()
    while size > 0x7F:
        prefix.append(0x80 | (size & 0x7F))
        size >>= 7
    prefix.append(size)
    return bytes(prefix) + body


def _attr(pb: Any, name: str, value: Any) -> Any:
    if isinstance(value, bool):
        return pb.AttributeProto(name=name, bool_val=value)
    if isinstance(value, int):
        return pb.AttributeProto(name=name, int64_val=value)
    if isinstance(value, float):
        return pb.AttributeProto(name=name, double_val=value)
    return pb.AttributeProto(name=name, string_val=str(value))


def _list_attr(pb: Any, name: str, values: list[Any], kind: type) -> Any:
    if kind is bool:
        return pb.AttributeProto(name=name, bool_list=pb.BoolList(values=values))
    if kind is int:
        return pb.AttributeProto(name=name, int64_list=pb.Int64List(values=values))
    if kind is float:
        return pb.AttributeProto(name=name, double_list=pb.DoubleList(values=values))
    return pb.AttributeProto(name=name, string_list=pb.StringList(values=values))


# Op's annotations are strings (postponed evaluation); literals such as OpKind are strings.
_OP_TYPES: dict[str, type] = {
    f.name: {"int": int, "float": float, "bool": bool}.get(str(f.type), str)
    for f in dataclasses.fields(Op)
}


def _node(pb: Any, index: int, task: Task, rank: int, deps: list[int], key: str) -> Any:
    ops = task.ops
    kind = ops[0].kind if ops else "elementwise"
    node = pb.Node(id=index, name=task.label, ctrl_deps=deps)
    attrs: dict[str, Any] = {
        "is_cpu_op": False,
        "stage": task.stage,
        "microbatch": task.microbatch,
        "category": task.category,
        "stream": task.stream,
    }
    if kind == "p2p":
        src, dst = task.group[0], task.group[1]
        node.type = pb.COMM_SEND_NODE if rank == src else pb.COMM_RECV_NODE
        attrs |= {"comm_src": src, "comm_dst": dst, "comm_tag": index, "collective_key": key}
        attrs |= {"comm_size": int(sum(op.comm_bytes for op in ops))}
        if rank != src:
            attrs["stream"] = f"{task.stream}:recv:{src}"
    elif kind == "collective":
        node.type = pb.COMM_COLL_NODE
        attrs |= {"comm_type": _COMM_TYPE_IDS.get(ops[0].comm, 0), "collective_key": key}
        attrs |= {"comm_size": int(sum(op.comm_bytes for op in ops))}
        node.attr.append(_list_attr(pb, "pg_ranks", list(task.group), int))
    else:
        node.type = pb.COMP_NODE
        attrs |= {
            "num_ops": int(sum(op.flops for op in ops)),
            "tensor_size": int(sum(op.bytes_accessed for op in ops)),
        }
        if task.duration_s is not None:
            node.duration_micros = round(task.duration_s * 1e6)
    node.attr.extend(_attr(pb, name, value) for name, value in attrs.items())
    for name in OP_FIELDS:
        values = [getattr(op, name) for op in ops]
        node.attr.append(_list_attr(pb, f"op.{name}", values, _OP_TYPES[name]))
    return node


def rank_task_lists(program: Program) -> dict[int, list[int]]:
    """Task indices each simulated rank's file holds, in program order.

    A rank holds its own tasks and a copy of every shared collective or transfer it takes
    part in. Host-issue tasks (added by the engine for one execution mode) are left out: a
    replay adds its own. Within one (rank, stream) the program order is the issue order, because the
    builder creates a rank's collectives of one process group in sequence.
    """
    simulated = set(program.simulated_ranks)
    per_rank: dict[int, list[int]] = defaultdict(list)
    for index, task in enumerate(program.tasks):
        if task.stream == HOST_STREAM:
            continue  # the host stream is the replaying model's, not part of the workload
        members = {task.rank}
        if task.collective_key or (task.ops and task.ops[0].kind == "p2p"):
            members |= simulated.intersection(task.group)
        for rank in sorted(members):
            per_rank[rank].append(index)
    return per_rank


def write_chakra(program: Program, directory: Path, accelerator: str = "") -> list[Path]:
    """Write one Chakra ``.et`` file per simulated rank into ``directory``.

    Args:
        program: the program to export.
        directory: output folder (created).
        accelerator: device name recorded in each file's metadata.

    Returns:
        The files written, by rank.

    Raises:
        TraceFormatError: a task depends on another rank's task that the rank has no copy of.
    """
    pb = schema()
    directory.mkdir(parents=True, exist_ok=True)
    host_tasks = {i for i, t in enumerate(program.tasks) if t.stream == HOST_STREAM}
    paths = []
    for rank, indices in sorted(rank_task_lists(program).items()):
        held = set(indices)
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend(
            [
                _attr(pb, "world_size", program.world_size),
                _attr(pb, "weight", program.weights.get(rank, 1)),
                _attr(pb, "accelerator", accelerator),
                _attr(pb, "producer", "simtrain"),
            ]
        )
        chunks = [_encode(meta)]
        for index in indices:
            task = program.tasks[index]
            is_p2p = bool(task.ops) and task.ops[0].kind == "p2p"
            missing = [d for d in task.deps if d not in held and d not in host_tasks]
            # A shared collective gathers every member's producers; each copy keeps its own.
            if missing and task.rank == rank and not task.collective_key:
                raise TraceFormatError(
                    f"task {index} of rank {rank} depends on task {missing[0]} of rank "
                    f"{program.tasks[missing[0]].rank}, which Chakra cannot express"
                )
            key = task.collective_key or (f"p2p|{index}" if is_p2p else "")
            deps = [d for d in task.deps if d in held]
            chunks.append(_encode(_node(pb, index, task, rank, deps, key)))
        path = directory / f"simtrain.{rank}.et"
        path.write_bytes(b"".join(chunks))
        paths.append(path)
    return paths
