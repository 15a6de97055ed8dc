"""The scheduler's client methods of control: ``pause``, ``resume``, ``paused_tasks`` and
``run_now``.

A base of ``Scheduler``, like ``_observing.Observing``. Each takes the caller's session,
connection or engine, sync or async, and acts in its transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import datetime
from functools import partial
from typing import Any, overload

from sqlalchemy import Connection, Table

from sqla_scheduler import _bridge, _control_store
from sqla_scheduler._bridge import AsyncTarget, SyncTarget, Target
from sqla_scheduler._checks import check_task_name
from sqla_scheduler._execution import RECURRING_INSTANCE_ID
from sqla_scheduler.clock import Clock

__all__ = ["Control"]


class Control:
    """Pause and resume tasks cluster-wide, and run an execution now."""

    table: Table
    clock: Clock

    def _on_commit(self, conn: Connection) -> Callable[[datetime], None] | None:
        raise NotImplementedError  # the scheduler's: tells its running loop of new times

    @overload
    def pause(self, target: SyncTarget, task_name: str) -> bool: ...
    @overload
    def pause(self, target: AsyncTarget, task_name: str) -> Coroutine[Any, Any, bool]: ...
    def pause(self, target: Target, task_name: str) -> bool | Coroutine[Any, Any, bool]:
        """Pause ``task_name`` for every scheduler sharing the table, until ``resume``:
        none picks its executions (those running finish); scheduling them still works.
        ``False`` when it was paused already. The task need not be registered here."""
        check_task_name(task_name)
        return _bridge.call(
            target,
            self.table,
            lambda conn: _control_store.pause(conn, self.table, task_name, self.clock.now()),
            one_statement=True,
        )

    @overload
    def resume(self, target: SyncTarget, task_name: str) -> bool: ...
    @overload
    def resume(self, target: AsyncTarget, task_name: str) -> Coroutine[Any, Any, bool]: ...
    def resume(self, target: Target, task_name: str) -> bool | Coroutine[Any, Any, bool]:
        """Let the schedulers pick ``task_name`` again; ``False`` when it was not paused.

        What came due while it was paused runs now: a recurring run missed meanwhile runs
        once, and its schedule goes on from then.
        """
        check_task_name(task_name)
        return _bridge.call(target, self.table, self._resumed(task_name))

    def _resumed(self, task_name: str) -> Callable[[Connection], bool]:
        def resume(conn: Connection) -> bool:
            resumed = _control_store.resume(conn, self.table, task_name)
            wake = self._on_commit(conn)
            if resumed and wake is not None:
                wake(self.clock.now())  # this process's own loop: its work may be due
            return resumed

        return resume

    @overload
    def paused_tasks(self, target: SyncTarget) -> frozenset[str]: ...
    @overload
    def paused_tasks(self, target: AsyncTarget) -> Coroutine[Any, Any, frozenset[str]]: ...
    def paused_tasks(self, target: Target) -> frozenset[str] | Coroutine[Any, Any, frozenset[str]]:
        """The names of the paused tasks."""
        return _bridge.call(
            target, self.table, partial(_control_store.paused, table=self.table), one_statement=True
        )

    @overload
    def run_now(
        self, target: SyncTarget, task_name: str, instance_id: str = RECURRING_INSTANCE_ID
    ) -> bool: ...
    @overload
    def run_now(
        self, target: AsyncTarget, task_name: str, instance_id: str = RECURRING_INSTANCE_ID
    ) -> Coroutine[Any, Any, bool]: ...
    def run_now(
        self, target: Target, task_name: str, instance_id: str = RECURRING_INSTANCE_ID
    ) -> bool | Coroutine[Any, Any, bool]:
        """Make an execution that is not running due now, keeping its payload and schedule
        (a recurring task's by default). ``False`` when there is none, or a scheduler is
        running it."""
        return _bridge.call(target, self.table, self._ran_now(task_name, instance_id))

    def _ran_now(
        self, task_name: str, instance_id: str, shown_version: int | None = None
    ) -> Callable[[Connection], bool]:
        """``run_now``'s unit of work; the admin page's run now and retry do it too, given
        the version the page showed (``_control_store.run_now``)."""

        def run_now(conn: Connection) -> bool:
            return _control_store.run_now(
                conn,
                self.table,
                task_name,
                instance_id,
                self.clock.now(),
                shown_version=shown_version,
                on_moved=self._on_commit(conn),
            )

        return run_now
