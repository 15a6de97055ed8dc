"""The per-minute counts' statements (``<table>_stats``): add a process's counts, read
them summed over processes by time bucket and outcome, and prune the old minutes."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Delete,
    Insert,
    Select,
    Table,
    bindparam,
    delete,
    func,
    literal_column,
    select,
)

from sqla_scheduler._dialects import Backend
from sqla_scheduler.models import STATS_COLUMNS, stats_table

__all__ = ["Stats"]


class Stats:
    """Statements on ``table``'s stats table."""

    def __init__(self, table: Table, backend: Backend) -> None:
        s = self.stats = stats_table(table)
        #: Add one row's counts (bound by column name, with ``minute``, ``task_name``,
        #: ``node`` and ``outcome``) to the row with its key, inserting it when missing. A
        #: process writes its own rows only (``node``), so no two processes wait for one.
        self.add: Insert = backend.upsert(
            backend.insert(s),
            lambda added: {name: s.c[name] + added[name] for name in STATS_COLUMNS},
            None,
        )
        minute = bindparam("threshold", type_=BigInteger())
        # At most ``limit`` rows' worth of the oldest minutes before ``threshold`` (and the
        # rest of the last of them): through a derived table, as MariaDB refuses a LIMIT
        # in a subquery on the table being deleted from.
        oldest = (
            select(s.c.minute)
            .where(s.c.minute < minute)
            .order_by(s.c.minute)
            .limit(bindparam("limit"))
            .subquery("oldest")
        )
        last = select(func.max(oldest.c.minute)).scalar_subquery()
        #: Delete the rows of the oldest minutes before ``threshold``, about ``limit`` of
        #: them (whole minutes: a few more when the last minute has more rows).
        self.prune: Delete = delete(s).where(s.c.minute < minute, s.c.minute <= last)

    def activity(self, step: int, *, one_task: bool) -> Select[Any]:
        """The counts of the minutes from ``since`` to before ``until`` (bound, whole
        minutes since the epoch), summed over processes (and tasks, unless ``one_task``:
        then of the task bound as ``task``) by ``bucket``, the first minute of each
        ``step`` minutes, and outcome."""
        return _activity(self.stats, step, one_task)


@cache
def _activity(s: Table, step: int, one_task: bool) -> Select[Any]:
    # The step is one of a few constants, written into the statement (not bound), so that
    # GROUP BY repeats the SELECT's expression exactly.
    bucket = s.c.minute if step == 1 else s.c.minute - s.c.minute % literal_column(str(int(step)))
    query = select(
        bucket.label("bucket"),
        s.c.outcome,
        *(func.sum(s.c[name]).label(name) for name in STATS_COLUMNS),
    ).where(
        s.c.minute >= bindparam("since", type_=BigInteger()),
        s.c.minute < bindparam("until", type_=BigInteger()),
    )
    if one_task:
        query = query.where(s.c.task_name == bindparam("task"))
    return query.group_by(bucket, s.c.outcome).order_by(bucket)
