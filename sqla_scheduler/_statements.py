"""Every SQL statement the library runs, built with SQLAlchemy Core; no I/O here.

Statements are built once per table and database and cached. "Now" is always a bound
parameter, so tests can pin time and production binds the scheduler's clock.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    DateTime,
    Delete,
    Select,
    SmallInteger,
    String,
    Table,
    Text,
    Update,
    and_,
    any_,
    bindparam,
    case,
    column,
    delete,
    false,
    func,
    literal_column,
    not_,
    select,
    true,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.sql.expression import Executable

from sqla_scheduler._dialects import Backend, notify_channel
from sqla_scheduler._execution import ExecutionState

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

        #: Many executions in one statement with one JSON parameter that the server turns
        #: into rows (PostgreSQL): one statement text whatever the batch size, so it is
        #: parsed once, and far less to encode than a parameter per value. A key missing
        #: from a row's object is NULL. Returns one row: how many were inserted, and how
        #: many NOTIFYs went out (one per task name with a due execution among them).
        self.insert_many: Executable | None = None
        if backend.name == "postgresql":
            new = (
                func.jsonb_to_recordset(bindparam("rows", type_=JSONB()))
                .table_valued(
                    column("task_name", String()),
                    column("task_instance", String()),
                    column("task_data", JSONB()),
                    column("execution_time", DateTime(timezone=True)),
                    column("priority", SmallInteger()),
                    column("schedule", Text()),
                    column("trace_context", JSONB()),
                    name="new",
                )
                .render_derived(with_types=True)
            )
            inserted_many = (
                backend.insert(table)
                .from_select([col.name for col in new.c], select(new))
                .on_conflict_do_nothing(index_elements=[c.task_name, c.task_instance])
                .returning(c.task_name, c.execution_time)
                .cte("inserted")
            )
            due_names = (
                select(inserted_many.c.task_name)
                .where(
                    inserted_many.c.execution_time <= bindparam("now", type_=c.execution_time.type)
                )
                .distinct()
                .subquery("due")
            )
            self.insert_many = select(
                select(func.count()).select_from(inserted_many).scalar_subquery(),
                select(
                    func.count(func.pg_notify(bindparam("channel"), due_names.c.task_name))
                ).scalar_subquery(),
            )

        #: One execution inserted and, when it is due, a NOTIFY sent, in one statement
        #: (PostgreSQL; saves a round trip on the hot path of ``Scheduler.schedule``).
        self.insert_one: Executable | None = None
        if backend.supports_notify:
            inserted = (
                self._insert_row()
                .on_conflict_do_nothing(index_elements=[c.task_name, c.task_instance])
                .returning(c.task_name, c.execution_time)
                .cte("inserted")
            )
            wake = case(
                (
                    inserted.c.execution_time <= bindparam("now", type_=c.execution_time.type),
                    func.pg_notify(bindparam("channel"), inserted.c.task_name),
                ),
            )
            self.insert_one = select(wake)  # a row per inserted execution

        #: Wake schedulers listening on this table's channel (PostgreSQL only).
        self.notify: Executable | None = (
            select(func.pg_notify(bindparam("channel"), bindparam("payload")))
            if backend.supports_notify
            else None
        )

        # Built once for each way ``cancel`` and ``reschedule`` are asked for.
        self._cancels = {shown: self._build_cancel(shown=shown) for shown in (False, True)}
        self._reschedules = {
            (new_data, shown): self._build_reschedule(new_data=new_data, shown=shown)
            for new_data in (False, True)
            for shown in (False, True)
        }

        #: One execution by its key.
        self.get: Select[Any] = select(table).where(self._key)

        # --- the admin page's statements: counts (its actions are ``cancel`` and
        # ``reschedule`` checked against the version the operator was shown)

        registered = self._one_of(c.task_name, "names")
        due_now = and_(
            self.unpicked, c.execution_time <= bindparam("now", type_=c.execution_time.type)
        )
        per_state = (
            func.count().label("all"),
            func.count().filter(self.unpicked).label("scheduled"),
            func.count().filter(due_now).label("due"),
            func.count().filter(self.picked).label("running"),
            func.count().filter(c.consecutive_failures > 0).label("failing"),
        )
        #: How many executions are in each state (``names`` are the registered tasks, the
        #: rest are orphaned), in one pass over the table.
        self.state_counts: Executable = select(
            *per_state, func.count().filter(not_(registered)).label("orphaned")
        )
        #: The same counts for each registered task (``names``) that has rows.
        self.task_counts: Executable = (
            select(c.task_name, *per_state).where(registered).group_by(c.task_name)
        )
        #: The rows of the recurring tasks ``names`` (each has one, ``recurring``).
        self.recurring: Select[Any] = select(table).where(
            c.task_instance == bindparam("instance"), registered
        )

        # --- the runner's statements; every one that changes a row checks and bumps version

        now = bindparam("now", type_=c.execution_time.type)
        version_matches = c.version == bindparam("seen_version")
        row: ColumnElement[Any] = literal_column(backend.row_locator)
        due = (
            select(row)
            .where(
                self.unpicked,
                c.execution_time <= now,
                self._one_of(c.task_name, "names"),
            )
            .order_by(c.priority.desc(), c.execution_time)
            .limit(bindparam("limit"))
            .with_for_update(skip_locked=True)
        )
        #: Pick up to ``limit`` due executions of ``names`` in priority order and mark them
        #: picked by ``picker``, in one statement. Rows other schedulers hold locked are
        #: skipped, not waited for (PostgreSQL). Returns the picked rows, in no order.
        #:
        #: The due rows are found by their physical address (``ctid``, SQLite's ``rowid``),
        #: stable while the statement holds their locks, so that updating them is a direct
        #: fetch per row rather than a join with the table (which PostgreSQL may plan as a
        #: scan of every row).
        self.pick: Update = (
            update(table)
            .where(self._locator_in(row, due))
            .values(
                picked=True,
                picked_by=bindparam("picker"),
                last_heartbeat=now,
                started_at=None,
                version=c.version + 1,
            )
            .returning(*table.c)
        )

        #: Mark held executions as started, just before their handlers run (see ``_stamp``).
        self.mark_started: Update = self._stamp("started_at")
        #: Refresh the heartbeat of held executions (see ``_stamp``).
        self.heartbeat: Update = self._stamp("last_heartbeat")

        #: Remove a held execution (success of a one-time task, abandon, undecodable row).
        self.remove: Delete = delete(table).where(self._key, version_matches)
        #: Remove held executions ``keys`` (task, instance, version); returns those removed.
        self.remove_many: Executable = (
            delete(table).where(*self._held_keys()).returning(c.task_name, c.task_instance)
        )

        new_time = bindparam("new_time", type_=c.execution_time.type)
        #: Hand back a held execution to run at ``new_time`` after a success.
        self.succeed: Update = self._hand_back(
            execution_time=new_time,
            task_data=bindparam("new_data", type_=c.task_data.type),
            last_success=now,
            consecutive_failures=0,
        )
        #: Hand back a held execution to retry at ``new_time`` after a failure.
        self.fail: Update = self._hand_back(
            execution_time=new_time,
            last_failure=now,
            consecutive_failures=bindparam("failures"),
        )
        #: Hand back a held execution untouched, due as before (a stopping scheduler).
        self.release: Update = self._hand_back()

        #: Dead executions: picked, with a heartbeat older than ``threshold``.
        is_dead = and_(self.picked, c.last_heartbeat < bindparam("threshold", type_=now.type))
        revived = {
            "picked": False,
            "picked_by": None,
            "last_heartbeat": None,
            "execution_time": now,
            "last_failure": now,
            # only a started handler's lost attempt counts; a queued one just goes back
            "consecutive_failures": c.consecutive_failures
            + case((c.started_at.is_not(None), 1), else_=0),
            "started_at": None,
            "version": c.version + 1,
        }
        #: Return dead executions to due now, counting a started one's lost attempt as a
        #: failure, in one statement. Returns the rows as they were found: who had picked
        #: them and when they last beat. ``None`` where RETURNING cannot see the rows as
        #: found (SQLite): there, ``find_dead`` then ``revive_found`` do it in two.
        self.revive: Update | None = None
        if backend.returning_sees_from:
            dead = (
                select(c.task_name, c.task_instance, c.picked_by, c.last_heartbeat)
                .where(is_dead)
                .with_for_update(skip_locked=True)
                .cte("dead")
            )
            found = {
                "picked": true(),
                "picked_by": dead.c.picked_by,
                "last_heartbeat": dead.c.last_heartbeat,
            }
            self.revive = (
                update(table)
                .where(c.task_name == dead.c.task_name, c.task_instance == dead.c.task_instance)
                .values(revived)
                .returning(
                    *(
                        found[col.name].label(col.name) if col.name in found else col
                        for col in table.c
                    )
                )
            )
        #: The dead executions' keys (task, instance, version), picker and last heartbeat.
        self.find_dead: Select[Any] = select(
            c.task_name, c.task_instance, c.version, c.picked_by, c.last_heartbeat
        ).where(is_dead)
        #: Revive the dead executions ``keys`` (task, instance, version) found by
        #: ``find_dead``, if they are still dead; returns them as revived.
        self.revive_found: Update = (
            update(table).where(is_dead, *self._held_keys()).values(revived).returning(*table.c)
        )

        #: Delete unpicked rows of task names not in ``names`` due before ``threshold``.
        self.delete_orphans: Executable = (
            delete(table)
            .where(
                self.unpicked,
                c.task_name.not_in(bindparam("names", expanding=True)),
                c.execution_time < bindparam("threshold", type_=now.type),
            )
            .returning(c.task_name, c.task_instance, c.task_data)
        )

        excluded = backend.insert(table).excluded
        #: Create a recurring task's row, or update the priority and schedule of an
        #: unpicked one; its time moves only when a deterministic schedule changed.
        self.upsert_recurring: Executable = self._insert_row().on_conflict_do_update(
            index_elements=[c.task_name, c.task_instance],
            set_={
                "priority": excluded.priority,
                "schedule": excluded.schedule,
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
                "version": c.version + 1,
            },
            where=self.unpicked,
        )

    def cancel(self, *, shown: bool) -> Delete:
        """Remove an execution that no scheduler is running (``key_task``,
        ``key_instance``); if ``shown``, only while it is still at ``shown_version``."""
        return self._cancels[shown]

    def reschedule(self, *, new_data: bool, shown: bool) -> Update:
        """Move an unpicked execution to ``new_time``, with the payload ``new_data`` if
        ``new_data`` (else untouched); if ``shown``, only while it is still at
        ``shown_version``. Returns the new time of the execution moved."""
        return self._reschedules[new_data, shown]

    def _unpicked_at_key(self, *, shown: bool) -> tuple[ColumnElement[bool], ...]:
        """The unpicked execution at the bound key, and at ``shown_version`` if ``shown``
        (what the admin page checks: the row is as the operator saw it)."""
        where = (self._key, self.unpicked)
        if shown:
            return (*where, self.table.c.version == bindparam("shown_version"))
        return where

    def _build_cancel(self, *, shown: bool) -> Delete:
        return delete(self.table).where(*self._unpicked_at_key(shown=shown))

    def _build_reschedule(self, *, new_data: bool, shown: bool) -> Update:
        c = self.table.c
        values: dict[str, Any] = {
            "execution_time": bindparam("new_time", type_=c.execution_time.type),
            "version": c.version + 1,
        }
        if new_data:
            values["task_data"] = bindparam("new_data", type_=c.task_data.type)
        return (
            update(self.table)
            .where(*self._unpicked_at_key(shown=shown))
            .values(values)
            .returning(c.execution_time)
        )

    def _stamp(self, column: str) -> Update:
        """Set ``column`` to ``now`` on the held executions ``keys`` (task, instance,
        version); returns the keys of those still held.

        The version is checked and not bumped: neither a heartbeat nor the start of a
        handler changes state another writer could be deciding on.
        """
        c = self.table.c
        return (
            update(self.table)
            .where(self.picked, *self._held_keys())
            .values({column: bindparam("now", type_=c.execution_time.type)})
            .returning(c.task_name, c.task_instance)
        )

    def _hand_back(self, **values: Any) -> Update:
        """Unpick a held execution (still at the version seen), setting ``values`` too."""
        c = self.table.c
        return (
            update(self.table)
            .where(self._key, c.version == bindparam("seen_version"))
            .values(
                picked=False,
                picked_by=None,
                last_heartbeat=None,
                started_at=None,
                version=c.version + 1,
                **values,
            )
        )

    def _insert_row(self) -> Any:
        """An INSERT of one execution, its values bound by column name."""
        c = self.table.c
        return self.backend.insert(self.table).values(
            task_name=bindparam("task_name"),
            task_instance=bindparam("task_instance"),
            task_data=bindparam("task_data", type_=c.task_data.type),
            execution_time=bindparam("execution_time", type_=c.execution_time.type),
            priority=bindparam("priority"),
            schedule=bindparam("schedule"),
            trace_context=bindparam("trace_context", type_=c.trace_context.type),
        )

    def _locator_in(self, row: ColumnElement[Any], rows: Select[Any]) -> ColumnElement[bool]:
        """``row`` is among the row locators that ``rows`` selects.

        PostgreSQL gets ``ctid = ANY(ARRAY(subquery))``: the subquery runs once and each
        address is a TID scan; ``IN (subquery)`` may become a join.
        """
        if self.backend.name == "postgresql":
            return row == any_(func.array(rows.scalar_subquery()))
        return row.in_(rows.scalar_subquery())

    def _one_of(self, column: ColumnElement[str], name: str) -> ColumnElement[bool]:
        """``column`` is one of the list bound as ``name``.

        PostgreSQL gets ``= ANY(array)``, one statement text whatever the list's length
        (so it can be prepared); elsewhere an expanding ``IN``.
        """
        if self.backend.name == "postgresql":
            return column == any_(bindparam(name, type_=ARRAY(String())))
        return column.in_(bindparam(name, expanding=True))

    def _held_keys(self) -> tuple[ColumnElement[bool], ...]:
        """Rows whose (task, instance, version) is in the bound lists ``names``,
        ``instances`` and ``versions`` (parallel lists, one entry per held execution)."""
        c = self.table.c
        if self.backend.name == "postgresql":
            keys = (
                func.unnest(
                    bindparam("names", type_=ARRAY(String())),
                    bindparam("instances", type_=ARRAY(String())),
                    bindparam("versions", type_=ARRAY(BigInteger())),
                )
                .table_valued("name", "instance", "version", name="held")
                .render_derived()
            )
            return (
                c.task_name == keys.c.name,
                c.task_instance == keys.c.instance,
                c.version == keys.c.version,
            )
        return (
            tuple_(c.task_name, c.task_instance, c.version).in_(bindparam("keys", expanding=True)),
        )

    def _filters(
        self,
        *,
        state: ExecutionState,
        task_name: str | None,
        instance_contains: str | None,
        known_tasks: frozenset[str],
    ) -> list[ColumnElement[bool]]:
        """The WHERE clauses of a listing (``due`` compares with the bound ``now``)."""
        c = self.table.c
        where: list[ColumnElement[bool]] = []
        if state == "scheduled":
            where.append(self.unpicked)
        elif state == "due":
            where += [
                self.unpicked,
                c.execution_time <= bindparam("now", type_=c.execution_time.type),
            ]
        elif state == "running":
            where.append(self.picked)
        elif state == "failing":
            where.append(c.consecutive_failures > 0)
        elif state == "orphaned":
            where.append(c.task_name.not_in(sorted(known_tasks)))
        if task_name is not None:
            where.append(c.task_name == task_name)
        if instance_contains:
            # A bound pattern with LIKE's wildcards escaped: the text matches as written.
            where.append(c.task_instance.contains(instance_contains, autoescape=True))
        return where

    def list_executions(
        self,
        *,
        state: ExecutionState,
        task_name: str | None,
        known_tasks: frozenset[str],
        limit: int | None,
        offset: int,
        instance_contains: str | None = None,
    ) -> Select[Any]:
        """Executions in ``state`` (``due`` compares with the bound ``now``), in pick order.

        ``instance_contains`` keeps the executions whose instance id contains that text.
        """
        c = self.table.c
        query = select(self.table).where(
            *self._filters(
                state=state,
                task_name=task_name,
                instance_contains=instance_contains,
                known_tasks=known_tasks,
            )
        )
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

    def count_executions(
        self,
        *,
        state: ExecutionState,
        task_name: str | None,
        instance_contains: str | None,
        known_tasks: frozenset[str],
    ) -> Select[Any]:
        """How many executions ``list_executions`` would list without a limit."""
        return (
            select(func.count())
            .select_from(self.table)
            .where(
                *self._filters(
                    state=state,
                    task_name=task_name,
                    instance_contains=instance_contains,
                    known_tasks=known_tasks,
                )
            )
        )


@cache
def statements_for(table: Table, backend: Backend) -> Statements:
    """The cached ``Statements`` for ``table`` on ``backend``."""
    return Statements(table, backend)
