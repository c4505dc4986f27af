"""PyTorch profiler (Kineto) Chrome traces: one JSON file per rank into one job.

A Kineto trace is a JSON object whose ``traceEvents`` are Chrome trace events; complete
events (``"ph": "X"``) carry ``ts`` and ``dur`` in microseconds. What becomes a node:

* GPU kernels (``cat`` ``kernel``, ``gpu_memcpy``, ``gpu_memset``) when the trace has any:
  compute kernels keep their measured duration on the ``compute`` stream; NCCL kernels
  (``nccl...AllReduce...``) become collectives on the ``comm`` stream, sized from
  ``In msg nelems`` and ``dtype`` where PyTorch recorded them.
* Otherwise (a CPU-only trace) the outermost ``cpu_op`` events of the busiest thread are the
  compute nodes, and the communication annotations of the process-group backends
  (``gloo:all_reduce``, ``nccl:all_reduce``, ``record_param_comms``) the collectives, sized
  from their input dims and element type.

Nodes keep their start order per stream. A collective depends on the last compute node that
ended before it started, and a compute node on the collectives that ended before it started
(happens-before by timestamps). Launch gaps: when the trace has the CUDA runtime calls that
launched the kernels (``cuda_runtime`` events with a ``correlation`` id), the host thread
becomes a ``host`` stream and each kernel waits for its launch; otherwise kernels of a stream
run back to back. All compute kernels share the ``compute`` stream. Collectives with a known
size are timed by the network model; those without keep their measured duration. The rank
comes from ``distributedInfo`` or the file name (``<name>.<rank>.json``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from simtrain.errors import TraceFormatError
from simtrain.traceio.chakra import RANK_FILE
from simtrain.traceio.limits import (
    MAX_NODE_BYTES,
    MAX_NODE_DURATION_S,
    MAX_NODES_PER_RANK,
    MAX_RANK,
    MAX_RANK_FILES,
    MAX_TIMESTAMP_US,
    check_count,
    check_file_size,
    check_group,
    check_node,
    check_quantity,
)
from simtrain.traceio.model import HOST_STREAM, RankTrace, TraceNode
from simtrain.traceio.shapes import gemm_op_from_dims
from simtrain.workload.ops import Op

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
COMM_NAMES: dict[str, str] = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "alltoall": "all_to_all",
    "reduce": "reduce",
    "sendrecv": "send_recv",
}
_BACKEND_COMM = re.compile(r"^(?:gloo|nccl|c10d):(?P<name>[a-z_]+)$")
DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "half": 2, "bfloat16": 2, "c10::half": 2}
DTYPE_BYTES |= {"c10::bfloat16": 2, "int": 4, "long": 8, "long int": 8, "int64": 8, "float16": 2}


def _comm_kind(name: str) -> str | None:
    """The simtrain collective kind of a kernel or annotation name, None if not communication."""
    lowered = name.lower()
    match = _BACKEND_COMM.match(lowered)
    if match:
        return COMM_NAMES.get(match["name"].replace("_", ""))
    if not lowered.startswith("nccl"):
        return None
    squashed = lowered.replace("_", "")
    return next((kind for key, kind in COMM_NAMES.items() if key in squashed), "all_reduce")


def _size_bytes(event: dict[str, Any], where: str) -> int:
    """Message size recorded on a communication event, 0 when the trace has none.

    Raises:
        TraceFormatError: an element count or dimension that is not an integer in
            ``0..2**40``, or a message over :data:`~simtrain.traceio.limits.MAX_NODE_BYTES`.
    """
    args = event.get("args") or {}
    if not isinstance(args, dict):
        return 0
    dtype = str(args.get("dtype", "")).lower()
    elements = args.get("In msg nelems")
    if elements is not None:
        _count(where, "'In msg nelems'", elements)
    if isinstance(elements, int) and dtype in DTYPE_BYTES:
        size = elements * DTYPE_BYTES[dtype]
        return int(check_quantity(where, "'In msg nelems' x dtype bytes", size, MAX_NODE_BYTES))
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return 0
    total = 0
    for shape, kind in zip(dims, types, strict=False):
        width = DTYPE_BYTES.get(str(kind).lower())
        if width is None or not isinstance(shape, list):
            continue
        shapes = shape if shape and isinstance(shape[0], list) else [shape]
        for dims_of_one in shapes:
            if not isinstance(dims_of_one, list):
                continue
            for d in dims_of_one:
                _count(where, "'Input Dims'", d)
            if all(isinstance(d, int) and d >= 0 for d in dims_of_one):
                total += math.prod(dims_of_one) * width
                check_quantity(where, "'Input Dims' x type bytes", total, MAX_NODE_BYTES)
    return total


def _count(where: str, what: str, value: Any) -> None:
    """An element count or a dimension: an integer in ``0..2**40``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1 << 40
    if not ok:
        shown = repr(value)[:40] if not isinstance(value, int) else f"{value:.3g}"
        raise TraceFormatError(f"{where}: {what} must be integers in 0..2**40 (got {shown})")


