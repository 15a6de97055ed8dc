"""What the store modules share: counting a listing, chunking, and NOTIFY of moved work."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, Select, func, select

from sqla_scheduler._dialects import notice_of_later
from sqla_scheduler._statements import Scheduling

Key = tuple[str, str]
T = TypeVar("T")

#: Rows inserted, or keys bound, in one statement: well under SQLite's 32,766 bound
#: parameters (an inserted row binds seven).
PER_STATEMENT = 1000


def count_rows(conn: Connection, query: Select[Any]) -> int:
    """How many rows ``query`` (a listing's, unlimited) selects: counted in the database,
    its order dropped."""
    found = conn.execute(select(func.count()).select_from(query.order_by(None).subquery()))
    return int(found.scalar_one())


def chunks(items: Sequence[T], size: int = PER_STATEMENT) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size``, one for each statement."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
