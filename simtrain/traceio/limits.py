"""Size limits on imported traces, so a hostile or corrupt file fails fast with a clear error.

The limits are generous for real jobs (a Kineto trace of one step of a large model holds a
few hundred thousand events; a Chakra rank file of Llama-scale pipelines a few hundred
thousand nodes) and small enough that a replay never exhausts host memory.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simtrain.errors import TraceFormatError
from simtrain.traceio.model import TraceNode

MAX_FILE_BYTES = 512 * 1024 * 1024
"""Largest rank file read (512 MiB)."""
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
"""Largest gzipped rank file once decompressed (256 MiB, about a million Chakra nodes)."""
MAX_NODES_PER_RANK = 1_000_000
"""Default ``--max-trace-nodes``: most nodes (or events) in one rank file."""
MAX_RANK_FILES = 4096
"""Most rank files in one trace directory."""
MAX_DEPS_PER_NODE = 100_000
"""Most dependencies of one node."""
MAX_RANK = 1 << 20
"""Largest rank id a trace may name (process groups, send/recv peers)."""


def check_file_size(path: Path, max_bytes: int | None = None) -> None:
    """Raise if ``path`` is larger than ``max_bytes`` (default :data:`MAX_FILE_BYTES`).

    Raises:
        TraceFormatError: the file is too large.
    """
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    size_bytes = path.stat().st_size
    if size_bytes > max_bytes:
        raise TraceFormatError(
            f"{path.name}: file size must be at most {max_bytes} bytes (got {size_bytes})"
        )


def check_count(where: str, what: str, count: int, limit: int, flag: str = "") -> None:
    """Raise if ``count`` exceeds ``limit``; ``flag`` names the option that raises the limit.

    Raises:
        TraceFormatError: too many items.
    """
    if count > limit:
        hint = f"; raise it with {flag}" if flag else ""
        raise TraceFormatError(f"{where}: {what} must be at most {limit} (got {count}{hint})")


MAX_NODE_DURATION_S = 3600.0
"""Longest measured duration of one node: an hour (no kernel or collective of a training step
lasts that long; a longer one is a unit error or a corrupt file)."""
MAX_NODE_BYTES = float(1 << 40)
"""Largest message, tensor or memory traffic of one node: 1 TiB (1,000x the largest
collective of a training step)."""
MAX_NODE_FLOPS = 1e18
"""Most floating-point operations of one node: 1e18 (1,000 s of an H100 at its dense peak)."""
MAX_TIMESTAMP_US = 1e17
"""Largest Kineto timestamp in microseconds (Unix time today is about 1.8e15)."""


def check_quantity(where: str, what: str, value: float, limit: float, unit: str = "") -> float:
    """Raise unless ``value`` is a finite number in ``0..limit``.

    Raises:
        TraceFormatError: naming the node and the attribute, with the valid range.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 <= value <= limit:
        shown = f"{value:.4g}" if ok and not isinstance(value, int) else repr(value)[:40]
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
            shown = f"an integer of {value.bit_length()} bits"
        raise TraceFormatError(
            f"{where}: {what} must be a finite number in 0..{limit:.4g}{unit} (got {shown})"
        )
    return value


def check_node(where: str, node: TraceNode) -> None:
    """Raise unless every quantity of ``node`` is finite and physically plausible.

    Raises:
        TraceFormatError: a duration over an hour, or a size, traffic or FLOP count beyond
            the limits above.
    """
    if node.duration_s is not None:
        check_quantity(where, "the duration", node.duration_s, MAX_NODE_DURATION_S, " s")
    for op in node.ops:
        check_quantity(where, f"op {op.name!r} flops", op.flops, MAX_NODE_FLOPS)
        check_quantity(where, f"op {op.name!r} bytes", op.bytes_accessed, MAX_NODE_BYTES)
        check_quantity(where, f"op {op.name!r} comm_size", op.comm_bytes, MAX_NODE_BYTES)


def check_group(where: str, what: str, group: list[Any] | tuple[Any, ...]) -> tuple[int, ...]:
    """A process group: at most ``MAX_RANK + 1`` distinct ranks, each in ``0..MAX_RANK``.

    Raises:
        TraceFormatError: naming the attribute, without printing a huge list.
    """
    bad = len(group) > MAX_RANK + 1 or any(
        isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= MAX_RANK for r in group
    )
    if bad or len(set(group)) != len(group):
        shown = repr(list(group[:4]))[:-1] + (", ...]" if len(group) > 4 else "]")
        raise TraceFormatError(
            f"{where}: {what} must list distinct ranks in 0..{MAX_RANK} (got {shown}, "
            f"{len(group)} entries)"
        )
    return tuple(group)
