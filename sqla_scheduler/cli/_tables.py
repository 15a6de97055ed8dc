"""How the listings print: a table of rows, times in UTC, ages, an error's first line, a
running execution's progress."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from sqla_scheduler.executions import Progress


def _print_table(columns: list[tuple[str, str]], rows: Iterable[list[str]], *, empty: str) -> None:
    """A table with ``columns`` (header, justification) of ``rows``, each cell shown as
    written (no rich markup in names, ids or error text is interpreted); ``empty`` when
    there are no rows."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    if not table.row_count:
        click.echo(empty)
        return
    console = Console()
    if not console.is_terminal:
        # Piped or captured: never squeeze or cut columns to fit 80 characters.
        console = Console(width=100_000)
    console.print(table)


#: The most characters of an error's first line the table shows.
_ERROR_LINE = 80


def _error_line(error: str | None) -> str:
    """The first line of an error text (its type and message), cut to ``_ERROR_LINE``."""
    if not error:
        return "-"
    line = error.splitlines()[0]
    return line if len(line) <= _ERROR_LINE else f"{line[: _ERROR_LINE - 1]}…"


#: The most characters of a progress report the table shows: its percent and the start of
#: its message (a message may be 1,024 characters long).
_PROGRESS_CELL = 40


def _progress_cell(progress: Progress | None) -> str:
    """A running execution's latest report on one line: its whole percent (rounded down)
    and its message, each run of white space in it one space, cut to ``_PROGRESS_CELL``;
    ``-`` when it has reported nothing."""
    from sqla_scheduler._progress import whole_percent

    if progress is None:
        return "-"
    parts = [] if progress.fraction is None else [f"{whole_percent(progress.fraction)}%"]
    if progress.message is not None:
        parts.append(" ".join(progress.message.split()))
    cell = " ".join(part for part in parts if part) or "-"
    return cell if len(cell) <= _PROGRESS_CELL else f"{cell[: _PROGRESS_CELL - 1]}…"


def _age(delta: Any) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _utc(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
