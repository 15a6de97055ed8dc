"""The executor: runs one held execution to one outcome.

``run_once(held)`` records the start where that matters, decodes the payload, builds the
context, runs the handler through the interceptors (a sync one on a handler thread) and
asks the outcome policy (``outcomes``) what the result or error comes to. It records no
outcome itself: it returns it, and the worker loop hands it to the completer.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, nullcontext
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
from typing import Any

import anyio
from sqlalchemy import Table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sqla_scheduler import _app_code, _group_store, _store
from sqla_scheduler._bridge import Database, SessionFactory, Transaction
from sqla_scheduler._execution import Execution, Key
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.failures import first_line
from sqla_scheduler._runner.held import Held, RowWrites, log_lost, versioned_keys
from sqla_scheduler._runner.outcomes import Outcome
from sqla_scheduler._runner.waker import AHEAD
from sqla_scheduler._store import Completion
from sqla_scheduler._threads import HandlerThreads
from sqla_scheduler.clock import Clock
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.context import ExecutionContext, ShutdownSignal
from sqla_scheduler.exceptions import InvalidScheduleError, TaskTimeoutError
from sqla_scheduler.groups import Group
from sqla_scheduler.interceptors import ExecutionInterceptor, run_chain
from sqla_scheduler.listeners import SchedulerListener, dispatch
from sqla_scheduler.tasks import Handler, RecurringTask, Task

__all__ = ["Executor"]

log = logging.getLogger("sqla_scheduler")


class Executor:
    """Runs held executions' handlers; one call of ``run_once`` per execution."""

    def __init__(
        self,
        *,
        db: Database,
        table: Table,
        tasks: Mapping[str, Task[Any]],
        config: SchedulerConfig,
        clock: Clock,
        shutdown: ShutdownSignal,
        threads: HandlerThreads,
        writes: RowWrites,
        listeners: Sequence[SchedulerListener] = (),
        interceptors: Sequence[ExecutionInterceptor] = (),
        sessions: SessionFactory | None = None,
        limited: frozenset[str] = frozenset(),
        on_handed_back: Callable[[], None] | None = None,
    ) -> None:
        self.tasks = tasks
        self._db = db
        self._table = table
        #: Makes a transactional handler's session (see ``Database.transaction``).
        self._sessions = sessions
        #: The tasks with a ``max_concurrency`` (whose outcomes notify: see ``_store.complete``).
        self._limited = limited
        self.config = config
        self.clock = clock
        self.shutdown = shutdown
        self.listeners = listeners
        self.interceptors = interceptors
        self._threads = threads
        #: Start records are kept apart from heartbeats (see ``RowWrites``).
        self._starts = _StartRecorder(db, table, clock, writes)
        #: Called once a rate-limited execution handed back for starting late is due again
        #: (the picker's wake-up: it was picked by this process, no other hears of it).
        self._on_handed_back = on_handed_back

    async def run_once(self, held: Held) -> Outcome:
        """Run ``held``'s handler (when it may run) and return what it came to."""
        execution = held.execution
        if execution.last_failure is not None:
            # Recorded before the wait for the time below, so that its round trip does
            # not delay the start: a process that dies in those milliseconds counts the
            # attempt, as it would a moment later.
            refused = await self._starts.record(held)
            if refused is not None:
                return refused
        early = (execution.execution_time - self.clock.now()).total_seconds()
        if early > 0:  # picked just ahead of its time (see ``waker.AHEAD``): wait for it
            await anyio.sleep(min(early, AHEAD.total_seconds()))
        task = self.tasks[execution.task_name]
        try:
            payload = await self._decode(task, execution)
            if isinstance(task, RecurringTask):
                outcomes.schedule_of(task, execution)  # what follows the run must read
        except Exception as exc:  # whatever decoding raised (see ``_app_code``): it cannot run
            return Outcome(
                held=held,
                decision=outcomes.undecodable(
                    execution,
                    exc,
                    self.clock.now(),
                    keep_result=outcomes.keeps_result(task, execution),
                ),
                on_recorded=partial(_log_undecodable, execution, exc),
            )
        context: ExecutionContext[Any] = ExecutionContext(
            payload=payload,
            task_name=execution.task_name,
            instance_id=execution.instance_id,
            execution_time=execution.execution_time,
            consecutive_failures=execution.consecutive_failures,
            last_error=execution.last_error,
            priority=execution.priority,
            # an execution with a timeout has a signal of its own, also set at its timeout
            shutdown=self.shutdown if task.timeout is None else self.shutdown.child(),
            trace_context=execution.trace_context,
            group=None if execution.awaits is None else await self._group(execution.awaits),
        )
        spent = outcomes.spent(task, execution, self.config)
        if spent is not None:
            return Outcome(held=held, decision=spent, context=context, on_abandon=task.on_abandon)

        late = self._late(held)
        if late is not None:
            return late
        if self.listeners:
            dispatch(self.listeners, "on_start", context)
        started_at = self.clock.now()
        started = time.monotonic()
        async with AsyncExitStack() as stack:
            try:
                transaction = await stack.enter_async_context(self._transaction(task))
            except (DBAPIError, PoolTimeout) as exc:  # its transaction did not begin: not run
                log.warning(
                    "%s: its transaction could not begin (%s); handing it back",
                    held.label,
                    first_line(exc),
                )
                return Outcome(held=held, decision=outcomes.release(execution, self.clock.now()))
            handler = task.handler
            if transaction is not None:
                context = replace(context, session=transaction.session)
                if not task.is_async:  # its session is the handler thread's while it runs
                    handler = transaction.guard(handler)
            result, error = await self._attempt(task, context, handler)
            duration = timedelta(seconds=time.monotonic() - started)
            now = self.clock.now()
            if error is None:
                try:
                    completion = outcomes.succeeded(
                        task,
                        execution,
                        result,
                        now=now,
                        scheduled=context.scheduled,
                        plans=context.plans,
                        started_at=started_at,
                        max_result_size=self.config.max_result_size,
                    )
                    on_recorded = (
                        partial(dispatch, self.listeners, "on_success", context, duration)
                        if self.listeners
                        else None
                    )
                    if transaction is None:
                        return Outcome(held=held, decision=completion, on_recorded=on_recorded)
                    return await self._commit(transaction, held, completion, on_recorded)
                except Exception as exc:
                    error = exc
        # a transaction is rolled back by now: the handler's writes went with the attempt
        decision = outcomes.failed(
            task, execution, error, now=now, config=self.config, started_at=started_at
        )
        retry_at = None if isinstance(decision, outcomes.Abandon) else decision.at
        log.error(
            "execution %s failed (consecutive failures: %d)%s",
            held.label,
            decision.failures,
            "" if retry_at is None else f"; retrying at {retry_at.isoformat()}",
            exc_info=error,
        )
        dispatch(self.listeners, "on_failure", context, error, duration)
        return Outcome(held=held, decision=decision, context=context, on_abandon=task.on_abandon)

    async def _group(self, group_id: int) -> Group | None:
        """The group a callback waited for, with its members' outcomes and results."""
        read = partial(_group_store.get, table=self._table, group_id=group_id, members=True)
        return await self._db.shielded(read)

    async def _decode(self, task: Task[Any], execution: Execution) -> Any:
        """``execution``'s payload. One written by an earlier version of the task is
        upcast in a handler thread: the upcasters are application code that may block or
        loop, and the event loop (heartbeats, other executions, a stop) must not wait on
        them; a stop leaves such a call running, as it does a handler."""
        decode = partial(task.codec.decode, execution.data)
        version = execution.payload_version
        if version is None or version == task.codec.version:
            return decode(version)
        return await self._threads.run(decode, version)

    def _late(self, held: Held) -> Outcome | None:
        """A release of ``held`` when it is a rate-limited task's execution past the time
        it had to start by (see ``_rate_store``): its start was counted, to come by then,
        when it was picked. Handed back untouched, it is picked again as its window allows;
        ``None`` when it may start."""
        now = self.clock.now()
        if held.start_by is None or now <= held.start_by:
            return None
        log.info(
            "%s did not start by %s, as its rate limit needs: handing it back",
            held.label,
            held.start_by.isoformat(),
        )
        return Outcome(
            held=held,
            decision=outcomes.release(held.execution, now),
            on_recorded=self._on_handed_back,
        )

    async def _attempt(
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

    def _transaction(self, task: Task[Any]) -> AbstractAsyncContextManager[Transaction | None]:
        """A transactional task's transaction (see ``Database.transaction``), else none:
        outside the services' budget of connections, as at most ``concurrency`` run."""
        if not task.transactional:
            return nullcontext()
        return self._db.transaction(self._sessions, budgeted=False)

    async def _commit(
        self,
        transaction: Transaction,
        held: Held,
        completion: Completion,
        on_recorded: Callable[[], None] | None,
    ) -> Outcome:
        """Record a transactional handler's success in its own transaction and commit the
        two together; when the execution was taken over, record nothing and roll back."""
        complete = partial(
            _store.complete,
            table=self._table,
            batch=[completion],
            history=self.config.history,
            notify=self._limited,
        )
        if not await transaction.commit_if(lambda conn: complete(conn)[0]):
            log_lost(completion.execution, completion.kind)
            return Outcome(held=held, decision=None)
        return Outcome(held=held, decision=completion, on_recorded=on_recorded, committed=True)

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
        result = await self._threads.run(handler, context)
        if inspect.isawaitable(result):  # e.g. a sync callable that returns a coroutine
            return await result
        return result


def _log_undecodable(execution: Execution, error: Exception) -> None:
    log.error(
        "took %s/%s out of the table (into history as undecodable, unless history is "
        "off): its %s (%s); raw payload: %r",
        execution.task_name,
        execution.instance_id,
        "schedule does not read"
        if isinstance(error, InvalidScheduleError)
        else "payload does not decode",
        error,
        execution.data,
    )


@dataclass(eq=False)
class _Starting:
    """A worker waiting for the start of its execution to be recorded."""

    held: Held
    done: anyio.Event = field(default_factory=anyio.Event)
    #: Set on the waiter that is to write the next batch.
    lead: bool = False
    #: The keys recorded as started in its batch; ``None`` when writing them failed.
    started: set[Key] | None = None


class _StartRecorder:
    """Records that handlers start, many workers' starts in one statement.

    A revival counts a failure only for an execution whose start was recorded, so that
    executions merely waiting in a dead process's queue lose nothing. Recording costs a
    statement, so only executions that have been in trouble before (a failure or a
    revival set ``last_failure``) are recorded: a handler that kills its process is thus
    counted from its second crash on, and abandoned after ``max_retries`` counted crashes
    like any failing execution.
    """

    def __init__(self, db: Database, table: Table, clock: Clock, writes: RowWrites) -> None:
        self.db = db
        self.table = table
        self.clock = clock
        self.writes = writes
        self._waiting: list[_Starting] = []
        self._busy = False

    async def record(self, held: Held) -> Outcome | None:
        """Record ``held``'s start; ``None`` when it may run, else the outcome instead.

        Workers arriving while a record is being written wait and are written together in
        the next statement. An execution taken over by another scheduler is let go, not
        run; when the record cannot be written, the execution is handed back instead.
        """
        waiter = _Starting(held)
        self._waiting.append(waiter)
        if self._busy:
            await waiter.done.wait()
            if not waiter.lead:
                return self._verdict(waiter)
        self._busy = True
        batch, self._waiting = self._waiting, []
        try:
            started = await self._write([w.held for w in batch])
        finally:
            if self._waiting:  # the next batch gathered meanwhile: its first writes it
                self._waiting[0].lead = True
                self._waiting[0].done.set()
            else:
                self._busy = False
        for other in batch:
            other.started = started
            if other is not waiter:
                other.done.set()
        return self._verdict(waiter)

    def _verdict(self, waiter: _Starting) -> Outcome | None:
        held = waiter.held
        if waiter.started is None:  # not recorded: hand it back for a later pick
            return Outcome(held=held, decision=outcomes.release(held.execution, self.clock.now()))
        if held.key not in waiter.started:
            held.lost = True
            log_lost(held.execution, "start")
            return Outcome(held=held, decision=None)
        return None

    async def _write(self, batch: list[Held]) -> set[Key] | None:
        keys = versioned_keys(batch)
        try:
            async with self.writes.statement():
                return await self.db.shielded(
                    partial(_store.mark_started, table=self.table, held=keys, now=self.clock.now()),
                    autocommit=True,
                    lane="starter",  # one record is written at a time: it keeps a connection
                )
        except Exception:
            log.warning(
                "could not record the start of %d execution(s); handing them back",
                len(keys),
                exc_info=True,
            )
            return None
