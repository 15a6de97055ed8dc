"""The scheduler's client methods for composed work: results (``result``, ``wait``,
``prune_results``) and groups (``schedule_group``, ``group``, ``cancel_group``).

A facet of ``Scheduler``, like ``_observing.Observing`` and ``_control.Control``: the
scheduler exposes these methods as its own (``_client`` says how the facets are built).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, overload

import anyio
import anyio.to_thread
from sqlalchemy import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import _bridge, _store
from sqla_scheduler._bridge import AsyncTarget, SyncTarget, Target, driver_connect_args
from sqla_scheduler._checks import check_key, check_number
from sqla_scheduler._client import Client
from sqla_scheduler._dialects import known_backend, result_channel
from sqla_scheduler._execution import GroupPlan, TaskInstance, group_plan
from sqla_scheduler._result import Result
from sqla_scheduler._runner import Runner
from sqla_scheduler._statements import statements_on, with_statements
from sqla_scheduler._store.waiting import Bell, Waiting, check_timeout
from sqla_scheduler.groups import Group

__all__ = ["Composing"]


class Composing:
    """Read and wait for the results of tasks that keep them (``keep_result``); schedule
    groups and chains, follow and cancel them.

    ``make_runner`` builds the services of one loop, whose result pruning
    ``prune_results`` runs once.
    """

    def __init__(self, client: Client, *, make_runner: Callable[[], Runner]) -> None:
        self._client = client
        self._make_runner = make_runner

    @overload
    def schedule_group(
        self,
        target: SyncTarget,
        instances: Iterable[TaskInstance[Any]],
        *,
        then: TaskInstance[Any] | Sequence[TaskInstance[Any]] | None = None,
    ) -> Group: ...
    @overload
    def schedule_group(
        self,
        target: AsyncTarget,
        instances: Iterable[TaskInstance[Any]],
        *,
        then: TaskInstance[Any] | Sequence[TaskInstance[Any]] | None = None,
    ) -> Coroutine[Any, Any, Group]: ...
    def schedule_group(
        self,
        target: Target,
        instances: Iterable[TaskInstance[Any]],
        *,
        then: TaskInstance[Any] | Sequence[TaskInstance[Any]] | None = None,
    ) -> Group | Coroutine[Any, Any, Group]:
        """Schedule ``instances`` as a group, and ``then`` (a callback, or a chain of
        them: each runs after the one before it has finished) to run once every member
        has finished, all in ``target``'s transaction.

        A member whose key is taken already is not scheduled and not counted (``total``);
        a group with no member makes its callback due at once. Members are instances of
        one-time or custom tasks. Raises ``ValueError`` (writing nothing) when a
        callback's key is taken.
        """
        plan = group_plan(instances, then)

        def scheduled(group: Group | None) -> Group:
            if group is None:
                taken = ", ".join(_bridge.named(c.task_name, c.instance_id) for c in plan.then)
                raise ValueError(
                    f"schedule_group: an execution with a callback's key exists ({taken}); "
                    "a callback needs a key of its own, so nothing was scheduled"
                )
            return group

        return _bridge.call(
            target,
            self._client.table,
            lambda conn: scheduled(self.schedule_plan(plan, conn)),
            writes=f"schedule_group({_bridge.batch_named(plan.members)})",
        )

    def schedule_plan(self, plan: GroupPlan, conn: Connection) -> Group | None:
        """Schedule ``plan`` (a group, or an instance with what runs after it) in
        ``conn``'s transaction; ``None`` when a callback's key is taken."""
        return _store.groups.schedule(
            conn,
            statements_on(conn, self._client.table),
            plan,
            self._client.now(),
            self._client.trace_context(),
            on_inserted=self._client.wake_on_commit(conn),
        )

    @overload
    def group(self, target: SyncTarget, group_id: int) -> Group | None: ...
    @overload
    def group(self, target: AsyncTarget, group_id: int) -> Coroutine[Any, Any, Group | None]: ...
    def group(
        self, target: Target, group_id: int
    ) -> Group | Coroutine[Any, Any, Group | None] | None:
        """The group ``group_id`` as it stands: how many members it has, how many have not
        finished, and the finished ones counted by outcome; ``None`` when there is none."""
        check_number("group_id", group_id, 1)
        return _bridge.call(
            target,
            self._client.table,
            with_statements(self._client.table, partial(_store.groups.get, group_id=group_id)),
        )

    @overload
    def cancel_group(self, target: SyncTarget, group_id: int) -> int: ...
    @overload
    def cancel_group(self, target: AsyncTarget, group_id: int) -> Coroutine[Any, Any, int]: ...
    def cancel_group(self, target: Target, group_id: int) -> int | Coroutine[Any, Any, int]:
        """Cancel the group ``group_id``: its members not running (each kept as
        ``cancelled``) and its callback unless it is running, and then along a chain every
        link after it. Running members (and a running callback) finish as they would.
        Returns how many executions were cancelled (0 for an unknown group or one
        cancelled already)."""
        check_number("group_id", group_id, 1)
        return _bridge.call(
            target,
            self._client.table,
            with_statements(
                self._client.table,
                partial(
                    _store.groups.cancel,
                    group_id=group_id,
                    now=self._client.now(),
                ),
            ),
            writes=f"cancel_group({group_id})",
        )

    async def prune_results(self) -> int:
        """Delete kept results older than ``result_retention`` now (the loop does it every
        ``revive_interval``), in bounded batches; return how many went."""
        return await self._make_runner().prune_results_once()

    @overload
    def result(self, target: SyncTarget, task_name: str, instance_id: str) -> Result | None: ...
    @overload
    def result(
        self, target: AsyncTarget, task_name: str, instance_id: str
    ) -> Coroutine[Any, Any, Result | None]: ...
    def result(
        self, target: Target, task_name: str, instance_id: str
    ) -> Result | Coroutine[Any, Any, Result | None] | None:
        """The kept result of ``task_name``/``instance_id``: ``None`` while it has not
        finished (or was scheduled again since), when its task does not keep results (and
        it was no group's member), or once it was pruned (a running scheduler deletes
        results older than ``result_retention`` every ``revive_interval``)."""
        check_key(task_name, instance_id)
        return _bridge.call(
            target,
            self._client.table,
            with_statements(
                self._client.table,
                partial(
                    _store.results.get,
                    task_name=task_name,
                    instance_id=instance_id,
                ),
            ),
            one_statement=True,
        )

    @overload
    def wait(
        self,
        target: Engine,
        task_name: str,
        instance_id: str,
        *,
        timeout: float | timedelta | None,
    ) -> Result: ...
    @overload
    def wait(
        self,
        target: AsyncEngine,
        task_name: str,
        instance_id: str,
        *,
        timeout: float | timedelta | None,
    ) -> Coroutine[Any, Any, Result]: ...
    def wait(
        self,
        target: Engine | AsyncEngine,
        task_name: str,
        instance_id: str,
        *,
        timeout: float | timedelta | None,
    ) -> Result | Coroutine[Any, Any, Result]:
        """Wait for the kept result of ``task_name``/``instance_id`` and return it, as soon
        as it is recorded: woken by ``NOTIFY`` on PostgreSQL, reading again after a
        growing pause (at most a second) elsewhere. Raises ``TimeoutError`` when there is
        none after ``timeout`` (seconds or a ``timedelta``; ``None``: no limit).

        ``target`` is an ``Engine`` (the call blocks) or an ``AsyncEngine`` (it returns
        an awaitable): not a session or a connection, whose open transaction may never
        see the commit that records the result.
        """
        check_key(task_name, instance_id)
        seconds = check_timeout(timeout)
        if not isinstance(target, (Engine, AsyncEngine)):
            raise TypeError(
                "wait needs an Engine or an AsyncEngine: a transaction held open by a "
                f"{type(target).__name__} may never see the result's commit"
            )
        read = with_statements(
            self._client.table,
            partial(_store.results.get, task_name=task_name, instance_id=instance_id),
        )
        label = _bridge.named(task_name, instance_id)
        bell = self._bell(target, task_name, instance_id)
        if isinstance(target, AsyncEngine):
            read_async = partial(_bridge.call, target, self._client.table, read, one_statement=True)
            return _wait_async(read_async, bell, label, seconds)
        read_sync = partial(_bridge.call, target, self._client.table, read, one_statement=True)
        return _wait_sync(read_sync, bell, label, seconds)

    def _bell(self, engine: Engine | AsyncEngine, task_name: str, instance_id: str) -> Bell:
        """A bell listening on the results' channel where the database has NOTIFY (and the
        config allows LISTEN), through ``listen_url`` when one is set; else a silent one."""
        backend = known_backend(engine.dialect)
        if backend is None or not backend.supports_notify or not self._client.config.listen:
            return _Silent()
        url = (
            None
            if self._client.config.listen_url is None
            else make_url(self._client.config.listen_url)
        )
        args = driver_connect_args(engine, url)
        return Bell(args, result_channel(self._client.table), task_name, instance_id)


async def _waited(
    read: Callable[[], Awaitable[Result | None]],
    ring: Callable[[float], Awaitable[Result | None]],
    waiting: Waiting,
) -> Result:
    """The one loop of both ``wait``s: ``read`` until there is a result, and between two
    reads ``ring``, the wait on the bell, for the pause ``waiting`` gives (what the bell's
    NOTIFY carried, if anything). The sync wait's steps block and never suspend."""
    while (found := await read()) is None:
        if (carried := await ring(waiting.pause())) is not None:
            return carried
    return found


