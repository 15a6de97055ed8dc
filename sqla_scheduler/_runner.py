"""The execution loop: pick, run, heartbeat, complete, retry, revive, stop.

One :class:`Runner` lives for one ``Scheduler.run()``. Its services are small loops around
``*_once`` methods that tests can call directly:

- the picker fills free permits with due executions (``pick_once``);
- each execution runs its handler, then commits its outcome (``process``);
- the heartbeater keeps held executions alive (``heartbeat_once``);
- maintenance revives dead executions and deletes old orphans (``revive_once``,
  ``delete_orphans_once``).

Database work goes through :class:`Database`, which runs each unit of work (a sync function
of a ``Connection`` from ``_store``) in a worker thread for a sync engine or through
``run_sync`` for an async one. Nothing here imports asyncio.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread
import sniffio
from sqlalchemy import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from sqla_scheduler import _store
from sqla_scheduler.context import ExecutionContext, ShutdownSignal
from sqla_scheduler.exceptions import PayloadError
from sqla_scheduler.executions import Execution
from sqla_scheduler.schedules import Disabled
from sqla_scheduler.tasks import KEEP, NextAt, RecurringTask, Task

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = ["Database", "Runner"]

log = logging.getLogger("sqla_scheduler")

T = TypeVar("T")
Key = tuple[str, str]

#: How long the picker backs off after the database failed it.
_ERROR_BACKOFF = 1.0


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
    """Runs units of work on the scheduler's engine, in a transaction each."""

    def __init__(self, engine: Engine | AsyncEngine, threads: int) -> None:
        self.engine = engine
        self._limiter = anyio.CapacityLimiter(threads)

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a transaction of its own and commit."""
        if isinstance(self.engine, AsyncEngine):
            async with self.engine.begin() as conn:
                result = await conn.run_sync(fn)
            return result
        return await anyio.to_thread.run_sync(self._sync, fn, limiter=self._limiter)

    async def shielded(self, fn: Callable[[Connection], T]) -> T:
        """:meth:`run`, shielded from cancellation: a commit is never cut in half."""
        with anyio.CancelScope(shield=True):
            result = await self.run(fn)
        return result

    def _sync(self, fn: Callable[[Connection], T]) -> T:
        assert isinstance(self.engine, Engine)
        with self.engine.begin() as conn:
            return fn(conn)

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


@dataclass(eq=False)
class _Held:
    """An execution this scheduler has picked and not yet handed back."""

    execution: Execution
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    #: Its version moved under us (revived elsewhere); the outcome will not be committed.
    lost: bool = False
    #: Its outcome is being committed; a heartbeat miss now is not a loss.
    completing: bool = False


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a success commits: remove the row, or run again at ``at`` with ``data``."""

    remove: bool
    at: datetime | None = None
    data: Any = None


