"""The runner's statements: pick, start, beat, write a handler's progress, read the stop
requests, hand back (after a success, a failure or a snooze) or remove, revive the dead,
and delete orphans. Every one that changes a row's state checks and bumps its version; a
hand-back and a revival clear the progress, and a hand-back of an execution whose stop was
requested makes it due now (its next pick records it cancelled)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Delete,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.sql.expression import Executable

from sqla_scheduler._dialects import Backend, Due, Marking
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler.models import record_table

__all__ = ["Running"]

#: What a hand-back and a revival set: the next run starts with no progress reported.
_NO_PROGRESS: dict[str, Any] = {"progress": None, "progress_message": None, "progress_at": None}


class Running(Shapes):
    """What a runner's services run against the table; ``now`` is always bound."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        c = table.c
        now = self.time("now")
        seen = c.version == bindparam("seen_version")

        #: Pick up to ``limit`` due executions of ``names`` for ``picker``, none of a
        #: paused task (see ``_pick``).
        self.pick: Marking = self._pick()
        #: Wait for the turn of the bound ``lock_key`` (one task's), so that picks of a task
        #: with ``max_concurrency`` take turns and each counts what the others picked
        #: (``Backend.task_lock``). ``None`` on SQLite, whose writers take turns.
        self.lock_task: Executable | None = backend.lock_task(record_table(table))
        #: How many executions of the task ``name`` are picked (running or waiting).
        self.count_picked: Select[Any] = select(func.count()).where(
            c.task_name == bindparam("name"), self.picked
        )
        #: The earliest execution time after ``now`` among unpicked rows of ``names`` that
        #: can be loaded: what the picker waits for between picks (see ``_next_due``).
        self.next_due: Select[Any] = self._next_due()
        #: Mark held executions as started, just before their handlers run (see ``_stamp``).
        self.mark_started: Marking = self._stamp("started_at")
        #: Refresh the heartbeat of held executions (see ``_stamp``).
        self.heartbeat: Marking = self._stamp("last_heartbeat")
        #: Write the latest progress its handler reported (``new_progress``,
        #: ``new_message``) to a held execution still at the version seen, with ``now`` as
        #: its time. Like a heartbeat, it checks the version and does not bump it.
        self.report_progress: Update = (
            update(table)
            .where(self.at_key, seen, self.picked)
            .values(
                progress=bindparam("new_progress", type_=c.progress.type),
                progress_message=bindparam("new_message", type_=c.progress_message.type),
                progress_at=now,
            )
        )

        #: The keys (task, instance, version) of the executions picked by ``picker`` whose
        #: stop ``cancel`` requested: a read of the picked rows' index (``ix_<table>_picked``).
        self.stop_requests: Select[Any] = select(c.task_name, c.task_instance, c.version).where(
            self.picked, c.picked_by == bindparam("picker"), c.stop_requested_at.is_not(None)
        )

        #: Remove a held execution (success of a one-time task, abandon, undecodable row).
        self.remove: Delete = delete(table).where(self.at_key, seen)
        #: Remove held executions ``keys`` (task, instance, version); returns those removed.
        self.remove_many: Marking = backend.removal(table, where=self.held_keys(), joins_keys=True)

        #: Hand back a held execution to run at ``new_time`` after a success, with the
        #: payload ``new_data`` written at ``new_payload_version``.
        self.succeed: Update = self._hand_back(
            execution_time=self.time("new_time"),
            task_data=bindparam("new_data", type_=c.task_data.type),
            payload_version=bindparam("new_payload_version", type_=c.payload_version.type),
            last_success=now,
            consecutive_failures=0,
            last_error=None,
            snoozes=0,
        )
        #: Hand back a held execution to retry at ``new_time`` after a failure, keeping
        #: its error text ``new_error``.
        self.fail: Update = self._hand_back(
            execution_time=self.time("new_time"),
            last_failure=now,
            consecutive_failures=bindparam("failures"),
            last_error=bindparam("new_error", type_=c.last_error.type),
        )
        #: Hand back a held execution to run again at ``new_time`` after a snooze, with
        #: ``new_snoozes`` counted; its payload, failures and error stay.
        self.snooze: Update = self._hand_back(
            execution_time=self.time("new_time"), snoozes=bindparam("new_snoozes")
        )
        #: Hand back a held execution untouched, due as before (a stopping scheduler).
        self.release: Update = self._hand_back()

        #: Dead executions: picked, with a heartbeat older than ``threshold``.
        #: (No heartbeat at all counts as a stale one: the pick always sets one.)
        is_dead = and_(
            self.picked,
            or_(c.last_heartbeat < self.time("threshold"), c.last_heartbeat.is_(None)),
            self.loadable,
        )
        revived = {
            "picked": False,
            "picked_by": None,
            "last_heartbeat": None,
            "execution_time": now,
            "last_failure": now,
            # only a started handler's lost attempt counts; a queued one just goes back
            "consecutive_failures": case(
                (c.started_at.is_not(None), self.counted_failure()),
                (c.consecutive_failures < 0, 0),
                else_=c.consecutive_failures,
            ),
            "started_at": None,
            **_NO_PROGRESS,
            "version": self.next_version(),
        }
        #: Return dead executions to due now, counting a started one's lost attempt as a
        #: failure, in one statement (see ``_revive``). ``None`` where RETURNING cannot see
        #: the rows as found (SQLite): there, ``find_dead`` then ``revive_found`` do it.
        self.revive: Update | None = (
            self._revive(is_dead, revived) if backend.returning_sees_from else None
        )
        #: The dead executions' keys (task, instance, version), picker, last heartbeat and
        #: start.
        self.find_dead: Select[Any] = select(
            c.task_name, c.task_instance, c.version, c.picked_by, c.last_heartbeat, c.started_at
        ).where(is_dead)
        #: Revive the dead executions ``keys`` (task, instance, version) found by
        #: ``find_dead``, if they are still dead; returns them as revived.
        self.revive_found: Marking = backend.change(
            table,
            where=(is_dead, *self.held_keys()),
            values=revived,
            returning=self.loaded_columns,
        )

        #: Rows that cannot be loaded among those a pick or revival would act on (due or
        #: picked), at most ``limit``: their keys and, for each check in ``readable``,
        #: whether the row passes it (``ok_<column>``).
        self.find_unreadable: Executable = _find_unreadable(self)

        #: Delete unpicked rows of task names not in ``names`` due before ``threshold``;
        #: returns their task names, instances and payloads.
        self.delete_orphans: Marking = backend.removal(
            table,
            where=(
                self.unpicked,
                c.task_name.not_in(bindparam("names", expanding=True)),
                c.execution_time < self.time("threshold"),
                self.loadable,
            ),
            returning=(c.task_name, c.task_instance, c.task_data),
        )

    def _pick(self) -> Marking:
        """Pick up to ``limit`` due executions of ``names`` in priority order and mark them
        picked by ``picker``, in one statement. Rows other schedulers hold locked are
        skipped, not waited for (PostgreSQL). Returns the picked rows, in no order.

        The due rows are found by their physical address (``ctid``, SQLite's ``rowid``),
        stable while the statement holds their locks, so that updating them is a direct
        fetch per row rather than a join with the table (which PostgreSQL may plan as a
        scan of every row).

        The due rows are found as the backend walks the due index (``Backend.due_rows``:
        on PostgreSQL one range for each task and priority, up to ``limit`` rows of each
        locked and the first ``limit`` of them in priority order picked).

        On MariaDB (no ``UPDATE ... RETURNING``) the due rows are locked by their key, then
        marked (``Marking``).
        """
        c = self.table.c
        now = self.time("now")
        address = self.backend.address(self.table)
        due_of = (self.unpicked, c.execution_time <= now, self.loadable)
        due = self.backend.due_rows(self._due(), due_of, address, bindparam("limit"))
        picked = {
            "picked": True,
            "picked_by": bindparam("picker"),
            "last_heartbeat": now,
            "started_at": None,
            **_NO_PROGRESS,
            "version": self.next_version(),
        }
        return self.backend.mark_found(
            self.table, due, values=picked, returning=self.loaded_columns
        )

    def _next_due(self) -> Select[Any]:
        """``next_due``, as the backend walks the due index (``Backend.next_due``: on
        PostgreSQL the first future row of each task and priority, one probe each)."""
        c = self.table.c
        later = (self.unpicked, c.execution_time > self.time("now"), self.loadable)
        return self.backend.next_due(self._due(), later)

    def _due(self) -> Due:
        """The rows a pick or the next due time walks: unpicked, of the bound ``names``,
        not paused."""
        return Due(
            self.table, self.one_of(self.table.c.task_name, "names"), self.not_paused, self.unpicked
        )

    def _revive(self, is_dead: Any, revived: dict[str, Any]) -> Update:
        """``revived`` applied to the rows ``is_dead`` (skipping those another scheduler
        holds locked), returning the rows as they were found: who had picked them, when
        they last beat and when their handlers started, which the revived values clear."""
        c = self.table.c
        dead = (
            select(c.task_name, c.task_instance, c.picked_by, c.last_heartbeat, c.started_at)
            .where(is_dead)
            .with_for_update(skip_locked=True)
            .cte("dead")
        )
        found = {
            "picked": true(),
            "picked_by": dead.c.picked_by,
            "last_heartbeat": dead.c.last_heartbeat,
            "started_at": dead.c.started_at,
        }
        return (
            update(self.table)
            .where(c.task_name == dead.c.task_name, c.task_instance == dead.c.task_instance)
            .values(revived)
            .returning(
                *(
                    found[col.name].label(col.name) if col.name in found else col
                    for col in self.loaded_columns
                )
            )
        )

    def _stamp(self, column: str) -> Marking:
        """Set ``column`` to ``now`` on the held executions ``keys`` (task, instance,
        version); returns the keys of those still held.

        The version is checked and not bumped: neither a heartbeat nor the start of a
        handler changes state another writer could be deciding on. On PostgreSQL the
        transaction commits without waiting for the disk (``Backend.commit_without_waiting``):
        a stamp lost to a server crash only makes the row look a beat older, and the
        start record of an execution that failed before is on the way to its handler.
        """
        c = self.table.c
        return self.backend.change(
            self.table,
            where=(self.picked, *self.held_keys(), *self.backend.commit_without_waiting()),
            values={column: self.time("now")},
            returning=(c.task_name, c.task_instance),
        )

    def _hand_back(self, **values: Any) -> Update:
        """Unpick a held execution (still at the version seen), setting ``values`` too; one
        whose stop was requested meanwhile (its handler finished first) is due ``now``,
        for its next pick to record it cancelled."""
        c = self.table.c
        values["execution_time"] = case(
            (c.stop_requested_at.is_not(None), self.time("now")),
            else_=values.get("execution_time", c.execution_time),
        )
        return (
            update(self.table)
            .where(self.at_key, c.version == bindparam("seen_version"))
            .values(
                picked=False,
                picked_by=None,
                last_heartbeat=None,
                started_at=None,
                version=self.next_version(),
                **_NO_PROGRESS,
                **values,
            )
        )


def _find_unreadable(shapes: Shapes) -> Executable:
    """Rows that cannot be loaded among those a pick or revival would act on (see
    ``Running.find_unreadable``)."""
    c = shapes.table.c
    columns: list[Any] = [c.task_name, c.task_instance]
    columns += [check.label(f"ok_{name}") for name, check in shapes.readable.items()]
    bad = shapes.loadable.is_not(true())  # a check on a malformed value may be NULL
    due = select(*columns).where(shapes.unpicked, c.execution_time <= shapes.time("now"), bad)
    held = select(*columns).where(shapes.picked, bad)
    branches = [due, held]
    if "picked" in shapes.readable:  # SQLite: neither picked nor unpicked (a scan)
        branches.append(select(*columns).where(shapes.readable["picked"].is_not(true())))
    return union_all(*branches).limit(bindparam("limit"))
