"""What the statement builders share: the table's predicates and bound-list shapes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    case,
    exists,
    false,
    func,
    literal,
    literal_column,
    true,
)

from sqla_scheduler._checks import EARLIEST, LATEST
from sqla_scheduler._dialects import Backend, notify_channel, sql_notice_of_later
from sqla_scheduler.models import BIGINT_MAX, INT_MAX, paused_table

__all__ = ["Shapes", "count_where"]

_JSON_COLUMNS = ("task_data", "trace_context")


def count_where(condition: ColumnElement[bool]) -> ColumnElement[int]:
    """How many rows ``condition`` holds for: ``count(*) FILTER (WHERE ...)`` as every
    database writes it (MariaDB has no FILTER)."""
    return func.count(case((condition, literal_column("1"))))


def held_columns(c: Any) -> tuple[Any, ...]:
    """The columns of a held execution's key: task, instance and the version held."""
    return (c.task_name, c.task_instance, c.version)


class Shapes:
    """One table on one kind of database, and the pieces its statements are built from.

    Every bound name a statement uses is documented where the statement is; these are the
    pieces more than one kind of statement needs.
    """

    def __init__(self, table: Table, backend: Backend) -> None:
        self.table = table
        self.backend = backend
        self.channel = notify_channel(table)
        #: The paused task names that go with ``table`` (see ``not_paused``).
        self.paused: Table = paused_table(table)
        c = table.c
        self.unpicked: ColumnElement[bool] = c.picked == false()
        self.picked: ColumnElement[bool] = c.picked == true()
        #: The failing executions: written with the 0 in the SQL, as the partial index
        #: ``ix_<table>_failing`` is, so that every database sees the index applies.
        self.failing: ColumnElement[bool] = c.consecutive_failures > literal(
            0, Integer, literal_execute=True
        )
        #: The execution at the bound key ``key_task``, ``key_instance``.
        self.at_key: ColumnElement[bool] = and_(
            c.task_name == bindparam("key_task"),
            c.task_instance == bindparam("key_instance"),
        )
        #: For each column that can hold a value no scheduler can load, the condition
        #: that this row's does not (``Backend.readable``).
        self.readable: dict[str, ColumnElement[bool]] = backend.readable(table, EARLIEST, LATEST)
        #: The row can be loaded: every statement that loads rows to act on or show them
        #: leaves the others out, so that one bad row affects itself alone.
        self.loadable: ColumnElement[bool] = and_(*self.readable.values())
        #: The columns as statements that load whole rows return them: the JSON ones as
        #: their text, parsed row by row (``_types.load_json``), so that JSON the
        #: database accepts and Python cannot load affects its own row alone.
        self.loaded_columns: list[ColumnElement[Any]] = [
            backend.json_text(col).label(col.name) if col.name in _JSON_COLUMNS else col
            for col in c
        ]

    def notice(self, task_name: ColumnElement[str], at: ColumnElement[Any]) -> ColumnElement[Any]:
        """The NOTIFY payload for an execution of ``task_name`` at ``at``, due or not by
        the bound ``now`` (``_dialects.sql_notice_of_later``)."""
        return sql_notice_of_later(task_name, at, self.time("now"))

    def next_version(self) -> ColumnElement[int]:
        """The version after the row's own: one more, or 1 after the column's largest value,
        so that no row's version can make a statement fail."""
        version = self.table.c.version
        return case((version >= BIGINT_MAX, 1), else_=version + 1)

    def counted_failure(self) -> ColumnElement[int]:
        """The row's failure count with one more failure, from 0 if it was negative and
        staying at the column's largest value once there."""
        failures = self.table.c.consecutive_failures
        return case((failures < 0, 1), (failures >= INT_MAX, INT_MAX), else_=failures + 1)

    def time(self, name: str) -> BindParameter[Any]:
        """A bound timestamp typed as the execution time is (``now``, ``threshold``)."""
        return bindparam(name, type_=self.table.c.execution_time.type)

    def one_of(self, column: ColumnElement[str], name: str) -> ColumnElement[bool]:
        """``column`` is one of the list of names bound as ``name`` (``Backend.one_of``)."""
        return self.backend.one_of(column, name, String())

    def not_paused(self, task_name: ColumnElement[str]) -> ColumnElement[bool]:
        """``task_name`` is not in the paused tasks' table (one probe of its key)."""
        paused = self.paused
        return ~exists().where(paused.c.task_name == task_name)

    def held_keys(self) -> tuple[ColumnElement[bool], ...]:
        """Rows whose (task, instance, version) is among the bound keys, bound as the
        backend binds them (``Backend.held_keys``; ``_store`` binds them each way)."""
        return self.backend.held_keys(held_columns(self.table.c))

    def insert_row(self, *, ignoring: bool = True) -> Any:
        """An INSERT of one execution, its values bound by column name; ``ignoring``, one
        that inserts nothing when an execution with its key exists."""
        c = self.table.c
        insert = self.backend.insert_ignoring if ignoring else self.backend.insert
        return insert(self.table).values(
            task_name=bindparam("task_name"),
            task_instance=bindparam("task_instance"),
            task_data=bindparam("task_data", type_=c.task_data.type),
            execution_time=self.time("execution_time"),
            priority=bindparam("priority"),
            schedule=bindparam("schedule"),
            trace_context=bindparam("trace_context", type_=c.trace_context.type),
            payload_version=bindparam("payload_version"),
        )
