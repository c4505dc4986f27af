"""Chrome trace-event export of a simulated step, for Perfetto (ui.perfetto.dev) and chrome://tracing.

Layout of the trace (Trace Event Format, JSON object form):

- one *process* per simulated rank (``pid`` = global rank), named ``rank R (stage S, stands
  for W ranks)``;
- one *thread* per stream of that rank (``compute`` first, then the communication streams),
  so every (rank, stream) pair is its own track;
- one complete event (``ph: "X"``) per task on each track it occupies: name = task label
  (``0F3``, ``0F3:attn_all_gather``), category = time-breakdown category, ``ts``/``dur`` in
  microseconds, and the task's stage, microbatch, group size and collective key in ``args``
  (plus, for communication, the ``algorithm`` and ``protocol`` the network model chose).
  A collective is one task shared by its simulated members, drawn on each member's track;
- *flow events* (``ph: "s"`` / ``"f"``) draw arrows: from a point-to-point send to each task of
  another rank that waits on it, and along the simulated members of a collective (in rank
  order). Under symmetry reduction a collective often has one simulated member; its whole
  group is then in ``args.group_size``.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from simtrain.parallel.layout import RankLayout

if TYPE_CHECKING:
    from simtrain.metrics.result import SimulationResult

US_PER_S = 1e6


def _track_ranks(result: SimulationResult) -> list[list[int]]:
    """Ranks whose tracks show each task: a collective on all its simulated members."""
    simulated = set(result.program.simulated_ranks)
    return [
        [r for r in task.group if r in simulated] if task.collective_key else [task.rank]
        for task in result.program.tasks
    ]


def _stream_ids(result: SimulationResult, ranks: list[list[int]]) -> dict[tuple[int, str], int]:
    """Thread id of each (rank, stream): compute is 0, other streams follow by name."""
    streams: dict[int, set[str]] = defaultdict(set)
    for task, track_ranks in zip(result.program.tasks, ranks, strict=True):
        for rank in track_ranks:
            streams[rank].add(task.stream)
    ids = {}
    for rank, names in streams.items():
        ordered = sorted(names, key=lambda n: (n != "compute", n))
        ids.update({(rank, name): k for k, name in enumerate(ordered)})
    return ids


def _flow_pairs(
    result: SimulationResult, ranks: list[list[int]]
) -> list[tuple[tuple[int, int], tuple[int, int], str]]:
    """((task, rank), (task, rank), name) of every arrow in the trace."""
    tasks = result.program.tasks
    pairs = []
    for i, task in enumerate(tasks):
        if task.stream == "host":
            continue  # the host waits on transfers too; one arrow, to the compute, suffices
        for dep in task.deps:
            src = tasks[dep]
            is_p2p = src.stream != "compute" and not src.collective_key and len(src.group) == 2
            if src.rank != task.rank and is_p2p:
                pairs.append(((dep, src.rank), (i, task.rank), "p2p"))
    for i, track_ranks in enumerate(ranks):
        if tasks[i].collective_key:
            ordered = sorted(track_ranks)
            pairs += [((i, a), (i, b), "collective") for a, b in itertools.pairwise(ordered)]
    return pairs


def chrome_trace(result: SimulationResult) -> dict[str, Any]:
    """The step as a trace-event JSON object (see the module docstring for the layout)."""
    program = result.program
    ranks = _track_ranks(result)
    tids = _stream_ids(result, ranks)
    events: list[dict[str, Any]] = []
    layout = RankLayout.from_spec(result.spec.parallel)
    for rank in program.simulated_ranks:
        weight = result.weights.get(rank, 1)
        name = f"rank {rank} (stage {layout.coords(rank)['pp']}, stands for {weight} ranks)"
        events.append({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": name}})
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}}
        )
    for (rank, stream), tid in sorted(tids.items()):
        events.append(
            {"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": stream}}
        )
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": rank,
                "tid": tid,
                "args": {"sort_index": tid},
            }
        )
    start_us = result.start_s * US_PER_S
    dur_us = (result.end_s - result.start_s) * US_PER_S
    choices = result.comm_choices or [("", "")] * len(program.tasks)
    for i, task in enumerate(program.tasks):
        args: dict[str, Any] = {
            "stage": task.stage,
            "microbatch": task.microbatch,
            "group_size": len(task.group),
            "collective_key": task.collective_key,
            "num_ops": len(task.ops),
        }
        if choices[i][0]:
            args["algorithm"], args["protocol"] = choices[i]
        for rank in ranks[i]:
            events.append(
                {
                    "ph": "X",
                    "name": task.label,
                    "cat": task.category,
                    "pid": rank,
                    "tid": tids[(rank, task.stream)],
                    "ts": float(start_us[i]),
                    "dur": float(dur_us[i]),
                    "args": args,
                }
            )
    for flow_id, (src, dst, name) in enumerate(_flow_pairs(result, ranks)):
        for phase, (index, rank) in (("s", src), ("f", dst)):
            task = program.tasks[index]
            event = {
                "ph": phase,
                "id": flow_id,
                "name": name,
                "cat": name,
                "pid": rank,
                "tid": tids[(rank, task.stream)],
                # the middle of the slice, so the arrow binds to it (``bp: e`` = enclosing)
                "ts": float(start_us[index] + dur_us[index] / 2),
            }
            if phase == "f":
                event["bp"] = "e"
            events.append(event)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "experiment": result.spec.name,
            "step_time_s": result.step_time_s,
            "simtrain_version": result.version,
        },
    }
