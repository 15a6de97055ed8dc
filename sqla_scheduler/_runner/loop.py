"""The loop of one running scheduler: the services in one task group, and the workers.

``Runner`` builds the services from plain parts (engine, table, tasks, config, clock,
listeners, interceptors) and runs them: the picker feeds a queue, ``concurrency``
workers take from it and hand each execution's outcome to the completer, the
heartbeater, the progress writer (what handlers report), the stop requests (``stops``),
maintenance, the node heartbeater, the stats writer (the charts' counts) and the listener
(PostgreSQL) or the due-time reader (the other databases) run beside them.
``run_due`` runs the same per-execution code without the loop, for tests.

Stopping: no new picks; running handlers get ``shutdown_max_wait``; whatever is still
held after that is released for other schedulers, and every outcome is committed. Then,
and only after such a clean stop, the scheduler's row leaves the nodes table. A handler
that ignores its cancellation for ``STOP_GRACE`` more is left running, its execution to
revival (``Workers.left_running``): ``run`` returns all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import anyio
import anyio.abc
from sqlalchemy import Connection, Engine, Table
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._bridge import Database, SessionFactory, check_backend
from sqla_scheduler._commit_hooks import after_commit
from sqla_scheduler._dialects import backend_for
from sqla_scheduler._execution import Execution
from sqla_scheduler._pool import SERVICE_CONNECTIONS, check_pool
from sqla_scheduler._runner.completer import Completer
from sqla_scheduler._runner.due_times import DueTimeReader
from sqla_scheduler._runner.executor import Executor
from sqla_scheduler._runner.heartbeater import Heartbeater
from sqla_scheduler._runner.held import HeldSet, PausedTasks
from sqla_scheduler._runner.listener import Listener
from sqla_scheduler._runner.maintenance import Maintenance
from sqla_scheduler._runner.nodes import NodeHeartbeater
from sqla_scheduler._runner.picker import Picker
from sqla_scheduler._runner.progress import ProgressWriter
from sqla_scheduler._runner.service import Parts
from sqla_scheduler._runner.stats import StatsWriter
from sqla_scheduler._runner.stops import Stops
from sqla_scheduler._runner.waker import Waker
from sqla_scheduler._runner.workers import Workers
from sqla_scheduler._store import check_table
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
        sessions: SessionFactory | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.table = table
        self.tasks: dict[str, Task[Any]] = dict(tasks)
        self.db = _database(engine, config)
        self.shutdown = ShutdownSignal()
        self.held = HeldSet()
        self.paused = PausedTasks()
        self.waker = Waker(clock)
        self._threads = HandlerThreads()
        parts = _Parts(
            db=self.db,
            table=table,
            tasks=self.tasks,
            config=config,
            clock=clock,
            listeners=list(listeners),
            sessions=sessions,
            shutdown=self.shutdown,
            held=self.held,
            paused=self.paused,
            waker=self.waker,
        )
        self.picker = _picker(parts, on_paused=self._hand_back)
        #: Writes the handlers' progress reports, at most once a second each.
        self.progress = ProgressWriter(parts, held=self.held)
        self.executor = _executor(parts, self._threads, list(interceptors), self.progress)
        #: Adds the counts of finished executions to the stats table (none with ``stats`` off).
        self.stats = StatsWriter(parts)
        self.completer = _completer(parts, self.stats if config.stats else None)
        self.heartbeater = Heartbeater(parts, held=self.held)
        self.maintenance = _maintenance(parts)
        self.node = NodeHeartbeater(parts, held=self.held)
        #: Hears NOTIFY wake-ups (``Listener``), and reads the earliest due time where none
        #: is heard (``DueTimeReader``): see ``_hearing``.
        self.listener, self.due_reader = _hearing(
            engine, parts, self.picker, self.learn_pause, self.learn_stop
        )
        self.workers = _workers(parts, self.executor, self.completer, self.picker)
        #: Learns of stop requests (and reads them where no NOTIFY brings them).
        self.stops = Stops(
            parts,
            held=self.held,
            carry_out=self.workers.stop,
            give_up=self.workers.give_up,
            hearing=lambda: self.listener is not None and self.listener.hearing,
        )
        self._stop = anyio.Event()

    def wake_on_commit(self, conn: Connection) -> Callable[[datetime], None]:
        """What an insert on ``conn`` calls with the earliest execution time it inserted:
        when that transaction commits, this loop learns of it (and wakes at once for work
        due now) rather than at its next poll. A loop whose listener hears hears of due
        work from the insert's NOTIFY, so only later times go through the commit."""

        def inserted(earliest: datetime) -> None:
            hearing = self.listener is not None and self.listener.hearing
            if hearing and earliest <= self.clock.now():
                return
            after_commit(conn, partial(self.waker.wake_at_soon, earliest))

        return inserted

    def learn_on_commit(self, conn: Connection) -> Callable[[str, bool], None]:
        """What a pause or resume on ``conn`` calls with the task's name: when that
        transaction commits, this loop learns of it (``learn_pause``) at once, where no
        NOTIFY would tell it (SQLite, ``listen=False``)."""

        def learned(task_name: str, paused: bool) -> None:
            learn = partial(self.learn_pause, task_name, paused)
            after_commit(conn, partial(self.waker.soon, learn))

        return learned

    def stop_on_commit(self, conn: Connection) -> Callable[[str, str], None]:
        """What a stop request on ``conn`` (``cancel`` of a running execution) calls with
        the execution's key: when that transaction commits, this loop learns of it at once
        (``learn_stop``), where no NOTIFY would tell it."""

        def requested(task_name: str, instance_id: str) -> None:
            learn = partial(self.learn_stop, task_name, instance_id)
            after_commit(conn, partial(self.waker.soon, learn))

        return requested

    def learn_stop(self, task_name: str, instance_id: str) -> None:
        """Learn that ``cancel`` asked to stop ``task_name``/``instance_id``: if this
        process holds it, it stops (from the loop's own thread)."""
        self.stops.learn((task_name, instance_id))

    def learn_pause(self, task_name: str, paused: bool) -> None:
        """Learn that ``task_name`` was paused (hand back what is held of it and start none
        of it) or resumed (from the loop's own thread)."""
        self.paused.learn(task_name, paused)
        if paused:
            self._hand_back(task_name)

    def _hand_back(self, task_name: str) -> None:
        self.workers.hand_back(task_name)

    def request_stop(self) -> None:
        """Stop picking, signal handlers, and let ``run`` wind down."""
        self.shutdown.set()
        if self.listener is not None:
            self.listener.stop()
        self.waker.wake()
        self._stop.set()

    def _stopping(self) -> bool:
        return self.shutdown.is_set()

    # --- the loop ---------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Look the table up, register recurring tasks, run every service until
        ``request_stop``, stop.

        A missing table raises ``MissingTableError`` here, before any service starts (and
        before ``task_status.started()``), so the caller sees that one error rather than a
        loop that retries forever or an exception group of every service's failure.
        """
        check_backend(self.db.engine)
        _check_pool(self.db.engine, self.config, self.tasks)
        try:
            await self.db.run(partial(check_table, table=self.table), read_only=True)
        except BaseException:
            await self.close()
            raise
        self.waker.bind()
        await self.maintenance.sync_clock()
        await self.maintenance.register_recurring()
        await self.node.run_once()
        log.info(
            "scheduler %r started: %d task(s), concurrency %d",
            self.config.scheduler_name,
            len(self.tasks),
            self.config.concurrency,
        )
        try:
            async with anyio.create_task_group() as services:
                services.start_soon(self.completer.run)
                services.start_soon(self.picker.run, self.workers.deliver, self._stopping)
                services.start_soon(self.heartbeater.run)
                services.start_soon(self.progress.run)
                services.start_soon(self.stops.run)
                services.start_soon(self.maintenance.run)
                services.start_soon(self.node.run)
                services.start_soon(self.stats.run)
                if self.listener is not None:
                    services.start_soon(self.listener.run)
                if self.due_reader is not None:  # (the listener runs one if it must)
                    services.start_soon(self.due_reader.run)
                await self.workers.run(
                    self.config.concurrency, until=self._stop, task_status=task_status
                )
                await self.completer.flush()
                services.cancel_scope.cancel()
            await self.stats.flush()
            # after the services, so that no beat writes the row again; not while handlers
            # left running may still act for this node
            if not self.workers.left_running:
                await self.node.remove()
        finally:
            if self.listener is not None:
                self.listener.stop()
            self.workers.close()
            await self.close()
        log.info("scheduler %r stopped", self.config.scheduler_name)

    # --- before the loop, and without it --------------------------------------------

    async def run_due(
        self, *, max_executions: int = 10_000, stop: Collection[tuple[str, str]] = ()
    ) -> int:
        """Run every due execution to completion, in pick order, and return how many ran;
        those of ``stop`` (task, instance) as if ``cancel`` asked to stop them as their
        handlers start."""
        try:
            await self.maintenance.register_recurring()
            ran = 0
            while True:
                # its handlers run one after the other: of a rate-limited task's picks,
                # one starts at once (the others only while its window has room to spare)
                batch = await self.picker.run_once(self.config.concurrency, prompt=1)
                if not batch:
                    return ran
                for held in batch:
                    await self.workers.run_one(held, stop=held.key in stop)
                ran += len(batch)
                if ran > max_executions:
                    raise RuntimeError(
                        f"run_due ran more than {max_executions} executions; is a task "
                        "rescheduling itself to run now forever?"
                    )
        finally:
            await self.stats.flush()
            await self.close()

    async def close(self) -> None:
        """Let the handler threads go and give the kept connections back to the pool."""
        self._threads.close()
        await self.db.close()

    async def revive_once(self) -> list[Execution]:
        """One revival pass (see ``Maintenance.revive_once``), then close."""
        try:
            return await self.maintenance.revive_once()
        finally:
            await self.close()

    async def delete_orphans_once(self) -> list[tuple[str, str, Any]]:
        """One orphan deletion pass (see ``Maintenance.delete_orphans_once``), then close."""
        try:
            return await self.maintenance.delete_orphans_once()
        finally:
            await self.close()

    async def prune_history_once(self) -> int:
        """One history pruning pass (see ``Maintenance.prune_history_once``), then close."""
        try:
            return await self.maintenance.prune_history_once()
        finally:
            await self.close()

    async def prune_results_once(self) -> int:
        """One results pruning pass (see ``Maintenance.prune_results_once``), then close."""
        try:
            return await self.maintenance.prune_results_once()
        finally:
            await self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Parts(Parts):
    """The plain parts every service shares, and the tasks and the shared state the
    runner's services are built from."""

    tasks: Mapping[str, Task[Any]]
    sessions: SessionFactory | None
    shutdown: ShutdownSignal
    held: HeldSet
    paused: PausedTasks
    waker: Waker

    @property
    def names(self) -> list[str]:
        """The names of the tasks, sorted."""
        return sorted(self.tasks)

    @property
    def limits(self) -> dict[str, int]:
        """The ``max_concurrency`` of each task that has one."""
        return {
            name: task.max_concurrency
            for name, task in self.tasks.items()
            if task.max_concurrency is not None
        }


