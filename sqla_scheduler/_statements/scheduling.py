"""The statements that put executions in the table and change them from outside a runner:
insert, cancel, reschedule, a recurring task's row, and the NOTIFY for listening schedulers."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Delete,
    Select,
    SmallInteger,
    String,
    Table,
    Text,
    Update,
    and_,
    bindparam,
    case,
    column,
    delete,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.sql.expression import Executable

from sqla_scheduler._dialects import Backend, Marking
from sqla_scheduler._dialects.operations import Notify, RowsFromJSON
from sqla_scheduler._execution import WAITING
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler._types import PayloadJSON

__all__ = ["JSON_ROW", "Scheduling"]

#: The columns of ``Scheduling.insert_rows``' rows, in order.
JSON_ROW = (
    "task_name",
    "task_instance",
    "task_data",
    "execution_time",
    "priority",
    "schedule",
    "trace_context",
    "payload_version",
)


class Scheduling(Shapes):
    """Writes on behalf of the application (``Scheduler.schedule``, ``cancel`` and the
    rest) and of the admin page, plus the recurring tasks' rows a runner registers."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        c = table.c

        inserted = (c.task_name, c.execution_time)
        #: Insert executions, skipping (task_name, task_instance) pairs that exist; returns
        #: the task name and execution time of each row actually inserted where
        #: ``Backend.inserts_return`` (else its row count counts them). Run with a list of
        #: parameter sets and SQLAlchemy sends them as multi-row statements.
        self.insert: Executable = backend.returning_inserted(
            backend.insert_ignoring(table), *inserted
        )
        #: Many executions in one statement (PostgreSQL; see ``_insert_many``).
        self.insert_many: Executable | None = None
        if backend.rows_from_json is not None and backend.notify is not None:
            self.insert_many = self._insert_many(backend.rows_from_json, backend.notify)
        #: Many executions in one statement, from the JSON array ``rows`` of one array per
        #: execution, its values in ``JSON_ROW`` order, the payload and the trace context
        #: as their JSON text (MariaDB, ``Backend.json_rows``); returns what ``insert``
        #: does. One statement text whatever the batch size, and one parameter where an
        #: INSERT of many rows binds eight per row.
        self.insert_rows: Executable | None = None
        if backend.json_rows is not None:
            new = backend.json_rows("rows", [c[name] for name in JSON_ROW])
            self.insert_rows = backend.returning_inserted(
                backend.insert_ignoring(table).from_select(
                    list(JSON_ROW), select(*(new.c[name] for name in JSON_ROW))
                ),
                *inserted,
            )

        #: One execution inserted and its NOTIFY sent (see ``Shapes.notice``), in one
        #: statement (PostgreSQL; saves a round trip on the hot path of
        #: ``Scheduler.schedule``); returns the NOTIFY and the time of each row inserted.
        self.insert_one: Executable | None = None
        #: Wake schedulers listening on this table's channel (PostgreSQL only).
        self.notify: Executable | None = None
        if backend.notify is not None:
            one = self.insert_row().returning(c.task_name, c.execution_time).cte("inserted")
            notice = self.notice(one.c.task_name, one.c.execution_time)
            # a row per inserted execution: its NOTIFY and its time
            self.insert_one = select(
                backend.notify(bindparam("channel"), notice), one.c.execution_time
            )
            self.notify = select(backend.notify(bindparam("channel"), bindparam("payload")))

        #: One execution by its key, if it can be loaded.
        self.get: Select[Any] = select(*self.loaded_columns).where(self.at_key, self.loadable)

        # Built once for each way ``cancel``, ``request_stop`` and ``reschedule`` are asked for.
        self._cancels = {shown: self._build_cancel(shown=shown) for shown in (False, True)}
        self._stops = {shown: self._build_stop_request(shown=shown) for shown in (False, True)}
        self._reschedules = {
            (new_data, new_schedule, shown): self._build_reschedule(
                new_data=new_data, new_schedule=new_schedule, shown=shown
            )
            for new_data in (False, True)
            for new_schedule in (False, True)
            for shown in (False, True)
        }

        def overwrite(excluded: Any) -> dict[str, Any]:
            # the time first: it compares the schedule before it is overwritten (MariaDB
            # assigns in order, each value seeing those before it)
            return {
                "execution_time": case(
                    (
                        and_(
                            bindparam("deterministic", type_=Boolean()),
                            c.schedule.is_distinct_from(excluded.schedule),
                        ),
                        excluded.execution_time,
                    ),
                    else_=c.execution_time,
                ),
                "priority": excluded.priority,
                "schedule": excluded.schedule,
                "version": self.next_version(),
            }

        #: Create a recurring task's row, or update the priority and schedule of an
        #: unpicked one; its time moves only when a deterministic schedule changed. Its
        #: payload (and so the version it was written with) stays.
        self.upsert_recurring: Executable = backend.upsert(
            self.insert_row(ignoring=False), overwrite, self.unpicked
        )

    def cancel(self, *, shown: bool) -> Delete:
        """Remove an execution that no scheduler is running (``key_task``,
        ``key_instance``); if ``shown``, only while it is still at ``shown_version``."""
        return self._cancels[shown]

    def request_stop(self, *, shown: bool) -> Update:
        """Ask the scheduler running the execution at the bound key (``key_task``,
        ``key_instance``) to stop it: its ``stop_requested_at`` becomes ``now``, unless a
        stop was requested already (that time stays); if ``shown``, only while it is still
        at ``shown_version`` and not asked already (as the page showed it). Its version
        stays: the holder's heartbeats and its outcome (``cancelled``) still apply."""
        return self._stops[shown]

    def reschedule(self, *, new_data: bool, new_schedule: bool = False, shown: bool) -> Marking:
        """Move an unpicked execution to ``new_time``, with the payload ``new_data``
        written at ``new_payload_version`` if ``new_data``, and the schedule text
        ``new_schedule`` if ``new_schedule`` (else untouched); if ``shown``, only while it
        is still at ``shown_version``. Returns the new time of the execution moved."""
        return self._reschedules[new_data, new_schedule, shown]

    def _insert_many(self, rows_from_json: RowsFromJSON, notify: Notify) -> Executable:
        """Many executions in one statement with one JSON parameter ``rows`` (written as
        payloads are, see ``PayloadJSON``) that the server turns into rows: one statement
        text whatever the batch size, so it is parsed once, and far less to encode than a
        parameter per value. A key missing from a row's object is NULL. Returns one row:
        how many were inserted, how many NOTIFYs went out (one per task name among them,
        for its earliest time: see ``Shapes.notice``) and the earliest time inserted."""
        c = self.table.c
        columns = [
            column("task_name", String()),
            column("task_instance", String()),
            column("task_data", PayloadJSON()),
            column("execution_time", DateTime(timezone=True)),
            column("priority", SmallInteger()),
            column("schedule", Text()),
            column("trace_context", PayloadJSON()),
            column("payload_version", SmallInteger()),
        ]
        new = rows_from_json(bindparam("rows", type_=PayloadJSON()), columns, "new")
        inserted = (
            self.backend.insert_ignoring(self.table)
            .from_select([col.name for col in new.c], select(new))
            .returning(c.task_name, c.execution_time)
            .cte("inserted")
        )
        per_task = (
            select(inserted.c.task_name, func.min(inserted.c.execution_time).label("at"))
            .group_by(inserted.c.task_name)
            .subquery("per_task")
        )
        notice = self.notice(per_task.c.task_name, per_task.c.at)
        notified = func.count(notify(bindparam("channel"), notice))
        return select(
            select(func.count()).select_from(inserted).scalar_subquery(),
            select(notified).scalar_subquery(),
            select(func.min(inserted.c.execution_time)).scalar_subquery(),
        )

    def _unpicked_at_key(self, *, shown: bool) -> tuple[Any, ...]:
        """The unpicked execution at the bound key, and at ``shown_version`` if ``shown``
        (what the admin page checks: the row is as the operator saw it)."""
        where = (self.at_key, self.unpicked)
        if shown:
            return (*where, self.table.c.version == bindparam("shown_version"))
        return where

    def _build_cancel(self, *, shown: bool) -> Delete:
        return delete(self.table).where(*self._unpicked_at_key(shown=shown))

    def _build_stop_request(self, *, shown: bool) -> Update:
        c = self.table.c
        where = [self.at_key, self.picked]
        if shown:
            where += [c.version == bindparam("shown_version"), c.stop_requested_at.is_(None)]
        requested = func.coalesce(c.stop_requested_at, self.time("now"))
        return update(self.table).where(*where).values(stop_requested_at=requested)

    def _build_reschedule(self, *, new_data: bool, new_schedule: bool, shown: bool) -> Marking:
        c = self.table.c
        values: dict[str, Any] = {
            "execution_time": self.time("new_time"),
            "version": self.next_version(),
        }
        if new_data:
            values["task_data"] = bindparam("new_data", type_=c.task_data.type)
            values["payload_version"] = bindparam("new_payload_version", type_=SmallInteger())
        if new_schedule:
            values["schedule"] = bindparam("new_schedule", type_=c.schedule.type)
        # a group's callback waits for its members: it is not moved ahead of them
        not_waiting = c.execution_time < literal(WAITING, c.execution_time.type)
        return self.backend.change(
            self.table,
            where=(*self._unpicked_at_key(shown=shown), not_waiting),
            values=values,
            returning=(c.execution_time,),
        )
