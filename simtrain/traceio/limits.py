"""Size limits on imported traces, so a hostile or corrupt file fails fast with a clear error.

The limits are generous for real jobs (a Kineto trace of one step of a large model holds a
few hundred thousand events; a Chakra rank file of Llama-scale pipelines a few hundred
thousand nodes) and small enough that a replay never exhausts host memory.
"""

from __future__ import annotations

from pathlib import Path

from simtrain.errors import TraceFormatError

MAX_FILE_BYTES = 512 * 1024 * 1024
"""Largest rank file read (512 MiB)."""
MAX_NODES_PER_RANK = 2_000_000
"""Most nodes (or kernel events) in one rank file."""
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


def check_count(where: str, what: str, count: int, limit: int) -> None:
    """Raise if ``count`` exceeds ``limit``.

    Raises:
        TraceFormatError: too many items.
    """
    if count > limit:
        raise TraceFormatError(f"{where}: {what} must be at most {limit} (got {count})")
