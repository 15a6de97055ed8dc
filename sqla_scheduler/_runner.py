"""The execution loop: pick, run, heartbeat, complete, retry, revive, stop.

One ``Runner`` lives for one ``Scheduler.run()``. Its services are small loops around
``*_once`` methods that tests can call directly:

- the picker keeps a queue of picked executions between a lower and an upper fraction of
  ``concurrency`` (``pick_once``), woken by NOTIFY, by freed capacity, or by its poll;
- ``concurrency`` workers take executions off the queue and run their handlers;
- the completer commits finished executions' outcomes in batches (``complete``);
- the heartbeater keeps held executions alive (``heartbeat_once``);
- maintenance revives dead executions and deletes old orphans (``revive_once``,
  ``delete_orphans_once``);
- the listener turns PostgreSQL notifications into wake-ups.

Database work goes through ``Database``, which runs each unit of work (a sync function
of a ``Connection`` from ``_store``) in a worker thread for a sync engine or through
``run_sync`` for an async one. Nothing here imports asyncio.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import sniffio
from anyio.streams.memory import MemoryObjectSendStream
from sqlalchemy import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from sqla_scheduler import _store
from sqla_scheduler._dialects import backend_for, notify_channel
from sqla_scheduler._durations import format_duration
from sqla_scheduler._store import Completion
from sqla_scheduler._threads import HandlerThreads, call_soon_threadsafe
from sqla_scheduler.clock import DatabaseClock
from sqla_scheduler.context import ExecutionContext, ShutdownSignal
from sqla_scheduler.exceptions import PayloadError
from sqla_scheduler.executions import Execution
from sqla_scheduler.interceptors import run_chain
from sqla_scheduler.schedules import Disabled
from sqla_scheduler.tasks import KEEP, RECURRING_INSTANCE_ID, NextAt, RecurringTask, Task

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = ["Database", "Runner", "check_backend", "require_async_library"]

log = logging.getLogger("sqla_scheduler")

T = TypeVar("T")
Key = tuple[str, str]

#: How long the picker backs off after the database failed it.
_ERROR_BACKOFF = 1.0
#: The most the picker multiplies its lower and upper limits by under a backlog.
_MAX_BOOST = 16
#: How often the listener thread looks up from its socket to see whether to stop.
_LISTEN_TICK = 0.25


def require_async_library(backend: str) -> None:
    """Fail with the extra to install when ``backend`` (``"trio"``) is not importable."""
    if backend == "trio":
        try:
            import trio  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "the trio backend needs trio: pip install 'sqla-scheduler[trio]'"
            ) from exc


def check_backend(engine: Engine | AsyncEngine) -> None:
    """Fail at once when an ``AsyncEngine`` is driven from trio."""
    if isinstance(engine, AsyncEngine) and sniffio.current_async_library() != "asyncio":
        raise RuntimeError(
            "SQLAlchemy's AsyncEngine only runs on asyncio; under trio, give the Scheduler a "
            "sync Engine (its database work then runs in worker threads)"
        )


async def _await(value: Awaitable[T]) -> T:
    return await value


class Database:
    """Runs units of work on the scheduler's engine, in a transaction each.

    One path serves both kinds of engine: a unit of work is a sync function of a
    ``Connection``, run through ``run_sync`` on an ``AsyncConnection`` or in a worker thread
    on a sync one; only connecting, calling and closing differ.
    """

    def __init__(
        self, engine: Engine | AsyncEngine, threads: int, *, prepared_statements: bool = True
    ) -> None:
        self.engine = engine
        self._limiter = anyio.CapacityLimiter(threads)
        self._prepared = prepared_statements
        self._lanes: dict[str, Connection | AsyncConnection] = {}
        self._unit_of_work = backend_for(engine.dialect).unit_of_work

    async def run(
        self,
        fn: Callable[[Connection], T],
        *,
        autocommit: bool = False,
        lane: str | None = None,
    ) -> T:
        """Run ``fn`` in a transaction of its own and commit.

        ``autocommit`` suits a unit of work of exactly one statement: the statement is its
        own transaction, which saves the BEGIN and COMMIT round trips. A ``lane`` names a
        connection kept open between calls for a service that runs one unit at a time
        (the picker, the completer), saving a pool checkout per call. On SQLite every unit,
        ``autocommit`` or not, is one ``BEGIN IMMEDIATE`` transaction (``Backend.unit_of_work``).
        """
        unit = partial(self._unit, self._unit_of_work(fn), autocommit)
        conn = self._lanes.pop(lane, None) if lane is not None else None
        fresh = conn is None
        if conn is None:
            conn = await self._connect()
        try:
            result = await self._call(conn, partial(unit, fresh))
        except BaseException:
            await self._close(conn)  # a lane whose unit failed starts afresh next time
            raise
        if lane is None or self._lanes.setdefault(lane, conn) is not conn:
            await self._close(conn)
        return result

    async def shielded(
        self, fn: Callable[[Connection], T], *, autocommit: bool = False, lane: str | None = None
    ) -> T:
        """``run``, shielded from cancellation: a commit is never cut in half."""
        with anyio.CancelScope(shield=True):
            result = await self.run(fn, autocommit=autocommit, lane=lane)
        return result

    async def close(self) -> None:
        """Give the lanes' connections back to the pool."""
        lanes, self._lanes = list(self._lanes.values()), {}
        for conn in lanes:
            await self._close(conn)

    def _unit(
        self, fn: Callable[[Connection], T], autocommit: bool, fresh: bool, conn: Connection
    ) -> T:
        """``fn(conn)``, committed; a connection fresh from the pool is configured first."""
        if fresh:
            if autocommit:
                conn.execution_options(isolation_level="AUTOCOMMIT")
            if not self._prepared:
                _disable_prepare(conn.connection.driver_connection)
        result = fn(conn)
        conn.commit()
        return result

    async def _connect(self) -> Connection | AsyncConnection:
        if isinstance(self.engine, AsyncEngine):
            return await self.engine.connect()
        return await anyio.to_thread.run_sync(self.engine.connect, limiter=self._limiter)

    async def _call(self, conn: Connection | AsyncConnection, fn: Callable[[Connection], T]) -> T:
        if isinstance(conn, AsyncConnection):
            return await conn.run_sync(fn)
        return await anyio.to_thread.run_sync(fn, conn, limiter=self._limiter)

    async def _close(self, conn: Connection | AsyncConnection) -> None:
        with anyio.CancelScope(shield=True):
            if isinstance(conn, AsyncConnection):
                await conn.close()
            else:
                await anyio.to_thread.run_sync(conn.close, limiter=self._limiter)

    async def remove_with_hook(
        self,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
    ) -> bool:
        """``remove`` and, when it removed the row, ``hook(context, session)``: one commit.

        The hook gets a sync ``Session`` for a sync engine and an ``AsyncSession`` for an
        async one, both joined to the transaction; if it raises, nothing is committed.
        """
        remove = self._unit_of_work(remove)
        with anyio.CancelScope(shield=True):
            if isinstance(self.engine, AsyncEngine):
                removed = await self._async_remove_with_hook(self.engine, remove, hook, context)
            else:
                removed = await anyio.to_thread.run_sync(
                    self._sync_remove_with_hook, remove, hook, context, limiter=self._limiter
                )
        return removed

    @staticmethod
    async def _async_remove_with_hook(
        engine: AsyncEngine,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
    ) -> bool:
        async with engine.begin() as conn:
            removed = await conn.run_sync(remove)
            if removed and hook is not None:
                async with AsyncSession(bind=conn) as session:
                    result = hook(context, session)
                    if inspect.isawaitable(result):
                        await result
                    await session.flush()
        return removed

    def _sync_remove_with_hook(
        self,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
    ) -> bool:
        assert isinstance(self.engine, Engine)
        with self.engine.begin() as conn:
            if not remove(conn):
                return False
            if hook is not None:
                with Session(bind=conn) as session:
                    result = hook(context, session)
                    if inspect.isawaitable(result):
                        anyio.from_thread.run(_await, result)
                    session.flush()
        return True

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments for a raw psycopg connection to the engine's database."""
        engine = self.engine.sync_engine if isinstance(self.engine, AsyncEngine) else self.engine
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        kwargs = dict(kwargs)
        kwargs.pop("context", None)
        if args:
            kwargs["conninfo"] = args[0]
        return kwargs