class Runner:
    """The loop of one running scheduler (and the engine of ``run_due``)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.config = scheduler.config
        self.clock = scheduler.clock
        self.table = scheduler.table
        self.tasks: dict[str, Task[Any]] = dict(scheduler.tasks)
        self.names: list[str] = sorted(self.tasks)
        self.listeners = list(scheduler.listeners)
        self.db = Database(scheduler.engine, threads=self.config.concurrency + 4)
        self.shutdown = ShutdownSignal()
        self.held: dict[Key, _Held] = {}
        self._handlers = anyio.CapacityLimiter(self.config.concurrency)
        self._wake = anyio.Event()
        self._stop = anyio.Event()
        self._drained = anyio.Event()
        self._stopping = False
        self._more_due = False
        self._executions: anyio.abc.TaskGroup | None = None

    # --- lifecycle ----------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Register recurring tasks, run every service until :meth:`request_stop`, stop."""
        check_backend(self.scheduler.engine)
        await self.register_recurring()
        log.info(
            "scheduler %r started: %d task(s), concurrency %d",
            self.config.scheduler_name,
            len(self.tasks),
            self.config.concurrency,
        )
        async with anyio.create_task_group() as services:
            async with anyio.create_task_group() as executions:
                self._executions = executions
                services.start_soon(self._pick_loop)
                services.start_soon(self._heartbeat_loop)
                services.start_soon(self._maintenance_loop)
                task_status.started()
                await self._stop.wait()
                await self._wind_down()
            services.cancel_scope.cancel()
        log.info("scheduler %r stopped", self.config.scheduler_name)

    def request_stop(self) -> None:
        """Stop picking, signal handlers, and let :meth:`run` wind down."""
        self._stopping = True
        self.shutdown.set()
        self._wake.set()
        self._stop.set()

    async def _wind_down(self) -> None:
        grace = self.config.shutdown_max_wait.total_seconds()
        if self.held:
            log.info("waiting up to %ss for %d execution(s)", grace, len(self.held))
            with anyio.move_on_after(grace):
                await self._drained.wait()
        for held in list(self.held.values()):
            log.warning(
                "releasing %s/%s: still running after shutdown_max_wait",
                held.execution.task_name,
                held.execution.instance_id,
            )
            held.scope.cancel()

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
                        instance_id="recurring",
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

    async def _pick_loop(self) -> None:
        poll = self.config.polling_interval.total_seconds()
        while not self._stopping:
            wake = self._wake = anyio.Event()
            free = self.config.concurrency - len(self.held)
            if free > 0:
                try:
                    picked = await self.pick_once(free)
                except Exception:
                    log.exception("picking due executions failed; retrying")
                    await anyio.sleep(_ERROR_BACKOFF)
                    continue
                if self._more_due:
                    continue
                del picked
            with anyio.move_on_after(poll):
                await wake.wait()

    async def pick_once(self, limit: int) -> list[Execution]:
        """Pick up to ``limit`` due executions and start running them."""
        picked = await self.db.shielded(
            partial(
                _store.pick,
                table=self.table,
                names=self.names,
                limit=limit,
                picker=self.config.scheduler_name,
                now=self.clock.now(),
            )
        )
        self._more_due = len(picked) == limit
        assert self._executions is not None
        for execution in picked:
            held = self._hold(execution)
            self._executions.start_soon(self._run_held, held)
        return picked

    def _hold(self, execution: Execution) -> _Held:
        held = _Held(execution)
        self.held[(execution.task_name, execution.instance_id)] = held
        return held

    def _let_go(self, held: _Held, *, woke: bool) -> None:
        self.held.pop((held.execution.task_name, held.execution.instance_id), None)
        if woke or self._more_due:
            self._wake.set()
        if self._stopping and not self.held:
            self._drained.set()

    async def _run_held(self, held: _Held) -> None:
        woke = False
        try:
            woke = await self.process(held)
        except Exception:
            log.exception(
                "unexpected error completing %s/%s; it will be revived",
                held.execution.task_name,
                held.execution.instance_id,
            )
        finally:
            self._let_go(held, woke=woke)

    # --- one execution ------------------------------------------------------------

    async def process(self, held: _Held) -> bool:
        """Run one held execution and commit its outcome; return whether due work resulted."""
        execution = held.execution
        task = self.tasks[execution.task_name]
        try:
            payload = task.codec.decode(execution.data)
        except PayloadError as exc:
            await self._drop_undecodable(execution, exc)
            return False
        context: ExecutionContext[Any] = ExecutionContext(
            payload=payload,
            task_name=execution.task_name,
            instance_id=execution.instance_id,
            execution_time=execution.execution_time,
            consecutive_failures=execution.consecutive_failures,
            priority=execution.priority,
            shutdown=self.shutdown,
        )
        limit = self._max_retries(task)
        if limit is not None and execution.consecutive_failures > limit:
            # Spent before this attempt (a failed abandon, or revivals after crashes).
            await self._abandon(task, context, held, None)
            return False

        self._notify("on_start", context)
        started = time.monotonic()
        error: BaseException | None = None
        result: Any = None
        with held.scope:
            try:
                result = await self._call(task, context)
            except Exception as exc:
                error = exc
        if held.scope.cancelled_caught:
            await self._release(held)
            return False
        duration = timedelta(seconds=time.monotonic() - started)
        now = self.clock.now()
        if error is None:
            try:
                plan = self._plan_success(task, execution, result, now)
            except Exception as exc:
                error = exc
            else:
                return await self._succeed(held, context, plan, now, duration)
        return await self._fail(task, context, held, error, now, duration)

    async def _call(self, task: Task[Any], context: ExecutionContext[Any]) -> Any:
        if task.is_async:
            return await task.handler(context)
        result = await anyio.to_thread.run_sync(
            task.handler, context, limiter=self._handlers, abandon_on_cancel=True
        )
        if inspect.isawaitable(result):  # e.g. a sync callable that returns a coroutine
            return await result
        return result

    def _plan_success(
        self, task: Task[Any], execution: Execution, result: Any, now: datetime
    ) -> _Plan:
        if isinstance(task, RecurringTask):
            if isinstance(task.schedule, Disabled):
                return _Plan(remove=True)
            at = task.schedule.next_run(scheduled_at=execution.execution_time, completed_at=now)
            data = execution.data if result is None else task.codec.encode(result)
            return _Plan(remove=False, at=at, data=data)
        if task.kind == "custom":
            if result is None:
                return _Plan(remove=True)
            if not isinstance(result, NextAt):
                raise TypeError(
                    f"custom task {task.name!r} returned {result!r}; return NextAt(at, payload) "
                    "to run again or None to finish"
                )
            data = execution.data if result.payload is KEEP else task.codec.encode(result.payload)
            return _Plan(remove=False, at=result.at, data=data)
        if isinstance(result, NextAt):
            raise TypeError(
                f"one-time task {task.name!r} returned NextAt; only custom tasks reschedule "
                "themselves (define it with @custom)"
            )
        return _Plan(remove=True)

    async def _succeed(
        self,
        held: _Held,
        context: ExecutionContext[Any],
        plan: _Plan,
        now: datetime,
        duration: timedelta,
    ) -> bool:
        execution = held.execution
        scheduled = context.scheduled

        def commit(conn: Connection) -> bool:
            if plan.remove:
                ok = _store.remove(conn, self.table, execution)
            else:
                assert plan.at is not None
                ok = _store.succeed(
                    conn, self.table, execution, next_time=plan.at, data=plan.data, now=now
                )
            if ok and scheduled:
                _store.insert_instances(conn, self.table, scheduled, now)
            return ok

        held.completing = True
        if not await self.db.shielded(commit):
            self._version_mismatch(execution, "success")
            return False
        self._notify("on_success", context, duration)
        due_again = plan.at is not None and plan.at <= now
        return due_again or any(
            i.execution_time is None or i.execution_time <= now for i in scheduled
        )

    async def _fail(
        self,
        task: Task[Any],
        context: ExecutionContext[Any],
        held: _Held,
        error: BaseException,
        now: datetime,
        duration: timedelta,
    ) -> bool:
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
        log.error(
            "execution %s/%s failed (consecutive failures: %d)%s",
            execution.task_name,
            execution.instance_id,
            failures,
            ""
            if limit is not None and failures > limit
            else f"; retrying at {retry_at.isoformat()}",
            exc_info=error,
        )
        self._notify("on_failure", context, error, duration)
        if limit is not None and failures > limit:
            await self._abandon(task, context, held, error)
            return False
        held.completing = True
        ok = await self.db.shielded(
            partial(
                _store.fail,
                table=self.table,
                execution=execution,
                retry_at=retry_at,
                failures=failures,
                now=now,
            )
        )
        if not ok:
            self._version_mismatch(execution, "failure")
        return ok and retry_at <= now

    async def _abandon(
        self,
        task: Task[Any],
        context: ExecutionContext[Any],
        held: _Held,
        error: BaseException | None,
    ) -> None:
        execution = held.execution
        held.completing = True
        remove = partial(_store.remove, table=self.table, execution=execution)
        try:
            removed = await self.db.remove_with_hook(remove, task.on_abandon, context)
        except Exception:
            failures = execution.consecutive_failures + (0 if error is None else 1)
            retry_at = self.clock.now() + self.config.retry_delay(max(failures, 1))
            log.exception(
                "on_abandon of %s/%s failed; the execution is kept and abandoning it will be "
                "retried at %s",
                execution.task_name,
                execution.instance_id,
                retry_at.isoformat(),
            )
            await self.db.shielded(
                partial(
                    _store.fail,
                    table=self.table,
                    execution=execution,
                    retry_at=retry_at,
                    failures=failures,
                    now=self.clock.now(),
                )
            )
            return
        if not removed:
            self._version_mismatch(execution, "abandon")
            return
        log.warning(
            "abandoned %s/%s after %d consecutive failure(s)",
            execution.task_name,
            execution.instance_id,
            execution.consecutive_failures + (0 if error is None else 1),
        )
        self._notify("on_abandon", context, error)

    async def _drop_undecodable(self, execution: Execution, error: PayloadError) -> None:
        removed = await self.db.shielded(
            partial(_store.remove, table=self.table, execution=execution)
        )
        if removed:
            log.error(
                "removed %s/%s: its payload does not decode (%s); raw payload: %r",
                execution.task_name,
                execution.instance_id,
                error,
                execution.data,
            )

    async def _release(self, held: _Held) -> None:
        execution = held.execution
        held.completing = True
        if not await self.db.shielded(
            partial(_store.release, table=self.table, execution=execution)
        ):
            self._version_mismatch(execution, "release")

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
                partial(_store.heartbeat, table=self.table, held=keys, now=self.clock.now())
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
                await self.revive_once()
                await self.delete_orphans_once()
            except Exception:
                log.warning("maintenance failed; retrying", exc_info=True)
            await anyio.sleep(interval)

    async def revive_once(self) -> list[Execution]:
        """Make executions whose heartbeat went stale due again; return them as found."""
        now = self.clock.now()
        revived = await self.db.shielded(
            partial(
                _store.revive, table=self.table, threshold=now - self.config.dead_after, now=now
            )
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
        threshold = self.clock.now() - self.config.delete_unresolved_after
        deleted = await self.db.shielded(
            partial(_store.delete_orphans, table=self.table, known=self.names, threshold=threshold)
        )
        for name, instance, data in deleted:
            log.warning(
                "deleted orphan %s/%s (no such task registered for %s); raw payload: %r",
                name,
                instance,
                self.config.delete_unresolved_after,
                data,
            )
        return deleted

    # --- testing ------------------------------------------------------------------

    async def run_due(self, *, max_executions: int = 10_000) -> int:
        """Run every due execution to completion, in pick order, and return how many ran."""
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
                try:
                    await self.process(held)
                finally:
                    self._let_go(held, woke=False)
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