def _picker(parts: _Parts, *, on_paused: Callable[[str], None]) -> Picker:
    return Picker(
        parts,
        names=parts.names,
        held=parts.held,
        waker=parts.waker,
        limits=parts.limits,
        rates={
            name: task.rate_limit
            for name, task in parts.tasks.items()
            if task.rate_limit is not None
        },
        paused=parts.paused,
        on_paused=on_paused,
    )


def _executor(
    parts: _Parts,
    threads: HandlerThreads,
    interceptors: Sequence[ExecutionInterceptor],
    progress: ProgressWriter,
) -> Executor:
    return Executor(
        parts,
        tasks=parts.tasks,
        shutdown=parts.shutdown,
        threads=threads,
        interceptors=interceptors,
        sessions=parts.sessions,
        limited=frozenset(parts.limits),
        on_handed_back=parts.waker.news,
        writes=parts.held.writes,
        progress=progress.reports,
    )


def _completer(parts: _Parts, stats: StatsWriter | None) -> Completer:
    return Completer(
        parts,
        limited=frozenset(parts.limits),
        held=parts.held,
        waker=parts.waker,
        shutdown=parts.shutdown,
        sessions=parts.sessions,
        stats=stats,
    )


def _maintenance(parts: _Parts) -> Maintenance:
    return Maintenance(
        parts,
        names=parts.names,
        recurring=[t for t in parts.tasks.values() if isinstance(t, RecurringTask)],
        waker=parts.waker,
    )


