"""Fit a rich table to the terminal without ever cutting a name or a number.

Rich shrinks a table that is wider than the console by eliding cells (``A100…``) or folding
them mid-token (``984,`` / ``000``). That is harmless for prose and fatal for the names a user
must type back and the numbers they came for. :func:`fit_table` keeps the table as it is when
it fits, then drops decoration (borders, padding), and when even that is too wide switches to
a plain layout: one block per row, ``column: value`` lines, wrapped only between words.

Examples:
    >>> from rich.table import Table
    >>> t = Table(title="links")
    >>> for c in ("name", "GB/s"):
    ...     t.add_column(c)
    >>> t.add_row("nvlink4", "450")
    >>> print(plain_text(t, width=40))
    links
    nvlink4
      GB/s: 450
"""

from __future__ import annotations

import io
import re
import textwrap

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text


def _cell_text(cell: RenderableType) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return str(cell)


def _wrap(text: str, width: int, indent: str) -> list[str]:
    """Word-wrap ``text`` at ``width``, never breaking a word or a number."""
    return textwrap.wrap(
        text,
        width=max(width, len(indent) + 10),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def plain_text(table: Table, width: int) -> str:
    """The table as plain lines: its title, then each row as a block of ``column: value``.

    A table without a header shows ``first cell: other cells`` per row instead.
    """
    columns = [list(map(_cell_text, column.cells)) for column in table.columns]
    headers = [_cell_text(column.header) for column in table.columns]
    lines: list[str] = []
    if table.title:
        for title_line in _cell_text(table.title).splitlines():
            lines.extend(_wrap(title_line, width, ""))
    num_rows = len(columns[0]) if columns else 0
    for row in range(num_rows):
        cells = [column[row] for column in columns]
        if not table.show_header or len(columns) == 1:
            key, rest = cells[0], "  ".join(c for c in cells[1:] if c)
            lines.extend(_wrap(f"{key}: {rest}" if rest else key, width, ""))
            continue
        lines.append(cells[0] or "-")
        for header, value in zip(headers[1:], cells[1:], strict=True):
            if value:
                lines.extend(_wrap(f"{header}: {value}" if header else value, width, "  "))
    if table.caption:
        lines.extend(_wrap(_cell_text(table.caption), width, ""))
    return "\n".join(lines)


_BOX_DRAWING = re.compile("[\u2500-\u257f]")


def _tokens(text: str) -> set[str]:
    return set(_BOX_DRAWING.sub(" ", text).split())


def renders_whole(table: Table, width: int) -> bool:
    """Whether ``table`` rendered at ``width`` columns shows every word of every cell intact."""
    canvas = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    canvas.print(table)
    rendered = canvas.file.getvalue()  # type: ignore[attr-defined]
    wanted = set()
    for column in table.columns:
        if table.show_header:
            wanted |= _tokens(_cell_text(column.header))
        for cell in column.cells:
            wanted |= _tokens(_cell_text(cell))
    return "…" not in rendered and wanted <= _tokens(rendered)


def fit_table(table: Table, console: Console) -> RenderableType:
    """The table itself if it shows whole at the console's width; else undecorated; else plain.

    Right-justified columns hold numbers and are never wrapped (a confidence interval stays
    on one line); other columns may wrap between words.
    """
    width = console.width
    for column in table.columns:
        if column.justify == "right":
            column.no_wrap = True
    if renders_whole(table, width):
        return table
    table.box = box.SIMPLE_HEAD if table.show_header else None
    table.show_edge = False
    table.padding = (0, 1)
    table.pad_edge = False
    if renders_whole(table, width):
        return table
    groups = column_groups(table, width)
    if groups is not None:
        return Group(*groups)
    return Text(plain_text(table, width))


def _subtable(
    table: Table, indices: list[int], title: str | None, caption: str | None = None
) -> Table:
    """A copy of ``table`` with only the columns at ``indices`` (decoration as the original)."""
    sub = Table(
        title=title,
        caption=caption,
        caption_justify=table.caption_justify,
        title_justify=table.title_justify,
        show_header=table.show_header,
        box=table.box,
        show_edge=table.show_edge,
        padding=table.padding,
        pad_edge=table.pad_edge,
    )
    columns = [table.columns[i] for i in indices]
    for column in columns:
        sub.add_column(
            column.header, justify=column.justify, no_wrap=column.no_wrap, overflow=column.overflow
        )
    for row in zip(*(list(column.cells) for column in columns), strict=True):
        sub.add_row(*row)
    return sub


def column_groups(table: Table, width: int) -> list[Table] | None:
    """The table folded into several narrower ones, each repeating the first column.

    Columns are taken left to right while the group still renders whole; None when even the
    first column with one other does not fit (the caller then uses the plain layout).
    """
    if not table.show_header or len(table.columns) < 3:
        return None
    groups: list[list[int]] = []
    current = [0]
    for index in range(1, len(table.columns)):
        if renders_whole(_subtable(table, [*current, index], None), width):
            current.append(index)
            continue
        if len(current) == 1:
            return None
        groups.append(current)
        current = [0, index]
        if not renders_whole(_subtable(table, current, None), width):
            return None
    groups.append(current)
    title = _cell_text(table.title) if table.title else None
    caption = _cell_text(table.caption) if table.caption else None
    last = len(groups) - 1
    return [
        _subtable(table, group, title if n == 0 else None, caption if n == last else None)
        for n, group in enumerate(groups)
    ]