def _wait_sync(read: Callable[[], Result | None], bell: Bell, label: str, seconds: float) -> Result:
    async def read_now() -> Result | None:
        return read()

    async def ring(pause: float) -> Result | None:
        return bell.wait(pause)  # a silent bell's wait is a sleep

    with bell:
        waited = _waited(read_now, ring, Waiting(label, seconds, listening=bell.listening))
        try:
            waited.send(None)  # runs to its end: no step suspends
        except StopIteration as done:
            result: Result = done.value
            return result
    raise AssertionError("the sync wait suspended")


async def _wait_async(
    read: Callable[[], Awaitable[Result | None]], bell: Bell, label: str, seconds: float
) -> Result:
    async def ring(pause: float) -> Result | None:
        if bell.listening:
            return await anyio.to_thread.run_sync(bell.wait, pause, abandon_on_cancel=True)
        await anyio.sleep(pause)
        return None

    await anyio.to_thread.run_sync(bell.__enter__)
    try:
        return await _waited(read, ring, Waiting(label, seconds, listening=bell.listening))
    finally:
        bell.__exit__(None, None, None)


class _Silent(Bell):
    """A bell that never rings: the waiter polls."""

    def __init__(self) -> None:
        super().__init__({}, "", "", "")

    def __enter__(self) -> Bell:
        return self
