"""Every SQL statement the library runs, built with SQLAlchemy Core; no I/O here.

Statements are built once per table and database and cached. "Now" is always a bound
parameter, so tests can pin time and production binds the scheduler's clock.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    false,
    func,
    select,
    true,
    update,
)
from sqlalchemy.sql.expression import Executable

from sqla_scheduler._dialects import Backend, notify_channel
from sqla_scheduler.executions import ExecutionState

__all__ = ["Statements", "statements_for"]


class Statements:
    """The statements for one scheduler table on one kind of database."""

    def __init__(self, table: Table, backend: Backend) -> None:
        self.table = table
        self.backend = backend
        self.channel = notify_channel(table)
        c = table.c
        self.unpicked: ColumnElement[bool] = c.picked == false()
        self.picked: ColumnElement[bool] = c.picked == true()
        self._key = and_(
            c.task_name == bindparam("key_task"),
            c.task_instance == bindparam("key_instance"),
        )

        #: Insert executions, skipping (task_name, task_instance) pairs that exist; returns
        #: the task name and execution time of each row actually inserted. Run with a list
        #: of parameter sets and SQLAlchemy sends them as multi-row statements.
        self.insert: Executable = (
            backend.insert(table)
            .on_conflict_do_nothing(index_elements=[c.task_name, c.task_instance])
            .returning(c.task_name, c.execution_time)
        )

        #: Wake schedulers listening on this table's channel (PostgreSQL only).
        self.notify: Executable | None = (
            select(func.pg_notify(bindparam("channel"), bindparam("payload")))
            if backend.supports_notify
            else None
        )

        #: Remove an execution that no scheduler is running.
        self.cancel: Delete = delete(table).where(self._key, self.unpicked)

        #: Move an unpicked execution to a new time (payload untouched).
        self.reschedule: Update = (
            update(table)
            .where(self._key, self.unpicked)
            .values(
                execution_time=bindparam("new_time", type_=c.execution_time.type),
                version=c.version + 1,
            )
            .returning(c.execution_time)
        )
        #: Move an unpicked execution to a new time with a new payload.
        self.reschedule_with_data: Update = (
            update(table)
            .where(self._key, self.unpicked)
            .values(
                execution_time=bindparam("new_time", type_=c.execution_time.type),
                task_data=bindparam("new_data", type_=c.task_data.type),
                version=c.version + 1,
            )
            .returning(c.execution_time)
        )

        #: One execution by its key.
        self.get: Select[Any] = select(table).where(self._key)

    def list_executions(
        self,
        *,
        state: ExecutionState,
        task_name: str | None,
        known_tasks: frozenset[str],
        limit: int | None,
        offset: int,
    ) -> Select[Any]:
        """Executions in ``state`` (``due`` compares with the bound ``now``), in pick order."""
        c = self.table.c
        query = select(self.table)
        if state == "scheduled":
            query = query.where(self.unpicked)
        elif state == "due":
            query = query.where(
                self.unpicked, c.execution_time <= bindparam("now", type_=c.execution_time.type)
            )
        elif state == "running":
            query = query.where(self.picked)
        elif state == "failing":
            query = query.where(c.consecutive_failures > 0)
        elif state == "orphaned":
            query = query.where(c.task_name.not_in(sorted(known_tasks)))
        if task_name is not None:
            query = query.where(c.task_name == task_name)
        if state == "failing":
            query = query.order_by(c.last_failure.desc(), c.task_name, c.task_instance)
        else:
            query = query.order_by(
                c.priority.desc(), c.execution_time, c.task_name, c.task_instance
            )
        if limit is not None:
            query = query.limit(limit)
        if offset:
            query = query.offset(offset)
        return query


@cache
def statements_for(table: Table, backend: Backend) -> Statements:
    """The cached :class:`Statements` for ``table`` on ``backend``."""
    return Statements(table, backend)
