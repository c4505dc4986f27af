"""Progress bars for long commands: counts, rate and ETA on the terminal's stderr.

:func:`progress` opens one transient rich display; each :meth:`Progress.stage` adds a bar
(``estimating 12,345/40,000 ... ETA 0:00:07``) and returns the function that advances it.
Disabled (not a terminal, ``--json``), every stage is a no-op, so library code calls the
same functions either way. Bars go to stderr so that stdout stays clean for ``--json`` and
pipes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Advance = Callable[..., None]
"""Advances a stage: ``advance()`` by one, ``advance(n)`` by n."""


def _noop(*_: Any) -> None:
    """Advance nothing (progress disabled)."""


class Progress:
    """A set of progress bars, one per stage of a command (see the module docstring)."""

    def __init__(self, display: Any = None) -> None:
        self._display = display

    @property
    def enabled(self) -> bool:
        """Whether bars are drawn."""
        return self._display is not None

    def stage(self, label: str, total: int | None) -> Advance:
        """Add a bar for ``total`` items (None: unknown, a pulsing bar) and return its advance."""
        if self._display is None:
            return _noop
        task = self._display.add_task(label, total=total)

        def advance(count: int = 1) -> None:
            self._display.advance(task, count)

        return advance


DISABLED = Progress()
"""A progress display that draws nothing."""


@contextmanager
def progress(enabled: bool) -> Iterator[Progress]:
    """A transient progress display on stderr (``enabled`` False: draws nothing)."""
    if not enabled:
        yield DISABLED
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    display = RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with display:
        yield Progress(display)


def stderr_is_terminal() -> bool:
    """Whether stderr is an interactive terminal (where progress bars belong)."""
    import sys

    return sys.stderr.isatty()