def _group(
    event: dict[str, Any], groups: dict[str, tuple[int, ...]], world: tuple[int, ...], where: str
) -> tuple[int, ...]:
    """Ranks of a communication event.

    Its ``Process Group Ranks``, else the ranks of its ``Process Group Name`` in
    ``distributedInfo.pg_config``, else the whole job.
    """
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    ranks = args.get("Process Group Ranks")
    if isinstance(ranks, str):
        try:
            ranks = json.loads(ranks)
        except json.JSONDecodeError:
            ranks = None
    if isinstance(ranks, list) and ranks:
        return check_group(where, "'Process Group Ranks'", ranks)
    return groups.get(str(args.get("Process Group Name", "")), world)


def _complete_events(data: Any, name: str, limit: int) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{name}: a Kineto trace must be an object with 'traceEvents'")
    events = data["traceEvents"]
    check_count(name, "the number of events", len(events), limit)
    complete = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise TraceFormatError(
                f"{name}: event {index} must be a JSON object (got {type(event).__name__})"
            )
        if event.get("ph") != "X":
            continue
        where = f"{name}: event {index} ({str(event.get('name', 'unnamed'))[:60]})"
        ts, dur = event.get("ts"), event.get("dur")
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (ts, dur))
        if not ok or not math.isfinite(ts) or not math.isfinite(dur) or dur < 0:
            raise TraceFormatError(
                f"{where}: 'ts' and 'dur' must be finite numbers, dur >= 0 (got {ts!r}, {dur!r})"
            )
        check_quantity(where, "'ts'", abs(ts), MAX_TIMESTAMP_US, " us")
        check_quantity(where, "'dur'", dur, MAX_NODE_DURATION_S * 1e6, " us")
        complete.append(event)
    return complete


def _count_events(path: Path) -> int:
    """Events in a Kineto file, counted by their ``"ph"`` keys without parsing the JSON."""
    count, tail = 0, b""
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            window = tail + chunk
            count += window.count(b'"ph"')
            tail = window[-3:]
            count -= tail.count(b'"ph"')  # counted again with the next chunk
    return count + tail.count(b'"ph"')


