"""What the store modules share: their statements, chunking, and NOTIFY of moved work."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import Connection, Table

from sqla_scheduler._dialects import backend_for, notice_of_later
from sqla_scheduler._statements import Scheduling, Statements, statements_for

Key = tuple[str, str]
T = TypeVar("T")

#: Rows inserted, or keys bound, in one statement: well under SQLite's 32,766 bound
#: parameters (an inserted row binds seven).
PER_STATEMENT = 1000


def statements(conn: Connection, table: Table) -> Statements:
    """The statements for ``table`` in the dialect of ``conn``."""
    return statements_for(table, backend_for(conn.dialect))


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``PER_STATEMENT``, one for each statement."""
    for start in range(0, len(items), PER_STATEMENT):
        yield items[start : start + PER_STATEMENT]


def notify(
    conn: Connection, stmts: Scheduling, task_names: set[str], at: datetime | None = None
) -> None:
    """NOTIFY in the caller's transaction: delivered on commit, dropped on rollback.

    The payload is the task name for work due now, else the task and its time (see
    ``notice_of_later``), so a scheduler can wait for it. For the UPDATEs that move an
    execution (reschedule, a recurring task's upsert); an INSERT sends its NOTIFYs from
    within its own statement.
    """
    if stmts.notify is not None:
        for name in sorted(task_names):
            payload = name if at is None else notice_of_later(name, at)
            conn.execute(stmts.notify, {"channel": stmts.channel, "payload": payload})
