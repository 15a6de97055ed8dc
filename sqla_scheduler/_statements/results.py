"""The kept results' statements: record final outcomes, read the newest one of an
execution that is not in the scheduler's table, and prune."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Delete, Insert, Select, Table, bindparam, delete, exists, insert, select

from sqla_scheduler._dialects import Backend, result_channel
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler.models import results_table

__all__ = ["Results"]


class Results(Shapes):
    """Statements on ``table``'s results table (``Shapes`` describes ``table`` itself)."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        r = results_table(table)
        self.results = r
        #: The channel ``Scheduler.wait`` listens on (PostgreSQL).
        self.result_channel = result_channel(table)
        #: Record final outcomes, each entry's values bound by column name.
        self.record: Insert = insert(r)
        at_key = (
            r.c.task_name == bindparam("key_task"),
            r.c.task_instance == bindparam("key_instance"),
        )
        #: The newest result at the bound key, unless an execution with that key is in the
        #: scheduler's table: it was scheduled again and has not finished.
        self.get: Select[Any] = (
            select(r.c.task_name, r.c.task_instance, r.c.outcome, r.c.value, r.c.error)
            .add_columns(r.c.finished_at)
            .where(*at_key, ~exists().where(self.at_key))
            .order_by(r.c.id.desc())
            .limit(1)
        )
        #: Delete up to ``limit`` results that finished before ``threshold``, oldest first
        #: (through a derived table: MariaDB refuses a LIMIT in an IN subquery).
        oldest = (
            select(r.c.id)
            .where(r.c.finished_at < bindparam("threshold", type_=r.c.finished_at.type))
            .order_by(r.c.finished_at)
            .limit(bindparam("limit"))
        )
        ids = select(oldest.subquery("oldest").c.id)
        self.prune: Delete = delete(r).where(r.c.id.in_(ids.scalar_subquery()))
