"""The scheduler's facet of control: ``reschedule``, ``cancel``, ``run_now``, ``pause``,
``resume`` and ``paused_tasks``.

``Scheduler`` exposes these methods as its own (``_client`` says how the facets are
built). Each takes the caller's session, connection or engine, sync or async, and acts in
its transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from typing import Any, overload

from sqlalchemy import Connection

from sqla_scheduler import _bridge, _store
from sqla_scheduler._bridge import AsyncTarget, SyncTarget, Target
from sqla_scheduler._checks import check_aware, check_key, check_task_name
from sqla_scheduler._client import Client
from sqla_scheduler._execution import KEEP, RECURRING_INSTANCE_ID
from sqla_scheduler._payload import codec_for
from sqla_scheduler._statements import Statements, with_statements
from sqla_scheduler.exceptions import TaskDefinitionError
from sqla_scheduler.schedules import Schedule
from sqla_scheduler.tasks import OneTimeTask, RecurringTask, Task, as_schedule

__all__ = ["Control"]


class Control:
    """Move, cancel and run executions now; pause and resume tasks cluster-wide.

    ``learn_on_commit``: given the caller's connection, what tells the scheduler's running
    loop of a pause or resume once the transaction commits (``None`` when no loop runs in
    this process), so that it hands back what it holds of a paused task at once;
    ``stop_on_commit``, of a stop request, so that it stops what it holds at once.
    """

    def __init__(
        self,
        client: Client,
        *,
        learn_on_commit: Callable[[Connection], Callable[[str, bool], None] | None],
        stop_on_commit: Callable[[Connection], Callable[[str, str], None] | None] = (
            lambda conn: None
        ),
    ) -> None:
        self._client = client
        self._learn_on_commit = learn_on_commit
        self._stop_on_commit = stop_on_commit

    @overload
    def reschedule(
        self,
        target: SyncTarget,
        task_name: str,
        instance_id: str,
        at: datetime | None = None,
        payload: Any = KEEP,
        *,
        schedule: Schedule | str | None = None,
    ) -> bool: ...
    @overload
    def reschedule(
        self,
        target: AsyncTarget,
        task_name: str,
        instance_id: str,
        at: datetime | None = None,
        payload: Any = KEEP,
        *,
        schedule: Schedule | str | None = None,
    ) -> Coroutine[Any, Any, bool]: ...
    def reschedule(
        self,
        target: Target,
        task_name: str,
        instance_id: str,
        at: datetime | None = None,
        payload: Any = KEEP,
        *,
        schedule: Schedule | str | None = None,
    ) -> bool | Coroutine[Any, Any, bool]:
        """Move an execution that is not running to ``at``, optionally with a new payload.

        ``schedule`` gives an instance of a recurring task without a schedule of its own
        (``recurring(name)``) a new one; without ``at`` it then runs when the new schedule
        first says. Returns ``False`` when there is no such execution or a scheduler is
        running it.

        A new payload is written as the task's ``payload_version`` (version 1 for a task not
        registered with this scheduler); without one the row keeps its payload and version.
        """
        check_key(task_name, instance_id)
        own = None if schedule is None else self._own_schedule(task_name, schedule)
        if at is None and own is None:
            raise TypeError(f"task {task_name!r}: reschedule needs at, schedule or both")
        if at is not None:
            check_aware(at, f"task {task_name!r}: at")
        data = KEEP if payload is KEEP else _encode(self._client.tasks, task_name, payload)
        task = self._client.tasks.get(task_name)
        payload_version = 1 if task is None else task.payload_version

        def move(conn: Connection, statements: Statements) -> bool:
            now = self._client.now()
            when = at if at is not None else own.first_run(now) if own is not None else None
            assert when is not None  # an instance's own schedule is never disabled
            return _store.reschedule(
                conn, statements, task_name, instance_id, when, data, now,
                schedule=None if own is None else own.text,
                on_moved=self._client.wake_on_commit(conn),
                payload_version=payload_version,
            )  # fmt: skip

        writes = f"reschedule({_bridge.named(task_name, instance_id)})"
        table = self._client.table
        return _bridge.call(target, table, with_statements(table, move), writes=writes)

    def _own_schedule(self, task_name: str, schedule: Schedule | str) -> Schedule:
        task = self._client.tasks.get(task_name)
        if not isinstance(task, RecurringTask) or task.schedule is not None:
            raise TaskDefinitionError(
                f"task {task_name!r}: schedule= is for the instances of a recurring task "
                f"registered here without a schedule of its own (recurring({task_name!r}))"
            )
        return as_schedule(task_name, schedule, own=True)

    @overload
    def cancel(self, target: SyncTarget, task_name: str, instance_id: str) -> bool: ...
    @overload
    def cancel(
        self, target: AsyncTarget, task_name: str, instance_id: str
    ) -> Coroutine[Any, Any, bool]: ...
    def cancel(
        self, target: Target, task_name: str, instance_id: str
    ) -> bool | Coroutine[Any, Any, bool]:
        """Cancel an execution: remove it when it is not running (an instance of a
        recurring task ends there), or, when a scheduler is running it, ask that process
        to stop it. Returns whether there was one to cancel.

        A stop is recorded in ``target``'s transaction and reaches the process running
        the execution within a second of the commit (at once through NOTIFY on
        PostgreSQL): an async handler is cancelled, a sync one sees ``ctx.cancelled`` set;
        a transactional handler's writes are rolled back. The execution then ends
        ``cancelled``: it leaves the table, history records ``cancelled``, its group counts
        it as finished, and no ``on_abandon`` runs. A handler still running
        ``cancel_grace`` after the request is recorded ``cancelled`` anyway.

        A task that keeps results (registered here with ``keep_result``) keeps
        ``cancelled`` as the execution's result."""
        check_key(task_name, instance_id)
        task = self._client.tasks.get(task_name)
        keep = isinstance(task, OneTimeTask) and task.keep_result

        def cancel(conn: Connection, statements: Statements) -> bool:
            return _store.cancel(
                conn,
                statements,
                task_name,
                instance_id,
                now=self._client.now(),
                keep_result=keep,
                stop=True,
                on_stop=self._stop_on_commit(conn),
            )

        return _bridge.call(
            target,
            self._client.table,
            with_statements(self._client.table, cancel),
            writes=f"cancel({_bridge.named(task_name, instance_id)})",
        )

    @overload
    def pause(self, target: SyncTarget, task_name: str) -> bool: ...
    @overload
    def pause(self, target: AsyncTarget, task_name: str) -> Coroutine[Any, Any, bool]: ...
    def pause(self, target: Target, task_name: str) -> bool | Coroutine[Any, Any, bool]:
        """Pause ``task_name`` for every scheduler sharing the table, until ``resume``:
        none picks or starts its executions (those running finish, those picked and not
        yet started are handed back); scheduling them still works.
        ``False`` when it was paused already. The task need not be registered here."""
        check_task_name(task_name)
        return _bridge.call(
            target,
            self._client.table,
            self._paused(task_name),
            writes=f"pause({_bridge.named(task_name)})",
        )

    def _paused(self, task_name: str) -> Callable[[Connection], bool]:
        def pause(conn: Connection, statements: Statements) -> bool:
            paused = _store.control.pause(conn, statements, task_name, self._client.now())
            learn = self._learn_on_commit(conn)
            if paused and learn is not None:
                learn(task_name, True)  # this process's own loop hands back what it holds
            return paused

        return with_statements(self._client.table, pause)

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
        writes = f"resume({_bridge.named(task_name)})"
        return _bridge.call(target, self._client.table, self._resumed(task_name), writes=writes)

    def _resumed(self, task_name: str) -> Callable[[Connection], bool]:
        def resume(conn: Connection, statements: Statements) -> bool:
            resumed = _store.control.resume(conn, statements, task_name)
            wake, learn = self._client.wake_on_commit(conn), self._learn_on_commit(conn)
            if resumed and learn is not None:
                learn(task_name, False)
            if resumed and wake is not None:
                wake(self._client.now())  # this process's own loop: its work may be due
            return resumed

        return with_statements(self._client.table, resume)

    @overload
    def paused_tasks(self, target: SyncTarget) -> frozenset[str]: ...
    @overload
    def paused_tasks(self, target: AsyncTarget) -> Coroutine[Any, Any, frozenset[str]]: ...
    def paused_tasks(self, target: Target) -> frozenset[str] | Coroutine[Any, Any, frozenset[str]]:
        """The names of the paused tasks."""
        return _bridge.call(
            target,
            self._client.table,
            with_statements(self._client.table, _store.control.paused),
            one_statement=True,
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
        check_key(task_name, instance_id)
        writes = f"run_now({_bridge.named(task_name, instance_id)})"
        return _bridge.call(
            target, self._client.table, self.ran_now(task_name, instance_id), writes=writes
        )

    def ran_now(
        self, task_name: str, instance_id: str, shown_version: int | None = None
    ) -> Callable[[Connection], bool]:
        """``run_now``'s unit of work; the admin page's run now and retry do it too, given
        the version the page showed (``_store.control.run_now``)."""

        def run_now(conn: Connection, statements: Statements) -> bool:
            return _store.control.run_now(
                conn,
                statements,
                task_name,
                instance_id,
                self._client.now(),
                shown_version=shown_version,
                on_moved=self._client.wake_on_commit(conn),
            )

        return with_statements(self._client.table, run_now)


def _encode(tasks: Mapping[str, Task[Any]], task_name: str, payload: Any) -> Any:
    """``payload`` as stored for ``task_name`` (the default codec for an unknown task)."""
    task = tasks.get(task_name)
    codec = task.codec if task is not None else codec_for(task_name, None)
    return codec.encode(payload)