def _disable_prepare(driver_connection: Any) -> None:
    if hasattr(driver_connection, "prepare_threshold"):
        driver_connection.prepare_threshold = None


@dataclass(eq=False)
class _Held:
    """An execution this scheduler has picked and not yet handed back."""

    execution: Execution
    #: A worker has taken it from the queue (its handler may be running).
    taken: bool = False
    #: Its version moved under us (revived elsewhere); the outcome will not be committed.
    lost: bool = False
    #: Its outcome is being committed; a heartbeat miss now is not a loss.
    completing: bool = False


@dataclass(eq=False)
class _Starting:
    """A worker waiting for the start of its execution to be recorded."""

    held: _Held
    done: anyio.Event = field(default_factory=anyio.Event)
    #: Set on the waiter that is to write the next batch.
    lead: bool = False
    #: The keys recorded as started in its batch; ``None`` when writing them failed.
    started: set[Key] | None = None


@dataclass(eq=False)
class _Pending:
    """A completion waiting for the completer, and what to do once it is recorded."""

    held: _Held
    completion: Completion
    on_recorded: Callable[[], None] | None


class Runner:
    """The loop of one running scheduler (and the engine of ``run_due``)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.config = config = scheduler.config
        self.clock = scheduler.clock
        self.table = scheduler.table
        self.tasks: dict[str, Task[Any]] = dict(scheduler.tasks)
        self.names: list[str] = sorted(self.tasks)
        self.listeners = list(scheduler.listeners)
        self.interceptors = list(scheduler.interceptors)
        self.db = Database(
            scheduler.engine,
            threads=config.concurrency + 4,
            prepared_statements=config.prepared_statements,
        )
        #: Whether this loop hears NOTIFY wake-ups (PostgreSQL, with ``listen`` on).
        self.listens = config.listen and backend_for(scheduler.engine.dialect).supports_notify
        self.shutdown = ShutdownSignal()
        self.held: dict[Key, _Held] = {}
        self._handler_threads = HandlerThreads()
        self._base_low = max(0, math.floor(config.concurrency * config.pick_lower_fraction))
        self._base_high = max(
            config.concurrency, math.ceil(config.concurrency * config.pick_upper_fraction)
        )
        #: How many times the base lower and upper limits the picker currently keeps: it
        #: doubles (up to _MAX_BOOST) while a backlog of short executions starves the
        #: workers between picks, and falls back to 1 once a pick finds the backlog gone.
        self._boost = 1
        #: Picked executions not yet finished with their handler (queued or running).
        self._outstanding = 0
        self._running = 0
        self._more_due = False
        self._wake = anyio.Event()
        self._stop = anyio.Event()
        self._idle = anyio.Event()
        self._send: MemoryObjectSendStream[_Held]
        self._starting: list[_Starting] = []
        self._starter_busy = False
        self._pending: list[_Pending] = []
        self._pending_ready = anyio.Event()
        self._completer_running = False
        self._listener_stop = threading.Event()
        #: Schedules a callback on the loop from any thread; set once the loop runs.
        self._call_soon: Callable[[Callable[[], None]], object] | None = None

    # --- lifecycle ----------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Register recurring tasks, run every service until ``request_stop``, stop."""
        check_backend(self.scheduler.engine)
        self._call_soon = call_soon_threadsafe()
        await self.sync_clock()
        await self.register_recurring()
        log.info(
            "scheduler %r started: %d task(s), concurrency %d",
            self.config.scheduler_name,
            len(self.tasks),
            self.config.concurrency,
        )
        self._send, receive = anyio.create_memory_object_stream[_Held](math.inf)
        try:
            async with anyio.create_task_group() as services, receive:
                self._completer_running = True
                services.start_soon(self._complete_loop)
                async with anyio.create_task_group() as workers:
                    for _ in range(self.config.concurrency):
                        workers.start_soon(self._worker, receive.clone())
                    services.start_soon(self._pick_loop)
                    services.start_soon(self._heartbeat_loop)
                    services.start_soon(self._maintenance_loop)
                    services.start_soon(self._listen_loop)
                    task_status.started()
                    graceful = False
                    try:
                        await self._stop.wait()
                        graceful = True
                    finally:
                        self.shutdown.set()
                        self._send.close()
                        await self._wind_down(workers.cancel_scope, graceful=graceful)
                await self._release_untaken()
                await self._flush()
                services.cancel_scope.cancel()
        finally:
            self._listener_stop.set()
            self._send.close()
            self._handler_threads.close()
            await self.db.close()
        log.info("scheduler %r stopped", self.config.scheduler_name)

    def _stopping(self) -> bool:
        return self.shutdown.is_set

    def wake_soon(self) -> None:
        """Wake the picker, from any thread: due work was committed in this process."""
        if self._call_soon is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has ended
            self._call_soon(lambda: self._wake.set())

    def request_stop(self) -> None:
        """Stop picking, signal handlers, and let ``run`` wind down."""
        self.shutdown.set()
        self._listener_stop.set()
        self._wake.set()
        self._stop.set()

    async def _wind_down(self, workers: anyio.CancelScope, *, graceful: bool) -> None:
        """Give running handlers up to ``shutdown_max_wait``, then cancel the workers.

        A cancelled worker hands its execution back before it ends (see ``_worker``);
        executions still queued are handed back by ``_release_untaken``.
        """
        with anyio.CancelScope(shield=True):
            grace = self.config.shutdown_max_wait.total_seconds() if graceful else 0
            if self._running and grace:
                log.info("waiting up to %ss for %d execution(s)", grace, self._running)
                with anyio.move_on_after(grace):
                    await self._idle.wait()
            if not self._running:
                return  # the workers hand back what is queued and end by themselves
            for held in self.held.values():
                if held.taken and not held.completing:
                    log.warning(
                        "releasing %s/%s: still running after shutdown_max_wait",
                        held.execution.task_name,
                        held.execution.instance_id,
                    )
            workers.cancel()

    async def _release_untaken(self) -> None:
        """Hand back the executions that were still queued when the workers were cancelled."""
        for held in list(self.held.values()):
            if not held.taken and not held.completing:
                await self._submit(
                    held,
                    Completion(execution=held.execution, kind="release", now=self.clock.now()),
                )

    # --- recurring tasks ----------------------------------------------------------

    async def register_recurring(self) -> None:
        """Upsert each recurring task's row; remove those whose schedule is disabled."""
        now = self.clock.now()
        work: list[Callable[[Connection], Any]] = []
        for task in self.tasks.values():
            if not isinstance(task, RecurringTask):
                continue
            first = task.first_instance(now)
            if first is None:
                work.append(
                    partial(
                        _store.cancel,
                        table=self.table,
                        task_name=task.name,
                        instance_id=RECURRING_INSTANCE_ID,
                    )
                )
            else:
                work.append(
                    partial(
                        _store.register_recurring,
                        table=self.table,
                        instance=first,
                        deterministic=task.schedule.deterministic,
                        now=now,
                    )
                )
        if work:
            await self.db.shielded(lambda conn: [fn(conn) for fn in work])

    # --- picking ------------------------------------------------------------------

    @property
    def _low(self) -> int:
        if self._boost == 1:
            return self._base_low
        # Under a backlog, top up at half the upper limit: the next pick then runs while
        # the workers still have half a pick's worth to do, instead of once they starve.
        return max(self._base_low * self._boost, self._high // 2)

    @property
    def _high(self) -> int:
        return self._base_high * self._boost

    async def _pick_loop(self) -> None:
        poll = self.config.polling_interval.total_seconds()
        while not self._stopping():
            wake = self._wake = anyio.Event()
            if self._outstanding <= self._low:
                try:
                    await self.pick_once(self._high - self._outstanding)
                except Exception:
                    log.exception("picking due executions failed; retrying")
                    await anyio.sleep(_ERROR_BACKOFF)
                    continue
                if self._more_due and self._outstanding <= self._low:
                    continue  # handlers already drained the queue: pick again at once
            if self._more_due and self._outstanding > self._low:
                await wake.wait()  # a worker wakes us when the queue runs low
            else:
                with anyio.move_on_after(poll):
                    await wake.wait()

    async def pick_once(self, limit: int) -> list[Execution]:
        """Pick up to ``limit`` due executions and queue them for the workers."""
        picked = await self.db.shielded(
            partial(
                _store.pick,
                table=self.table,
                names=self.names,
                limit=limit,
                picker=self.config.scheduler_name,
                now=self.clock.now(),
            ),
            autocommit=True,
            lane="picker",
        )
        self._more_due = len(picked) == limit
        if not self._more_due:
            self._boost = 1
        elif self._running < self.config.concurrency and self._outstanding == self._running:
            # The queue ran dry while we picked: keep more in hand next time.
            self._boost = min(self._boost * 2, _MAX_BOOST)
        for execution in picked:
            held = self._hold(execution)
            self._outstanding += 1
            try:
                self._send.send_nowait(held)
            except anyio.ClosedResourceError:  # stopped while picking: hand it back
                self._outstanding -= 1
                await self._submit(
                    held, Completion(execution=execution, kind="release", now=self.clock.now())
                )
        return picked

    def _hold(self, execution: Execution) -> _Held:
        held = _Held(execution)
        self.held[(execution.task_name, execution.instance_id)] = held
        return held

    def _let_go(self, held: _Held) -> None:
        self.held.pop((held.execution.task_name, held.execution.instance_id), None)

    # --- workers ------------------------------------------------------------------

    async def _worker(self, queue: anyio.abc.ObjectReceiveStream[_Held]) -> None:
        async with queue:
            async for held in queue:
                if self._stopping():
                    self._outstanding -= 1
                    await self._submit(
                        held,
                        Completion(execution=held.execution, kind="release", now=self.clock.now()),
                    )
                    continue
                self._running += 1
                held.taken = True
                try:
                    if await self._may_start(held):
                        await self.process(held)
                except anyio.get_cancelled_exc_class():
                    with anyio.CancelScope(shield=True):
                        await self._commit_release(held)
                    raise
                except Exception:
                    log.exception(
                        "unexpected error running %s/%s; it will be revived",
                        held.execution.task_name,
                        held.execution.instance_id,
                    )
                    self._let_go(held)
                finally:
                    self._running -= 1
                    self._outstanding -= 1
                    if self._stopping() and not self._running:
                        self._idle.set()
                    if self._more_due and self._outstanding <= self._low:
                        self._wake.set()

    async def _may_start(self, held: _Held) -> bool:
        """Whether ``held``'s handler may run now, recording its start when that matters.

        A revival counts a failure only for an execution whose start was recorded, so
        that executions merely waiting in a dead process's queue lose nothing. Recording
        costs a statement, so only executions that have been in trouble before (a failure
        or a revival set ``last_failure``) are recorded: a handler that kills its process
        is thus counted from its second crash on, and abandoned after ``max_retries``
        counted crashes like any failing execution.
        """
        if held.execution.last_failure is None:
            return True
        return await self._start(held)

    async def _start(self, held: _Held) -> bool:
        """Record that ``held``'s handler starts; return whether it may run.

        Workers arriving while a record is being written wait and are written together in
        the next statement. An execution taken over by another scheduler is let go, not
        run; when the record cannot be written, the execution is handed back instead.
        """
        waiter = _Starting(held)
        self._starting.append(waiter)
        if self._starter_busy:
            await waiter.done.wait()
            if not waiter.lead:
                return await self._after_start(waiter)
        self._starter_busy = True
        batch, self._starting = self._starting, []
        try:
            started = await self._mark_started([w.held for w in batch])
        finally:
            if self._starting:  # the next batch gathered meanwhile: its first writes it
                self._starting[0].lead = True
                self._starting[0].done.set()
            else:
                self._starter_busy = False
        for other in batch:
            other.started = started
            if other is not waiter:
                other.done.set()
        return await self._after_start(waiter)

    async def _after_start(self, waiter: _Starting) -> bool:
        held = waiter.held
        key = (held.execution.task_name, held.execution.instance_id)
        if waiter.started is None:  # not recorded: hand it back for a later pick
            await self._submit(
                held, Completion(execution=held.execution, kind="release", now=self.clock.now())
            )
            return False
        if key not in waiter.started:
            held.lost = True
            self._version_mismatch(held.execution, "start")
            self._let_go(held)
            return False
        return True

    async def _mark_started(self, batch: list[_Held]) -> set[Key] | None:
        keys = [
            (h.execution.task_name, h.execution.instance_id, h.execution.version) for h in batch
        ]
        try:
            return await self.db.shielded(
                partial(_store.mark_started, table=self.table, held=keys, now=self.clock.now()),
                autocommit=True,
                # one record is written at a time (see _start), so it can keep a connection
                lane="starter" if self._completer_running else None,
            )
        except Exception:
            log.warning(
                "could not record the start of %d execution(s); handing them back",
                len(keys),
                exc_info=True,
            )
            return None

    # --- one execution ------------------------------------------------------------

    async def process(self, held: _Held) -> None:
        """Run one held execution and submit its outcome for commit."""
        execution = held.execution
        task = self.tasks[execution.task_name]
        try:
            payload = task.codec.decode(execution.data)
        except PayloadError as exc:
            await self._submit(
                held,
                Completion(execution=execution, kind="remove", now=self.clock.now()),
                on_recorded=partial(self._log_undecodable, execution, exc),
            )
            return
        context: ExecutionContext[Any] = ExecutionContext(
            payload=payload,
            task_name=execution.task_name,
            instance_id=execution.instance_id,
            execution_time=execution.execution_time,
            consecutive_failures=execution.consecutive_failures,
            priority=execution.priority,
            shutdown=self.shutdown,
            trace_context=execution.trace_context,
        )
        limit = None if isinstance(task, RecurringTask) else self._max_retries(task)
        if limit is not None and execution.consecutive_failures > limit:
            # Spent before this attempt (a failed abandon, or revivals after crashes).
            await self._abandon(task, context, held, None)
            return

        if self.listeners:
            self._notify("on_start", context)
        started = time.monotonic()
        error: BaseException | None = None
        result: Any = None
        try:
            if self.interceptors:
                result = await run_chain(
                    self.interceptors, context, partial(self._call, task, context)
                )
            else:
                result = await self._call(task, context)
        except Exception as exc:
            error = exc
        duration = timedelta(seconds=time.monotonic() - started)
        now = self.clock.now()
        if error is None:
            try:
                completion = self._success(task, execution, result, now, context)
            except Exception as exc:
                error = exc
            else:
                on_recorded = (
                    partial(self._notify, "on_success", context, duration)
                    if self.listeners
                    else None
                )
                await self._submit(held, completion, on_recorded=on_recorded)
                return
        await self._fail(task, context, held, error, now, duration)

    async def _call(self, task: Task[Any], context: ExecutionContext[Any]) -> Any:
        if task.is_async:
            return await task.handler(context)
        result = await self._handler_threads.run(task.handler, context)
        if inspect.isawaitable(result):  # e.g. a sync callable that returns a coroutine
            return await result
        return result

    def _success(
        self,
        task: Task[Any],
        execution: Execution,
        result: Any,
        now: datetime,
        context: ExecutionContext[Any],
    ) -> Completion:
        scheduled = context.scheduled
        if isinstance(task, RecurringTask):
            if isinstance(task.schedule, Disabled):
                return Completion(execution=execution, kind="remove", now=now, scheduled=scheduled)
            at = task.schedule.next_run(scheduled_at=execution.execution_time, completed_at=now)
            data = execution.data if result is None else task.codec.encode(result)
            return Completion(
                execution=execution, kind="succeed", now=now, at=at, data=data, scheduled=scheduled
            )
        if task.kind == "custom":
            if result is None:
                return Completion(execution=execution, kind="remove", now=now, scheduled=scheduled)
            if not isinstance(result, NextAt):
                raise TypeError(
                    f"custom task {task.name!r} returned {result!r}; return NextAt(at, payload) "
                    "to run again or None to finish"
                )
            data = execution.data if result.payload is KEEP else task.codec.encode(result.payload)
            return Completion(
                execution=execution,
                kind="succeed",
                now=now,
                at=result.at,
                data=data,
                scheduled=scheduled,
            )
        if isinstance(result, NextAt):
            raise TypeError(
                f"one-time task {task.name!r} returned NextAt; only custom tasks reschedule "
                "themselves (define it with @custom)"
            )
        return Completion(execution=execution, kind="remove", now=now, scheduled=scheduled)

    async def _fail(
        self,
        task: Task[Any],
        context: ExecutionContext[Any],
        held: _Held,
        error: BaseException,
        now: datetime,
        duration: timedelta,
    ) -> None:
        execution = held.execution
        failures = execution.consecutive_failures + 1
        limit = self._max_retries(task)
        retry_at = now + self.config.retry_delay(failures)
        if isinstance(task, RecurringTask):
            if isinstance(task.schedule, Disabled):
                limit = 0  # nothing to retry into: remove it
            else:
                regular = task.schedule.next_run(
                    scheduled_at=execution.execution_time, completed_at=now
                )
                retry_at = min(retry_at, regular)
                limit = None  # a recurring task is never abandoned; its schedule goes on
        abandon = limit is not None and failures > limit
        log.error(
            "execution %s/%s failed (consecutive failures: %d)%s",
            execution.task_name,
            execution.instance_id,
            failures,
            "" if abandon else f"; retrying at {retry_at.isoformat()}",
            exc_info=error,
        )
        self._notify("on_failure", context, error, duration)
        if abandon:
            await self._abandon(task, context, held, error)
            return
        await self._submit(
            held,
            Completion(execution=execution, kind="fail", now=now, at=retry_at, failures=failures),
        )

    async def _abandon(
        self,
        task: Task[Any],
        context: ExecutionContext[Any],
        held: _Held,
        error: BaseException | None,
    ) -> None:
        execution = held.execution
        held.completing = True
        failures = execution.consecutive_failures + (0 if error is None else 1)
        remove = partial(_store.remove, table=self.table, execution=execution)
        try:
            removed = await self.db.remove_with_hook(remove, task.on_abandon, context)
        except Exception:
            now = self.clock.now()
            failures += 1  # each failed attempt to abandon backs off further
            retry_at = now + self.config.retry_delay(failures)
            log.exception(
                "on_abandon of %s/%s failed; the execution is kept and abandoning it will be "
                "retried at %s",
                execution.task_name,
                execution.instance_id,
                retry_at.isoformat(),
            )
            await self._submit(
                held,
                Completion(
                    execution=execution, kind="fail", now=now, at=retry_at, failures=failures
                ),
            )
            return
        self._let_go(held)
        if not removed:
            self._version_mismatch(execution, "abandon")
            return
        log.warning(
            "abandoned %s/%s after %d consecutive failure(s)",
            execution.task_name,
            execution.instance_id,
            failures,
        )
        self._notify("on_abandon", context, error)

    def _log_undecodable(self, execution: Execution, error: PayloadError) -> None:
        log.error(
            "removed %s/%s: its payload does not decode (%s); raw payload: %r",
            execution.task_name,
            execution.instance_id,
            error,
            execution.data,
        )

    def _max_retries(self, task: Task[Any]) -> int | None:
        return task.max_retries if task.max_retries is not None else self.config.max_retries

    def _version_mismatch(self, execution: Execution, outcome: str) -> None:
        log.warning(
            "version mismatch: %s of %s/%s (version %d) not recorded; another scheduler "
            "took it over (it was probably revived as dead)",
            outcome,
            execution.task_name,
            execution.instance_id,
            execution.version,
        )

    # --- completing ---------------------------------------------------------------

    async def _submit(
        self,
        held: _Held,
        completion: Completion,
        on_recorded: Callable[[], None] | None = None,
    ) -> None:
        """Hand an outcome to the completer (or commit it at once when none runs)."""
        held.completing = True
        pending = _Pending(held, completion, on_recorded)
        if self._completer_running:
            self._pending.append(pending)
            self._pending_ready.set()
            return
        await self._commit([pending])

    async def _commit_release(self, held: _Held) -> None:
        if not held.completing:
            completion = Completion(execution=held.execution, kind="release", now=self.clock.now())
            held.completing = True
            await self._commit([_Pending(held, completion, None)])

    async def _complete_loop(self) -> None:
        while True:
            await self._pending_ready.wait()
            # One turn of the loop first: workers already able to run finish and join
            # this batch, so a busy scheduler commits fewer, larger batches.
            await anyio.lowlevel.checkpoint()
            self._pending_ready = anyio.Event()
            batch, self._pending = self._pending, []
            if batch:
                await self._commit(batch, lane="completer")

    async def _flush(self) -> None:
        """Commit what is still pending; the completer stops after this."""
        self._completer_running = False
        batch, self._pending = self._pending, []
        if batch:
            await self._commit(batch)

    async def _commit(self, batch: list[_Pending], lane: str | None = None) -> None:
        completions = [p.completion for p in batch]
        # A batch of plain removals is one DELETE: it needs no transaction around it.
        single = all(c.kind == "remove" and not c.scheduled for c in completions)
        try:
            recorded = await self.db.shielded(
                partial(_store.complete, table=self.table, batch=completions),
                autocommit=single,
                lane=None if lane is None else f"{lane}{'-autocommit' if single else ''}",
            )
        except Exception:
            if len(batch) == 1:
                recorded = await self._retry_commit(completions[0])
            else:  # find the one that fails, commit the others
                for pending in batch:
                    await self._commit([pending], lane=lane)
                return
        woke = False
        for pending, ok in zip(batch, recorded, strict=True):
            completion = pending.completion
            self._let_go(pending.held)
            if not ok:
                if completion.kind != "release" or not pending.held.lost:
                    self._version_mismatch(completion.execution, completion.kind)
                continue
            if pending.on_recorded is not None:
                pending.on_recorded()
            if (completion.at is not None and completion.at <= completion.now) or any(
                i.execution_time is None or i.execution_time <= completion.now
                for i in completion.scheduled
            ):
                woke = True
        if woke:
            self._wake.set()

    async def _retry_commit(self, completion: Completion) -> list[bool]:
        """Retry committing one outcome with backoff, for as long as the row cannot have
        been revived elsewhere (``dead_after``); once stopping, do not wait."""
        execution = completion.execution
        give_up = time.monotonic() + self.config.dead_after.total_seconds()
        delay = 0.1
        attempt = 1
        error: BaseException | None = sys.exc_info()[1]
        while True:
            if self._stopping() or time.monotonic() + delay > give_up:
                log.error(
                    "could not record the outcome of %s/%s (%d attempt(s)); it will be revived",
                    execution.task_name,
                    execution.instance_id,
                    attempt,
                    exc_info=error,
                )
                return [False]
            log.warning(
                "could not record the outcome of %s/%s; retrying in %.1fs",
                execution.task_name,
                execution.instance_id,
                delay,
                exc_info=error,
            )
            await anyio.sleep(delay)  # a stop may cut this short: the row is then revived
            attempt += 1
            try:
                return await self.db.shielded(
                    partial(_store.complete, table=self.table, batch=[completion])
                )
            except Exception as exc:
                error = exc
                delay = min(delay * 2, 5.0)

    # --- heartbeats -----------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval.total_seconds()
        while True:
            await anyio.sleep(interval)
            await self.heartbeat_once()

    async def heartbeat_once(self) -> None:
        """Refresh the heartbeat of every held execution; flag the ones lost elsewhere."""
        snapshot = [h for h in self.held.values() if not h.lost and not h.completing]
        if not snapshot:
            return
        keys = [
            (h.execution.task_name, h.execution.instance_id, h.execution.version) for h in snapshot
        ]
        try:
            refreshed = await self.db.shielded(
                partial(_store.heartbeat, table=self.table, held=keys, now=self.clock.now()),
                autocommit=True,
            )
        except Exception:
            log.warning("heartbeat of %d execution(s) failed; retrying", len(keys), exc_info=True)
            return
        for held in snapshot:
            key = (held.execution.task_name, held.execution.instance_id)
            if key not in refreshed and not held.completing and self.held.get(key) is held:
                held.lost = True
                self._version_mismatch(held.execution, "heartbeat")

    # --- maintenance ----------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        interval = self.config.revive_interval.total_seconds()
        while True:
            try:
                await self.sync_clock()
                await self.revive_once()
                if self.names:  # with no tasks, every row would look orphaned
                    await self.delete_orphans_once()
            except Exception:
                log.warning("maintenance failed; retrying", exc_info=True)
            await anyio.sleep(interval)

    async def sync_clock(self) -> None:
        """Measure a ``DatabaseClock``'s offset when it is due (a no-op for others)."""
        clock = self.clock
        if isinstance(clock, DatabaseClock) and clock.due():
            offset = await self.db.shielded(clock.measure)
            if abs(offset) > timedelta(seconds=1):
                log.info(
                    "this machine's clock is %+.3fs off the database's; corrected",
                    -offset.total_seconds(),
                )

    async def revive_once(self) -> list[Execution]:
        """Make executions whose heartbeat went stale due again; return them as found."""
        now = self.clock.now()
        revived = await self.db.shielded(
            partial(
                _store.revive, table=self.table, threshold=now - self.config.dead_after, now=now
            ),
            autocommit=True,
        )
        for execution in revived:
            log.warning(
                "revived dead execution %s/%s (picked by %r, last heartbeat %s)",
                execution.task_name,
                execution.instance_id,
                execution.picked_by,
                execution.last_heartbeat.isoformat() if execution.last_heartbeat else "never",
            )
            self._notify("on_dead_execution", execution)
        if revived:
            self._wake.set()
        return revived

    async def delete_orphans_once(self) -> list[tuple[str, str, Any]]:
        """Delete rows of unknown tasks older than ``delete_unresolved_after``."""
        if not self.names:
            raise RuntimeError(
                "this scheduler registers no tasks, so every task name would look orphaned; "
                "delete orphans from a scheduler that registers the application's tasks"
            )
        threshold = self.clock.now() - self.config.delete_unresolved_after
        deleted = await self.db.shielded(
            partial(_store.delete_orphans, table=self.table, known=self.names, threshold=threshold),
            autocommit=True,
        )
        for name, instance, data in deleted:
            log.warning(
                "deleted orphan %s/%s: no task of that name is registered here and it was "
                "due more than %s ago; raw payload: %r",
                name,
                instance,
                format_duration(self.config.delete_unresolved_after),
                data,
            )
        return deleted

    # --- wake-ups -------------------------------------------------------------------

    async def _listen_loop(self) -> None:
        """Keep a LISTEN connection; when it fails, poll until it is back."""
        if not self.listens:
            return
        backoff = 0.5
        while not self._stopping():
            connected = threading.Event()
            try:
                await anyio.to_thread.run_sync(
                    self._listen_blocking, connected, abandon_on_cancel=True
                )
            except Exception:
                log.warning(
                    "the LISTEN connection failed; polling every %s until it is back",
                    self.config.polling_interval,
                    exc_info=True,
                )
            if connected.is_set():
                backoff = 0.5
            if self._stopping():
                return
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def _listen_blocking(self, connected: threading.Event) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.db.connect_args(), autocommit=True) as conn:
            if not self.config.prepared_statements:
                conn.prepare_threshold = None
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel(self.table))))
            connected.set()
            # Anything scheduled while nobody was listening is picked up now.
            anyio.from_thread.run_sync(self._wake_up)
            while not self._listener_stop.is_set():
                for _ in conn.notifies(timeout=_LISTEN_TICK, stop_after=1):
                    if not self._listener_stop.is_set():
                        anyio.from_thread.run_sync(self._on_notify)

    def _wake_up(self) -> None:
        self._wake.set()

    def _on_notify(self) -> None:
        if self._outstanding <= self._low:
            self._wake.set()

    # --- testing ------------------------------------------------------------------

    async def run_due(self, *, max_executions: int = 10_000) -> int:
        """Run every due execution to completion, in pick order, and return how many ran."""
        try:
            return await self._run_due(max_executions)
        finally:
            self._handler_threads.close()

    async def _run_due(self, max_executions: int) -> int:
        await self.register_recurring()
        ran = 0
        while True:
            batch = await self.db.shielded(
                partial(
                    _store.pick,
                    table=self.table,
                    names=self.names,
                    limit=self.config.concurrency,
                    picker=self.config.scheduler_name,
                    now=self.clock.now(),
                )
            )
            if not batch:
                return ran
            for execution in batch:
                held = self._hold(execution)
                if await self._may_start(held):
                    await self.process(held)
            ran += len(batch)
            if ran > max_executions:
                raise RuntimeError(
                    f"run_due ran more than {max_executions} executions; is a task "
                    "rescheduling itself to run now forever?"
                )

    # --- listeners ----------------------------------------------------------------

    def _notify(self, hook: str, *args: Any) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, hook)(*args)
            except Exception:
                log.exception("listener %r failed in %s", listener, hook)
