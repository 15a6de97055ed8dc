"""The scheduler's client methods for composed work: ``result``, ``wait`` and
``prune_results``.

A base of ``Scheduler``, like ``_observing.Observing`` and ``_control.Control``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import timedelta
from functools import partial
from typing import Any, overload

import anyio
import anyio.to_thread
from sqlalchemy import Connection, Engine, Table, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import _bridge, _result_store
from sqla_scheduler._bridge import AsyncTarget, SyncTarget, Target, driver_connect_args
from sqla_scheduler._checks import check_key
from sqla_scheduler._dialects import known_backend, result_channel
from sqla_scheduler._result_wait import Bell, Waiting, check_timeout
from sqla_scheduler._runner import Runner
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.results import Result

__all__ = ["Composing"]


class Composing:
    """Read and wait for the results of tasks that keep them (``keep_result``)."""

    table: Table
    config: SchedulerConfig

    def _make_runner(self) -> Runner:
        raise NotImplementedError  # the scheduler's: the services of one loop

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
        finished (or was scheduled again since), when its task does not keep results, or
        when it finished longer than ``result_retention`` ago."""
        check_key(task_name, instance_id)
        return _bridge.call(
            target,
            self.table,
            partial(
                _result_store.get, table=self.table, task_name=task_name, instance_id=instance_id
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
        read = partial(
            _result_store.get, table=self.table, task_name=task_name, instance_id=instance_id
        )
        label = _bridge.named(task_name, instance_id)
        bell = self._bell(target, task_name, instance_id)
        if isinstance(target, AsyncEngine):
            return _wait_async(target, self.table, read, bell, label, seconds)
        with bell:
            waiting = Waiting(label, seconds, listening=bell.listening)
            while (found := _bridge.call(target, self.table, read, one_statement=True)) is None:
                bell.wait(waiting.pause())
            return found

    def _bell(self, engine: Engine | AsyncEngine, task_name: str, instance_id: str) -> Bell:
        """A bell listening on the results' channel where the database has NOTIFY (and the
        config allows LISTEN), through ``listen_url`` when one is set; else a silent one."""
        backend = known_backend(engine.dialect)
        if backend is None or not backend.supports_notify or not self.config.listen:
            return _Silent()
        url = None if self.config.listen_url is None else make_url(self.config.listen_url)
        args = driver_connect_args(engine, url)
        return Bell(args, result_channel(self.table), task_name, instance_id)


async def _wait_async(
    engine: AsyncEngine,
    table: Table,
    read: Callable[[Connection], Result | None],
    bell: Bell,
    label: str,
    seconds: float,
) -> Result:
    await anyio.to_thread.run_sync(bell.__enter__)
    try:
        waiting = Waiting(label, seconds, listening=bell.listening)
        while (found := await _bridge.call(engine, table, read, one_statement=True)) is None:
            if bell.listening:
                await anyio.to_thread.run_sync(bell.wait, waiting.pause(), abandon_on_cancel=True)
            else:
                await anyio.sleep(waiting.pause())
        return found
    finally:
        bell.__exit__(None, None, None)


class _Silent(Bell):
    """A bell that never rings: the waiter polls."""

    def __init__(self) -> None:
        super().__init__({}, "", "", "")

    def __enter__(self) -> Bell:
        return self
