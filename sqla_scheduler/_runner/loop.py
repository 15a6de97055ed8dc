"""The loop of one running scheduler: the services in one task group, and the workers.

``Runner`` builds the services from plain parts (engine, table, tasks, config, clock,
listeners, interceptors) and runs them: the picker feeds a queue, ``concurrency``
workers take from it and hand each execution's outcome to the completer, the
heartbeater, maintenance and (on PostgreSQL) the listener run beside them. ``run_due``
runs the same per-execution code without the loop, for tests.

Stopping: no new picks; running handlers get ``shutdown_max_wait``; whatever is still
held after that is released for other schedulers, and every outcome is committed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from sqlalchemy import Connection, Engine, Table
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database, check_backend
from sqla_scheduler._dialects import backend_for
from sqla_scheduler._execution import RECURRING_INSTANCE_ID, Execution
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.completer import Completer
from sqla_scheduler._runner.executor import Executor
from sqla_scheduler._runner.heartbeater import Heartbeater
from sqla_scheduler._runner.held import Held, HeldSet
from sqla_scheduler._runner.maintenance import Maintenance
from sqla_scheduler._runner.outcomes import Outcome
from sqla_scheduler._runner.picker import Picker
from sqla_scheduler._runner.waker import Listener, Waker
from sqla_scheduler._threads import HandlerThreads
from sqla_scheduler.clock import Clock
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.context import ShutdownSignal
from sqla_scheduler.interceptors import ExecutionInterceptor
from sqla_scheduler.listeners import SchedulerListener
from sqla_scheduler.tasks import RecurringTask, Task

__all__ = ["Runner"]

log = logging.getLogger("sqla_scheduler")


class Runner:
    """The loop of one running scheduler (and the engine of ``run_due``)."""

    def __init__(
        self,
        *,
        engine: Engine | AsyncEngine,
        table: Table,
        tasks: Mapping[str, Task[Any]],
        config: SchedulerConfig,
        clock: Clock,
        listeners: Iterable[SchedulerListener] = (),
        interceptors: Iterable[ExecutionInterceptor] = (),
    ) -> None:
        self.config = config
        self.clock = clock
        self.table = table
        self.tasks: dict[str, Task[Any]] = dict(tasks)
        names = sorted(self.tasks)
        listeners = list(listeners)
        self.db = db = Database(
            engine, threads=config.concurrency + 4, prepared_statements=config.prepared_statements
        )
        self.shutdown = ShutdownSignal()
        self.held = held = HeldSet()
        self.waker = waker = Waker()
        self._threads = HandlerThreads()
        self.picker = Picker(
            db=db, table=table, clock=clock, names=names, config=config, held=held, waker=waker
        )
        self.executor = Executor(
            db=db,
            table=table,
            clock=clock,
            tasks=self.tasks,
            config=config,
            shutdown=self.shutdown,
            threads=self._threads,
            listeners=listeners,
            interceptors=list(interceptors),
        )
        self.completer = Completer(
            db=db,
            table=table,
            clock=clock,
            config=config,
            held=held,
            waker=waker,
            shutdown=self.shutdown,
            listeners=listeners,
        )
        self.heartbeater = Heartbeater(
            db=db, table=table, clock=clock, held=held, interval=config.heartbeat_interval
        )
        self.maintenance = Maintenance(
            db=db,
            table=table,
            clock=clock,
            names=names,
            config=config,
            waker=waker,
            listeners=listeners,
        )
        #: Hears NOTIFY wake-ups: on PostgreSQL, with ``listen`` on; ``None`` otherwise.
        self.listener: Listener | None = None
        if config.listen and backend_for(engine.dialect).supports_notify:
            self.listener = Listener(
                db,
                table,
                waker,
                wants_work=self.picker.wants_work,
                polling_interval=config.polling_interval,
                prepared_statements=config.prepared_statements,
            )
        self._stop = anyio.Event()
        self._idle = anyio.Event()
        self._send: MemoryObjectSendStream[Held] | None = None

    @property
    def listens(self) -> bool:
        """Whether this loop hears NOTIFY wake-ups."""
        return self.listener is not None

    def wake_soon(self) -> None:
        """Wake the picker, from any thread: due work was committed in this process."""
        self.waker.wake_soon()

    def request_stop(self) -> None:
        """Stop picking, signal handlers, and let ``run`` wind down."""
        self.shutdown.set()
        if self.listener is not None:
            self.listener.stop()
        self.waker.wake()
        self._stop.set()

    def _stopping(self) -> bool:
        return self.shutdown.is_set

    # --- the loop ---------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Register recurring tasks, run every service until ``request_stop``, stop."""
        check_backend(self.db.engine)
        self.waker.bind()
        await self.maintenance.sync_clock()
        await self.register_recurring()
        log.info(
            "scheduler %r started: %d task(s), concurrency %d",
            self.config.scheduler_name,
            len(self.tasks),
            self.config.concurrency,
        )
        self._send, receive = anyio.create_memory_object_stream[Held](math.inf)
        try:
            async with anyio.create_task_group() as services, receive:
                services.start_soon(self.completer.run)
                async with anyio.create_task_group() as workers:
                    for _ in range(self.config.concurrency):
                        workers.start_soon(self._worker, receive.clone())
                    services.start_soon(self.picker.run, self._deliver, self._stopping)
                    services.start_soon(self.heartbeater.run)
                    services.start_soon(self.maintenance.run)
                    if self.listener is not None:
                        services.start_soon(self.listener.run)
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
                await self.completer.flush()
                services.cancel_scope.cancel()
        finally:
            if self.listener is not None:
                self.listener.stop()
            self._send.close()
            await self.close()
        log.info("scheduler %r stopped", self.config.scheduler_name)

    async def _deliver(self, picked: list[Held]) -> None:
        """Queue picked executions for the workers; hand them back once stopped."""
        assert self._send is not None
        for held in picked:
            try:
                self._send.send_nowait(held)
            except anyio.ClosedResourceError:  # stopped while picking
                self.held.outstanding -= 1
                await self._finish(self._release(held))

    async def _worker(self, queue: anyio.abc.ObjectReceiveStream[Held]) -> None:
        async with queue:
            async for held in queue:
                if self._stopping():
                    self.held.outstanding -= 1
                    await self._finish(self._release(held))
                    continue
                await self._work(held)

    async def _work(self, held: Held) -> None:
        """Run one held execution and hand its outcome on: the loop's and ``run_due``'s."""
        self.held.running += 1
        held.taken = True
        try:
            await self._finish(await self.executor.run_once(held))
        except anyio.get_cancelled_exc_class():
            if not held.completing:  # cancelled by the wind-down: hand it back now
                self.completer.submit(self._release(held))
                with anyio.CancelScope(shield=True):
                    await self.completer.run_once()
            raise
        except Exception:
            log.exception("unexpected error running %s; it will be revived", held.label)
            self.held.let_go(held)
        finally:
            self.held.running -= 1
            self.held.outstanding -= 1
            if self._stopping() and not self.held.running:
                self._idle.set()
            if self.picker.wants_more():
                self.waker.wake()

    async def _finish(self, outcome: Outcome) -> None:
        """Hand ``outcome`` to the completer; commit it now when the completer's loop
        does not run (``run_due``, or after the wind-down)."""
        self.completer.submit(outcome)
        if not self.completer.batching:
            await self.completer.flush()

    def _release(self, held: Held) -> Outcome:
        return Outcome(held=held, decision=outcomes.release(held.execution, self.clock.now()))

    async def _wind_down(self, workers: anyio.CancelScope, *, graceful: bool) -> None:
        """Give running handlers up to ``shutdown_max_wait``, then cancel the workers.

        A cancelled worker hands its execution back before it ends (see ``_work``);
        executions still queued are handed back by ``_release_untaken``.
        """
        with anyio.CancelScope(shield=True):
            grace = self.config.shutdown_max_wait.total_seconds() if graceful else 0
            if self.held.running and grace:
                log.info("waiting up to %ss for %d execution(s)", grace, self.held.running)
                with anyio.move_on_after(grace):
                    await self._idle.wait()
            if not self.held.running:
                return  # the workers hand back what is queued and end by themselves
            for held in self.held:
                if held.taken and not held.completing:
                    log.warning("releasing %s: still running after shutdown_max_wait", held.label)
            workers.cancel()

    async def _release_untaken(self) -> None:
        """Hand back the executions that were still queued when the workers were cancelled."""
        for held in self.held:
            if not held.taken and not held.completing:
                self.completer.submit(self._release(held))

    # --- before the loop, and without it --------------------------------------------

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

    async def run_due(self, *, max_executions: int = 10_000) -> int:
        """Run every due execution to completion, in pick order, and return how many ran."""
        try:
            await self.register_recurring()
            ran = 0
            while True:
                batch = await self.picker.run_once(self.config.concurrency)
                if not batch:
                    return ran
                for held in batch:
                    await self._work(held)
                ran += len(batch)
                if ran > max_executions:
                    raise RuntimeError(
                        f"run_due ran more than {max_executions} executions; is a task "
                        "rescheduling itself to run now forever?"
                    )
        finally:
            await self.close()

    async def close(self) -> None:
        """Let the handler threads go and give the kept connections back to the pool."""
        self._threads.close()
        await self.db.close()

    async def revive_once(self) -> list[Execution]:
        """One revival pass (see ``Maintenance.revive_once``)."""
        return await self.maintenance.revive_once()

    async def delete_orphans_once(self) -> list[tuple[str, str, Any]]:
        """One orphan deletion pass (see ``Maintenance.delete_orphans_once``)."""
        return await self.maintenance.delete_orphans_once()
