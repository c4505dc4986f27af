"""Write the report files of a run into a directory (``simtrain run EXP --out DIR``).

Files: ``report.md`` (readable on GitHub), ``timeline.png``, ``breakdown.png``,
``memory.png`` and ``trace.json`` (Chrome trace-event format, opens in Perfetto).
``report.json`` is written by the CLI itself; this module renders the rest from the result and
that same report dict, so the Markdown and the JSON never disagree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simtrain.report.chrome_trace import chrome_trace
from simtrain.report.markdown import render_markdown
from simtrain.report.plots import plot_breakdown, plot_memory, plot_timeline

if TYPE_CHECKING:
    from simtrain.metrics.result import SimulationResult

FIGURES = {
    "timeline.png": plot_timeline,
    "breakdown.png": plot_breakdown,
    "memory.png": plot_memory,
}
"""File name → figure function of every PNG in a report directory."""

DPI = 130


def write_report_files(
    result: SimulationResult, directory: Path, report: dict[str, Any] | None = None
) -> list[Path]:
    """Write report.md, the three PNGs and trace.json into ``directory``; return their paths.

    Args:
        result: the simulated step.
        directory: output folder (created if missing).
        report: the run report dict (``report.json``); defaults to ``result.summary()``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    report = report if report is not None else result.summary()
    written = []
    for name, draw in FIGURES.items():
        path = directory / name
        draw(result).savefig(path, dpi=DPI)
        written.append(path)
    trace_path = directory / "trace.json"
    trace_path.write_text(json.dumps(chrome_trace(result)))
    md_path = directory / "report.md"
    md_path.write_text(render_markdown(report, list(FIGURES)))
    return [md_path, *written, trace_path]
