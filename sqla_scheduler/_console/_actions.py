"""The console's actions: on one execution (run now, retry, delete, cancel), one task
(pause, resume), one dead letter (requeue) and one group (cancel), and in bulk on what a
listing's filter selects (retry, delete, cancel, pause, requeue), each in one transaction
on the primary.

A bulk action is bounded: it is done only if the filter still selects as many rows as
were shown (at most ``MAX_BULK``), changed ``_store.bulk.BATCH`` at a time.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._console._values import MAX_BULK, AlreadyPaused, ExecutionFilter, HistoryFilter
from sqla_scheduler._execution import Execution, ExecutionAction
from sqla_scheduler._history_entry import HistoryEntry
from sqla_scheduler._statements import Statements, statements_for
from sqla_scheduler.groups import Group
from sqla_scheduler.scheduler import Scheduler
from sqla_scheduler.tasks import OneTimeTask

__all__ = ["Actions", "bulk_count"]


def _where(
    statements: Statements, scheduler: Scheduler, chosen: ExecutionFilter | HistoryFilter
) -> list[ColumnElement[bool]]:
    """``chosen`` as the WHERE clauses of its table."""
    if isinstance(chosen, HistoryFilter):
        return statements.history.where(chosen)
    return statements.listing.where(**chosen.arguments(frozenset(scheduler.tasks)))


def bulk_count(
    conn: Connection,
    statements: Statements,
    scheduler: Scheduler,
    action: str,
    chosen: ExecutionFilter | HistoryFilter,
) -> int:
    """How many rows the bulk ``action`` would change for ``chosen``: the dead letters it
    selects (``requeue``), every execution of its task (``pause``), or those it selects
    that ``retry``, ``delete`` or ``cancel`` can act on."""
    if isinstance(chosen, HistoryFilter):
        return _store.bulk.count_dead_letters(
            conn, statements, _where(statements, scheduler, chosen)
        )
    if action == "pause":
        return _store.count_executions(
            conn,
            statements,
            state="all",
            task_name=chosen.task,
            instance_contains=None,
            known_tasks=frozenset(scheduler.tasks),
            now=scheduler.clock.now(),
        )
    return _store.bulk.count(
        conn, statements, _execution_action(action), _where(statements, scheduler, chosen)
    )


def _execution_action(action: str) -> ExecutionAction:
    """The bulk action on executions that ``action`` names (``delete`` for any other)."""
    return "retry" if action == "retry" else "cancel" if action == "cancel" else "delete"


class Actions:
    """What an operator's console does to ``scheduler``'s table, on ``db``."""

    def __init__(self, scheduler: Scheduler, *, db: Database) -> None:
        self.scheduler = scheduler
        #: The statements of ``scheduler``'s table on the database, handed to the stores.
        self.statements = statements_for(scheduler.table, db.backend)
        self.db = db

    async def act(
        self, action: str, task: str, instance: str, shown: int
    ) -> tuple[bool, Execution | None]:
        """Delete (``delete``, as ``Scheduler.cancel`` does one that is not running),
        cancel (``cancel``, as ``Scheduler.cancel`` does: a running one is asked to stop)
        or make due now (the others, as ``Scheduler.run_now`` does) one execution, if it is
        still at version ``shown``; whether it was done, and the execution as it is when
        not. A group's callback that waits for its members is not made due: that would run
        it before them."""
        scheduler, statements = self.scheduler, self.statements
        # as Scheduler.cancel does: a task that keeps results keeps "cancelled", at the
        # scheduler's time, so that a waiter on the result is answered now
        registered = scheduler.tasks.get(task)
        keep = isinstance(registered, OneTimeTask) and registered.keep_result
        now = scheduler.clock.now()

        def write(conn: Connection) -> tuple[bool, Execution | None]:
            if action in ("delete", "cancel"):
                done = _store.cancel_shown(
                    conn,
                    statements,
                    task_name=task,
                    instance_id=instance,
                    shown_version=shown,
                    now=now,
                    keep_result=keep,
                    stop=action == "cancel",
                    on_stop=scheduler._on_stop(conn),
                )
            else:
                current = _store.get_execution(conn, statements, task, instance)
                if current is not None and current.waiting:
                    return False, current  # its group's last member makes it due
                done = _store.control.run_now(
                    conn,
                    statements,
                    task,
                    instance,
                    scheduler.clock.now(),
                    shown_version=shown,
                    on_moved=scheduler._on_commit(conn),
                )
            return done, None if done else _store.get_execution(conn, statements, task, instance)

        return await self.db.run(write, read_only=False)

    async def set_paused(self, task: str, paused: bool) -> bool:
        """Pause (``paused``) or resume ``task`` as ``Scheduler.pause`` and
        ``Scheduler.resume`` do; whether anything changed."""

        def write(conn: Connection) -> bool:
            if paused:
                return self.scheduler.pause(conn, task)
            return self.scheduler.resume(conn, task)

        return await self.db.run(write, read_only=False)

    async def requeue(self, history_id: int) -> tuple[bool, HistoryEntry | None, bool]:
        """Requeue the entry ``history_id`` as ``Scheduler.requeue`` does; whether it was
        done, the entry (``None`` if there is none), and whether an execution has its key
        in the table after the attempt."""
        statements = self.statements

        def write(conn: Connection) -> tuple[bool, HistoryEntry | None, bool]:
            done = self.scheduler.requeue(conn, history_id)
            entry = _store.history.get(conn, statements, history_id)
            if entry is None:
                return done, None, False
            current = _store.get_execution(conn, statements, entry.task_name, entry.instance_id)
            return done, entry, current is not None

        return await self.db.run(write, read_only=False)

    async def cancel_group(self, group_id: int) -> tuple[Group | None, int | None]:
        """Cancel the group ``group_id`` as ``Scheduler.cancel_group`` does, unless it was
        cancelled already: the group as it was (``None`` when there is none) and how many
        executions were cancelled (``None`` when nothing was done). The group's row is
        locked first, so that of two cancels at once one is done and one is told so."""
        statements = self.statements

        def write(conn: Connection) -> tuple[Group | None, int | None]:
            before = _store.groups.locked(conn, statements, group_id)
            if before is None or before.cancelled_at is not None:
                return before, None
            cancelled: int = self.scheduler.cancel_group(conn, group_id)
            return before, cancelled

        return await self.db.run(write, read_only=False)

    async def bulk(
        self, action: str, chosen: ExecutionFilter | HistoryFilter, shown: int
    ) -> tuple[int | None, int]:
        """Do the bulk ``action`` on what ``chosen`` selects, in one transaction, if it
        selects ``shown`` rows: how many were changed (``None`` when nothing was done) and
        how many it selects. ``AlreadyPaused`` when a pause finds its task paused."""
        scheduler, statements = self.scheduler, self.statements
        now = scheduler.clock.now()
        keeping = frozenset(
            n for n, t in scheduler.tasks.items() if isinstance(t, OneTimeTask) and t.keep_result
        )

        def write(conn: Connection) -> tuple[int | None, int]:
            if action == "pause":
                assert isinstance(chosen, ExecutionFilter)
                assert chosen.task is not None
                selected = bulk_count(conn, statements, scheduler, action, chosen)
                if selected != shown:
                    return None, selected
                if not scheduler.pause(conn, chosen.task):
                    raise AlreadyPaused(chosen.task)
                return selected, selected
            where = _where(statements, scheduler, chosen)
            if action == "requeue":
                ids = _store.bulk.dead_letters(conn, statements, where, limit=MAX_BULK + 1)
                if len(ids) != shown:
                    return None, len(ids)
                on_commit = scheduler._on_commit(conn)
                return _store.bulk.requeue(conn, statements, ids, now, on_commit), len(ids)
            kind = _execution_action(action)
            found = _store.bulk.keys(conn, statements, kind, where, limit=MAX_BULK + 1)
            if len(found) != shown:
                return None, len(found)
            if kind == "retry":
                on_moved = scheduler._on_commit(conn)
                return _store.bulk.retry(conn, statements, found, now, on_moved), len(found)
            if kind == "cancel":
                on_stop = scheduler._on_stop(conn)
                return _store.bulk.stop(conn, statements, found, now, on_stop), len(found)
            return _store.bulk.delete(conn, statements, found, now, keeping), len(found)

        return await self.db.run(write, read_only=False)