def _hearing(
    engine: Engine | AsyncEngine,
    parts: _Parts,
    picker: Picker,
    on_pause: Callable[[str, bool], None],
    on_stop: Callable[[str, str], None],
) -> tuple[Listener | None, DueTimeReader | None]:
    """What tells the loop of work it did not pick itself: the ``Listener``, which hears
    NOTIFY wake-ups on PostgreSQL with ``listen`` on (else ``None``); the ``DueTimeReader``, which
    reads the earliest due time once a second where no NOTIFY exists (MariaDB, SQLite),
    or where LISTEN turns out not to hear (behind a pooler: the listener runs it then),
    and is ``None`` where NOTIFY is not used at all (``listen`` off)."""
    config, names = parts.config, parts.names
    due_reader = DueTimeReader(parts, parts.waker, names=names, wants_work=picker.wants_work)
    if not backend_for(engine.dialect).supports_notify:
        return None, due_reader
    if not config.listen:
        return None, None
    listener = Listener(
        parts.db,
        parts.table,
        parts.waker,
        names=names,
        wants_work=picker.wants_work,
        on_pause=on_pause,
        on_stop=on_stop,
        polling_interval=config.polling_interval,
        listen_url=config.listen_url,
        on_deaf=due_reader.run,
    )
    return listener, None


def _workers(parts: _Parts, executor: Executor, completer: Completer, picker: Picker) -> Workers:
    return Workers(
        held=parts.held,
        executor=executor,
        completer=completer,
        picker=picker,
        waker=parts.waker,
        clock=parts.clock,
        shutdown=parts.shutdown,
        grace=parts.config.shutdown_max_wait,
        paused=parts.paused,
    )


def _database(engine: Engine | AsyncEngine, config: SchedulerConfig) -> Database:
    """The runner's ``Database``: its services share ``SERVICE_CONNECTIONS``, with a thread
    for each connection out at once, the services' and the transactional handlers' (see
    ``_pool``), so that no connection waits for a thread to give it back."""
    return Database(
        engine,
        threads=config.concurrency + SERVICE_CONNECTIONS,
        prepared_statements=config.prepared_statements,
        connections=SERVICE_CONNECTIONS,
    )


def _check_pool(
    engine: Engine | AsyncEngine, config: SchedulerConfig, tasks: Mapping[str, Task[Any]]
) -> None:
    """Refuse an engine whose pool is too small for ``config`` and ``tasks`` (``_pool``)."""
    transactional = {name: task for name, task in tasks.items() if task.transactional}
    check_pool(engine, concurrency=config.concurrency, transactional=transactional)
