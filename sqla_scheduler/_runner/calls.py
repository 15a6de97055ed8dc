"""How a task's handler is called: through the interceptors, held to the task's timeout,
a sync one on a handler thread (``HandlerCalls.run``).

An attempt (``Executor.attempt``) calls its handler once, this way; what the handler
returned or raised is for the executor to decide on.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import anyio

from sqla_scheduler import _app_code
from sqla_scheduler._threads import HandlerThreads
from sqla_scheduler.context import ExecutionContext
from sqla_scheduler.exceptions import TaskTimeoutError
from sqla_scheduler.interceptors import ExecutionInterceptor, run_chain
from sqla_scheduler.tasks import Handler, Task

__all__ = ["HandlerCalls"]


class HandlerCalls:
    """Calls task handlers, once per ``run``."""

    def __init__(
        self, *, threads: HandlerThreads, interceptors: Sequence[ExecutionInterceptor] = ()
    ) -> None:
        #: Where sync handlers run.
        self.threads = threads
        self.interceptors = interceptors

    async def run(
        self, task: Task[Any], context: ExecutionContext[Any], handler: Handler[Any]
    ) -> tuple[Any, BaseException | None]:
        """Run ``handler`` (the task's) once, through the interceptors: what it returned,
        or what it or an interceptor raised, whatever that is (see ``_app_code``)."""
        try:
            if task.timeout is not None:
                return await self._within_timeout(task, context, handler, task.timeout), None
            if self.interceptors:
                return await self._chain(task, context, handler), None
            return await self._call(task, context, handler), None  # the common case: direct
        except BaseException as exc:  # SystemExit, KeyboardInterrupt too: only a stop stops us
            return None, await _app_code.failure(exc)

    async def _chain(
        self, task: Task[Any], context: ExecutionContext[Any], handler: Handler[Any]
    ) -> Any:
        """The handler, through the interceptors when there are any."""
        call = partial(self._call, task, context, handler)
        if self.interceptors:
            return await run_chain(self.interceptors, context, call)
        return await call()

    async def _within_timeout(
        self,
        task: Task[Any],
        context: ExecutionContext[Any],
        handler: Handler[Any],
        limit: timedelta,
    ) -> Any:
        """The handler, held to its task's timeout ``limit``: an async one is cancelled
        when it is up; a sync one cannot be, so its context's shutdown signal is set and it
        runs on (its execution held, heartbeats going) until it returns. Either way the
        attempt then fails with ``TaskTimeoutError``, whatever the handler did after its
        time was up."""
        seconds = limit.total_seconds()
        if task.is_async:
            with anyio.move_on_after(seconds) as scope:
                result = await self._chain(task, context, handler)
            if scope.cancel_called:
                raise TaskTimeoutError(task.name, limit, "the handler was cancelled")
            return result
        expired = anyio.Event()
        started = time.monotonic()

        async def expire() -> None:
            await anyio.sleep(seconds)
            expired.set()
            context.shutdown.set()

        raised: BaseException | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(expire)
            try:
                result = await self._chain(task, context, handler)
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # raised below, not wrapped in the group's error
                raised = exc
            group.cancel_scope.cancel()
        if expired.is_set():
            took = time.monotonic() - started
            raise TaskTimeoutError(
                task.name,
                limit,
                f"the sync handler was signalled (ctx.shutdown) and returned after {took:.1f}s",
            ) from raised
        if raised is not None:
            raise raised
        return result

    async def _call(
        self, task: Task[Any], context: ExecutionContext[Any], handler: Handler[Any]
    ) -> Any:
        if task.is_async:
            return await handler(context)
        result = await self.threads.run(handler, context)
        if inspect.isawaitable(result):  # e.g. a sync callable that returns a coroutine
            return await result
        return result
