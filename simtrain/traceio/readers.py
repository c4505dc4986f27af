"""Pick the reader of a trace directory: Chakra (``.et`` or Chakra JSON) or Kineto JSON."""

from __future__ import annotations

from pathlib import Path

from simtrain.errors import TraceFormatError
from simtrain.traceio.limits import MAX_FILE_BYTES
from simtrain.traceio.model import RankTrace


def trace_format(directory: Path) -> str:
    """``chakra`` or ``kineto``: Kineto files are JSON objects with a ``traceEvents`` key.

    Raises:
        TraceFormatError: ``directory`` is not a directory.
    """
    if not directory.is_dir():
        raise TraceFormatError(f"'{directory}' must be a directory of per-rank trace files")
    for path in sorted(directory.glob("*.json")):
        if path.stat().st_size <= MAX_FILE_BYTES:
            with path.open("rb") as handle:
                head = handle.read(4096)
            if b'"traceEvents"' in head or b'"deviceProperties"' in head:
                return "kineto"
    return "chakra"


def read_traces(directory: Path, max_nodes: int | None = None) -> tuple[str, list[RankTrace]]:
    """The format and the per-rank traces of ``directory``.

    Args:
        directory: folder of per-rank files.
        max_nodes: most nodes (events) per rank file (default
            :data:`~simtrain.traceio.limits.MAX_NODES_PER_RANK`).

    Raises:
        TraceFormatError: the directory holds no readable trace (see the readers).
    """
    fmt = trace_format(directory)
    if fmt == "kineto":
        from simtrain.traceio.kineto import read_kineto

        return fmt, read_kineto(directory, max_nodes)
    from simtrain.traceio.chakra import read_chakra

    return fmt, read_chakra(directory, max_nodes)