def _outermost(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events not nested inside another of the list (same thread)."""
    result, open_until = [], -math.inf
    for event in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        if event["ts"] >= open_until:
            result.append(event)
            open_until = event["ts"] + event["dur"]
        else:
            open_until = max(open_until, event["ts"] + event["dur"])
    return result


def _select(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """The (event, collective kind or None) pairs that become nodes, in start order."""
    kernels = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    if kernels:
        chosen = [(e, _comm_kind(str(e.get("name", "")))) for e in kernels]
    else:
        comms = [
            (e, kind)
            for e in events
            if (kind := _comm_kind(str(e.get("name", "")))) is not None
            and e.get("cat") in ("user_annotation", "cpu_op")
        ]
        ops = [e for e in events if e.get("cat") == "cpu_op" and _comm_kind(e["name"]) is None]
        busiest = Counter(e.get("tid") for e in ops).most_common(1)
        main = [e for e in ops if busiest and e.get("tid") == busiest[0][0]]
        comm_ids = {id(e) for e, _ in comms}
        chosen = [(e, None) for e in _outermost(main) if id(e) not in comm_ids] + comms
    return sorted(chosen, key=lambda pair: pair[0]["ts"])


def _gemm(event: dict[str, Any]) -> Op | None:
    """The GEMM of a matmul CPU operator from its recorded input dims (``record_shapes``)."""
    args = event.get("args")
    if not isinstance(args, dict):
        return None
    return gemm_op_from_dims(
        str(event.get("name", "")), args.get("Input Dims"), args.get("Input type")
    )


def _nodes(
    selected: list[tuple[dict[str, Any], str | None]],
    groups: dict[str, tuple[int, ...]],
    world: tuple[int, ...],
    file: str,
) -> list[TraceNode]:
    nodes: list[TraceNode] = []
    last_compute: tuple[int, float] | None = None  # (node id, end)
    finished_comms: list[tuple[int, float]] = []
    for node_id, (event, kind) in enumerate(selected):
        start, end = event["ts"], event["ts"] + event["dur"]
        name = str(event.get("name", ""))
        if kind is None:
            deps = tuple(i for i, done in finished_comms if done <= start)
            finished_comms = [(i, done) for i, done in finished_comms if done > start]
            shaped = _gemm(event)
            nodes.append(
                TraceNode(
                    node_id,
                    name,
                    "compute",
                    deps,
                    duration_s=event["dur"] * 1e-6,
                    ops=(shaped,) if shaped is not None else (),
                )
            )
            last_compute = (node_id, end)
            continue
        where = f"{file}: node {node_id} ({name[:60]})"
        size_bytes = _size_bytes(event, where)
        deps = (last_compute[0],) if last_compute and last_compute[1] <= start else ()
        nodes.append(
            TraceNode(
                node_id,
                name,
                "collective",
                deps,
                stream="comm",
                category="comm",
                duration_s=None if size_bytes else event["dur"] * 1e-6,
                ops=(Op(name, "collective", comm=kind, comm_bytes=float(size_bytes)),),
                group=_group(event, groups, world, where),
            )
        )
        finished_comms.append((node_id, end))
    return nodes


def _with_launches(
    nodes: list[TraceNode], selected: list[tuple[dict[str, Any], str | None]], events: list
) -> list[TraceNode]:
    """Add the host thread's kernel launches, so kernels wait for them as on the GPU.

    Launch ``i`` (the CUDA runtime call whose ``correlation`` matches kernel ``i``) becomes a
    node on the :data:`HOST_STREAM` lasting from the end of launch ``i-1`` to its own end:
    the host's time between launches, CPU ops included. A kernel then starts after its
    launch and after the previous kernel of the stream, which replays the launch gaps.
    """
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and isinstance(e.get("args"), dict)
        and "correlation" in e["args"]
    }
    pairs = []
    for node, (event, _) in zip(nodes, selected, strict=True):
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        launch = launches.get(args.get("correlation"))
        if launch is not None:
            pairs.append((launch["ts"] + launch["dur"], node.node_id))
    result = list(nodes)
    previous_end = None
    for offset, (end, kernel_id) in enumerate(sorted(pairs)):
        host_id = len(nodes) + offset
        gap_us = end - previous_end if previous_end is not None else 0.0
        previous_end = end
        result.append(
            TraceNode(
                host_id,
                f"launch:{nodes[kernel_id].name}",
                "compute",
                stream=HOST_STREAM,
                category=HOST_STREAM,
                duration_s=max(0.0, gap_us) * 1e-6,
            )
        )
        kernel = result[kernel_id]
        result[kernel_id] = dataclasses.replace(kernel, deps=(*kernel.deps, host_id))
    return result


def read_kineto_file(
    path: Path, rank: int | None = None, max_nodes: int | None = None
) -> RankTrace:
    """Read one rank's Kineto trace.

    The events are counted before the JSON is parsed, so an oversized trace is refused in a
    fraction of a second (parsing a million events takes over a gigabyte).

    Raises:
        TraceFormatError: too large, too many events, not JSON, not a Kineto trace, or events
            with bad times or sizes.
    """
    check_file_size(path)
    limit = MAX_NODES_PER_RANK if max_nodes is None else max_nodes
    counted = _count_events(path)
    if counted > limit:
        raise TraceFormatError(
            f"{path.name}: the number of events must be at most {limit:,} (got about "
            f"{counted:,}; raise it with --max-trace-nodes {counted})"
        )
    try:
        data = json.loads(path.read_text(errors="replace"))
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path.name}: invalid JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:
        raise TraceFormatError(f"{path.name}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer literal of thousands of digits
        raise TraceFormatError(f"{path.name}: invalid JSON ({str(exc)[:80]})") from None
    info = data.get("distributedInfo") if isinstance(data, dict) else None
    info = info if isinstance(info, dict) else {}
    rank_id, world_size = info.get("rank", rank), info.get("world_size", 0)
    if not isinstance(rank_id, int) or not 0 <= rank_id <= MAX_RANK:
        raise TraceFormatError(
            f"{path.name}: the rank must be an integer in 0..{MAX_RANK}, from distributedInfo "
            f"or a file name <name>.<rank>.json (got {rank_id!r})"
        )
    if not isinstance(world_size, int) or not 0 <= world_size <= MAX_RANK + 1:
        raise TraceFormatError(
            f"{path.name}: distributedInfo 'world_size' must be an integer in 1..{MAX_RANK + 1} "
            f"(got {world_size!r})"
        )
    world = tuple(range(world_size)) if world_size else ()
    groups = {
        str(pg.get("pg_name")): tuple(pg["ranks"])
        for pg in info.get("pg_config") or []
        if isinstance(pg, dict)
        and isinstance(pg.get("ranks"), list)
        and all(isinstance(r, int) and 0 <= r <= MAX_RANK for r in pg["ranks"])
    }
    devices = data.get("deviceProperties")
    first = devices[0] if isinstance(devices, list) and devices else None
    device = str(first.get("name", "")) if isinstance(first, dict) else ""
    events = _complete_events(data, path.name, limit)
    selected = _select(events)
    nodes = _with_launches(_nodes(selected, groups, world, path.name), selected, events)
    for node in nodes:
        check_node(f"{path.name}: node {node.node_id} ({node.name[:60]})", node)
    return RankTrace(path.name, rank_id, nodes, world_size=world_size, accelerator=device)


def read_kineto(directory: Path, max_nodes: int | None = None) -> list[RankTrace]:
    """Read every ``<name>.<rank>.json`` Kineto file of ``directory``, ordered by rank.

    Raises:
        TraceFormatError: see :func:`read_kineto_file`; also two files for one rank.
    """
    traces: dict[int, RankTrace] = {}
    files = sorted(directory.glob("*.json"))
    check_count(str(directory), "the number of rank files", len(files), MAX_RANK_FILES)
    for path in files:
        match = RANK_FILE.match(path.name)
        trace = read_kineto_file(path, int(match["rank"]) if match else None, max_nodes)
        if trace.rank in traces:
            raise TraceFormatError(f"{path.name}: a second file for rank {trace.rank}")
        traces[trace.rank] = trace
    return [traces[rank] for rank in sorted(traces)]
