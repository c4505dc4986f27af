"""The trace file: a program serialised as versioned JSON, and read back with validation.

Schema ``simtrain-trace`` version 1::

    {
      "schema": "simtrain-trace", "version": 1,
      "world_size": int, "simulated_ranks": [int], "weights": {"rank": int},
      "syncs_on_p2p": bool (optional, default true),
      "spec": {...resolved experiment...} | null,
      "tasks": [
        {"rank": int, "stream": str, "label": str, "category": str,
         "deps": [task index], "group": [rank], "collective_key": str,
         "stage": int, "microbatch": int, "duration_s": float | null,
         "host_sync": bool (optional, default false),
         "ops": [{"name", "kind", "phase", "flops", "bytes_accessed", "m", "n", "k",
                  "batch", "comm", "axis", "comm_bytes", "causal", "layer"}]}
      ]
    }

Tasks refer to each other by their index in ``tasks``; within one (rank, stream) they run in
list order. The trace lives beside :class:`Program` in ``parallel/`` because it *is* a
serialised program (DESIGN.md places the schema in ``workload/``; the program type it
serialises is defined here, so the schema follows it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from simtrain.errors import TraceFormatError
from simtrain.parallel.program import Program, Task
from simtrain.workload.ops import Op

SCHEMA = "simtrain-trace"
VERSION = 1
_OP_FIELDS = {f.name: f.type for f in dataclasses.fields(Op)}


def program_to_dict(program: Program, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """Serialise ``program`` (and optionally the resolved spec) to a JSON-ready dict."""
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "world_size": program.world_size,
        "simulated_ranks": list(program.simulated_ranks),
        "weights": {str(k): v for k, v in program.weights.items()},
        "syncs_on_p2p": program.syncs_on_p2p,
        "spec": spec,
        "tasks": [
            {
                "rank": t.rank,
                "stream": t.stream,
                "label": t.label,
                "category": t.category,
                "deps": list(t.deps),
                "group": list(t.group),
                "collective_key": t.collective_key,
                "stage": t.stage,
                "microbatch": t.microbatch,
                "duration_s": t.duration_s,
                "host_sync": t.host_sync,
                "ops": [dataclasses.asdict(op) for op in t.ops],
            }
            for t in program.tasks
        ],
    }


def _op_from_dict(data: Any, where: str) -> Op:
    if not isinstance(data, dict):
        raise TraceFormatError(f"{where}: an op must be an object (got {type(data).__name__})")
    unknown = set(data) - set(_OP_FIELDS)
    if unknown:
        raise TraceFormatError(f"{where}: unknown op fields {sorted(unknown)}")
    try:
        return Op(**data)
    except TypeError as exc:
        raise TraceFormatError(f"{where}: {exc}") from None


def program_from_dict(data: Any) -> Program:
    """Rebuild a program from :func:`program_to_dict` output, checking the schema.

    Raises:
        TraceFormatError: wrong schema or version, missing fields, or dangling task references.
    """
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TraceFormatError(f"not a simtrain trace: 'schema' must be {SCHEMA!r}")
    if data.get("version") != VERSION:
        raise TraceFormatError(
            f"'version' must be {VERSION} (got {data.get('version')!r}); re-export the trace"
        )
    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list):
        raise TraceFormatError("'tasks' must be a list")
    tasks = []
    for index, raw in enumerate(raw_tasks):
        where = f"tasks[{index}]"
        if not isinstance(raw, dict):
            raise TraceFormatError(f"{where} must be an object")
        try:
            deps = tuple(int(d) for d in raw.get("deps", []))
            if any(d < 0 or d >= len(raw_tasks) or d == index for d in deps):
                raise TraceFormatError(f"{where}.deps refers to a task that does not exist")
            tasks.append(
                Task(
                    rank=int(raw["rank"]),
                    stream=str(raw["stream"]),
                    label=str(raw.get("label", "")),
                    category=str(raw.get("category", "compute")),
                    ops=tuple(
                        _op_from_dict(op, f"{where}.ops[{i}]")
                        for i, op in enumerate(raw.get("ops", []))
                    ),
                    duration_s=None if raw.get("duration_s") is None else float(raw["duration_s"]),
                    deps=deps,
                    group=tuple(int(r) for r in raw.get("group", [])),
                    collective_key=str(raw.get("collective_key", "")),
                    stage=int(raw.get("stage", -1)),
                    microbatch=int(raw.get("microbatch", -1)),
                    host_sync=bool(raw.get("host_sync", False)),
                )
            )
        except KeyError as exc:
            raise TraceFormatError(f"{where} is missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise TraceFormatError(f"{where}: {exc}") from None
    return Program(
        tasks=tasks,
        world_size=int(data.get("world_size", 1)),
        simulated_ranks=tuple(int(r) for r in data.get("simulated_ranks", [])),
        weights={int(k): int(v) for k, v in data.get("weights", {}).items()},
        syncs_on_p2p=bool(data.get("syncs_on_p2p", True)),
    )
