"""The scheduler: a client (schedule, reschedule, cancel, list) and a runner.

``Scheduler(engine, tasks)`` is a working client without running any loop: a web process
can schedule into the application's own transaction and leave execution to workers. To
execute tasks, run it: ``await scheduler.run()``, ``async with scheduler:``, or
``scheduler.start()`` / ``scheduler.stop()`` on a background thread.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

import anyio
import anyio.abc
from sqlalchemy import Connection, Engine, Table
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlalchemy.orm import sessionmaker

from sqla_scheduler import _bridge, _store
from sqla_scheduler._bridge import AsyncTarget, SyncTarget, Target, check_sessions
from sqla_scheduler._client import Client
from sqla_scheduler._composing import Composing
from sqla_scheduler._control import Control
from sqla_scheduler._dialects import known_backend
from sqla_scheduler._execution import Execution, TaskInstance, group_plan
from sqla_scheduler._observing import Observing
from sqla_scheduler._runner import Lifecycle, Runner
from sqla_scheduler._statements import statements_on
from sqla_scheduler.clock import Clock, DatabaseClock, SystemClock
from sqla_scheduler.config import SchedulerConfig, for_this_process
from sqla_scheduler.exceptions import TaskDefinitionError, UnknownTaskError
from sqla_scheduler.interceptors import ExecutionInterceptor, captures_context
from sqla_scheduler.listeners import SchedulerListener
from sqla_scheduler.models import table_for
from sqla_scheduler.tasks import Task

__all__ = ["Scheduler"]

Then = TaskInstance[Any] | Sequence[TaskInstance[Any]] | None
"""What runs after an execution: one instance, a chain of them, or nothing."""

Method = TypeVar("Method")


class _Faced(Generic[Method]):
    """A method of one of a scheduler's facets, exposed as the scheduler's own: typed,
    documented and overloaded where the facet defines it. (The API reference shows the
    facet's method under the scheduler's name: ``docs/griffe_facets.py``.)"""

    def __init__(self, method: Callable[[Scheduler], Method]) -> None:
        self._method = method

    @overload
    def __get__(self, scheduler: None, owner: type[Scheduler]) -> _Faced[Method]: ...
    @overload
    def __get__(self, scheduler: Scheduler, owner: type[Scheduler]) -> Method: ...
    def __get__(
        self, scheduler: Scheduler | None, owner: type[Scheduler]
    ) -> _Faced[Method] | Method:
        return self if scheduler is None else self._method(scheduler)


class Scheduler:
    """A persistent, cluster-safe scheduler over one table.

    ``engine`` is a sync ``Engine`` or an ``AsyncEngine``; it is what the scheduler's own
    loop uses. The scheduling methods take the caller's session, connection or engine
    instead, so a task is scheduled if and only if the caller's transaction commits. With a
    sync target they return their result; with an async one, an awaitable of it.

    ``read_engine`` (a read replica's, of the same database system) is where the admin page
    reads its listings, history, counts and nodes; picks, limits, scheduling and every
    write go to ``engine``.
    """

    def __init__(
        self,
        engine: Engine | AsyncEngine,
        tasks: Iterable[Task[Any]] = (),
        config: SchedulerConfig | None = None,
        *,
        clock: Clock | None = None,
        listeners: Iterable[SchedulerListener] = (),
        interceptors: Iterable[ExecutionInterceptor] = (),
        session_factory: sessionmaker[Any] | async_sessionmaker[Any] | None = None,
        read_engine: Engine | AsyncEngine | None = None,
    ) -> None:
        self.engine = _check_engine(engine)
        self.read_engine = engine if read_engine is None else read_engine
        self.config = config if config is not None else SchedulerConfig()
        self.clock: Clock = clock if clock is not None else _default_clock(engine)
        self._tasks = _registry(tasks)
        self.session_factory = check_sessions(engine, self._tasks.values(), session_factory)
        """Makes the sessions of transactional handlers and ``on_abandon`` hooks, bound to
        the transaction each runs in; ``None``: plain ``Session``/``AsyncSession``."""
        self.table: Table = table_for(self.config.table_name, self.config.schema)
        self.listeners: list[SchedulerListener] = list(listeners)
        self.interceptors: list[ExecutionInterceptor] = list(interceptors)
        """Run around every handler, the first one outermost (see ``interceptors``)."""
        self._loop = Lifecycle(self, engine, self._make_runner)
        # Only interceptors that capture a context are asked when scheduling, so that
        # scheduling without them costs nothing.
        capturing = [i for i in self.interceptors if captures_context(i)]
        self._client = Client(
            table=self.table,
            tasks=self._tasks,
            settings=self,
            capturing=capturing,
            wake_on_commit=self._on_commit,
        )
        self._observing = Observing(self._client, make_runner=self._make_runner)
        self._control = Control(
            self._client, learn_on_commit=self._on_control, stop_on_commit=self._on_stop
        )
        self._composing = Composing(self._client, make_runner=self._make_runner)

    @property
    def read_engine(self) -> Engine | AsyncEngine:
        """Where the admin page reads: ``engine``, or a replica's engine of the same
        database system (a ``TypeError`` otherwise)."""
        return self._read_engine

    @read_engine.setter
    def read_engine(self, engine: Engine | AsyncEngine) -> None:
        engine = _check_engine(engine)
        if engine.dialect.name != self.engine.dialect.name:
            raise TypeError(
                f"read_engine is {engine.dialect.name}, engine "
                f"{self.engine.dialect.name}: a replica runs the same database system"
            )
        self._read_engine = engine

    @property
    def tasks(self) -> Mapping[str, Task[Any]]:
        """The registered tasks by name (read-only)."""
        return MappingProxyType(self._tasks)

    def task(self, name: str) -> Task[Any]:
        """The registered task called ``name``; [`UnknownTaskError`][] otherwise."""
        try:
            return self._tasks[name]
        except KeyError:
            known = ", ".join(sorted(self._tasks)) or "none"
            raise UnknownTaskError(f"no task {name!r} is registered (known: {known})") from None

    # --- scheduling -----------------------------------------------------------------

    @overload
    def schedule(
        self, target: SyncTarget, instance: TaskInstance[Any], *, then: Then = None
    ) -> bool: ...
    @overload
    def schedule(
        self, target: AsyncTarget, instance: TaskInstance[Any], *, then: Then = None
    ) -> Coroutine[Any, Any, bool]: ...
    def schedule(
        self, target: Target, instance: TaskInstance[Any], *, then: Then = None
    ) -> bool | Coroutine[Any, Any, bool]:
        """Schedule ``instance`` in ``target``'s transaction, and ``then`` (one instance,
        or a list of them: a chain) to run after it has finished, each after the one
        before it (see ``schedule_group``).

        Returns ``False`` (and changes nothing) when an execution with the same task name
        and instance id already exists (or, with ``then``, one with a callback's). On
        PostgreSQL a due execution wakes the schedulers when the transaction commits.
        """
        _check_instance(instance)
        if then is not None:
            plan = group_plan([instance], then, whole=True)
            return _bridge.call(
                target,
                self.table,
                lambda conn: self._composing.schedule_plan(plan, conn) is not None,
                writes=f"schedule({_bridge.named(instance.task_name, instance.instance_id)})",
            )
        # One INSERT (with its NOTIFY on PostgreSQL) is all schedule() runs.
        return _bridge.call(
            target,
            self.table,
            partial(self._insert, [instance], single=True),
            one_statement=True,
            writes=f"schedule({_bridge.named(instance.task_name, instance.instance_id)})",
        )

    @overload
    def schedule_batch(self, target: SyncTarget, instances: Iterable[TaskInstance[Any]]) -> int: ...
    @overload
    def schedule_batch(
        self, target: AsyncTarget, instances: Iterable[TaskInstance[Any]]
    ) -> Coroutine[Any, Any, int]: ...
    def schedule_batch(
        self, target: Target, instances: Iterable[TaskInstance[Any]]
    ) -> int | Coroutine[Any, Any, int]:
        """Schedule many instances with one statement per chunk; return how many were new."""
        batch = list(instances)
        for instance in batch:
            _check_instance(instance)
        # A batch of one chunk is one statement (its NOTIFYs included on PostgreSQL).
        return _bridge.call(
            target,
            self.table,
            partial(self._insert, batch, single=False),
            one_statement=_store.one_insert(batch),
            writes=f"schedule_batch({_bridge.batch_named(batch)})",
        )

    def _insert(self, batch: Sequence[TaskInstance[Any]], conn: Any, *, single: bool) -> Any:
        client = self._client
        inserted = _store.insert_instances(
            conn,
            statements_on(conn, self.table),
            batch,
            client.now(),
            client.trace_context(),
            on_inserted=self._on_commit(conn),
        )
        return inserted == 1 if single else inserted

    def _on_commit(self, conn: Connection) -> Callable[[datetime], None] | None:
        """Tells the running loop of ``conn``'s earliest time on commit (``wake_on_commit``)."""
        runner = self._loop.runner
        return None if runner is None else runner.wake_on_commit(conn)

    def _on_control(self, conn: Connection) -> Callable[[str, bool], None] | None:
        """Tells the running loop of a pause or resume on commit (``learn_on_commit``)."""
        runner = self._loop.runner
        return None if runner is None else runner.learn_on_commit(conn)

    def _on_stop(self, conn: Connection) -> Callable[[str, str], None] | None:
        """Tells the running loop of a stop request on commit (``stop_on_commit``)."""
        runner = self._loop.runner
        return None if runner is None else runner.stop_on_commit(conn)

    # --- the facets' methods (each documented where its facet defines it) ------------

    reschedule = _Faced(lambda scheduler: scheduler._control.reschedule)
    cancel = _Faced(lambda scheduler: scheduler._control.cancel)
    run_now = _Faced(lambda scheduler: scheduler._control.run_now)
    pause = _Faced(lambda scheduler: scheduler._control.pause)
    resume = _Faced(lambda scheduler: scheduler._control.resume)
    paused_tasks = _Faced(lambda scheduler: scheduler._control.paused_tasks)
    _ran_now = _Faced(lambda scheduler: scheduler._control.ran_now)  # the admin's run now

    get_execution = _Faced(lambda scheduler: scheduler._observing.get_execution)
    executions = _Faced(lambda scheduler: scheduler._observing.executions)
    history = _Faced(lambda scheduler: scheduler._observing.history)
    requeue = _Faced(lambda scheduler: scheduler._observing.requeue)
    prune_history = _Faced(lambda scheduler: scheduler._observing.prune_history)
    nodes = _Faced(lambda scheduler: scheduler._observing.nodes)

    result = _Faced(lambda scheduler: scheduler._composing.result)
    wait = _Faced(lambda scheduler: scheduler._composing.wait)
    prune_results = _Faced(lambda scheduler: scheduler._composing.prune_results)
    schedule_group = _Faced(lambda scheduler: scheduler._composing.schedule_group)
    group = _Faced(lambda scheduler: scheduler._composing.group)
    cancel_group = _Faced(lambda scheduler: scheduler._composing.cancel_group)

    # --- running --------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether this scheduler's loop is running."""
        return self._loop.runner is not None

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the loop until [`request_stop`][] (or cancellation), then stop gracefully.

        Works in any anyio task group: asyncio, or trio with a sync engine. The table is
        looked up first: without it (migrations not applied) this raises
        [`MissingTableError`][sqla_scheduler.MissingTableError] before anything runs.
        """
        await self._loop.run(task_status=task_status)

    def request_stop(self) -> None:
        """Ask a running loop to stop: no new picks, running executions get
        ``shutdown_max_wait`` to finish, what is left is released for other schedulers."""
        self._loop.request_stop()

    async def __aenter__(self) -> Scheduler:
        """Run the loop in the background for the ``async with`` block (e.g. a FastAPI
        lifespan). A loop that cannot start raises here, by itself (no exception group):
        e.g. [`MissingTableError`][sqla_scheduler.MissingTableError] when the migrations
        were not applied."""
        await self._loop.enter()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._loop.exit(*exc_info)

    def start(self, *, backend: str = "asyncio") -> None:
        """Run the loop on a background thread (for sync applications); returns once it runs.

        A loop that cannot start raises here, in the caller's thread: e.g.
        [`MissingTableError`][sqla_scheduler.MissingTableError] when the migrations were
        not applied.
        """
        self._loop.start(backend)

    def stop(self) -> None:
        """Stop a loop started with [`start`][], waiting for it to wind down: at most
        ``shutdown_max_wait`` plus a grace of a few seconds, even when a handler ignores its
        cancellation (it is then left running and named in the log)."""
        self._loop.stop()

    # --- maintenance and testing ----------------------------------------------------

    async def run_due(self) -> int:
        """Run every due execution to completion now, without the loop; return how many ran.

        Registers recurring tasks first. Meant for tests, with a [`ManualClock`][] to decide
        what is due.
        """
        return await self._make_runner().run_due()

    async def revive_dead_executions(self) -> list[Execution]:
        """Make executions with a stale heartbeat due again now; return them as found."""
        return await self._make_runner().revive_once()

    async def delete_orphans(self) -> list[tuple[str, str, Any]]:
        """Delete rows of unregistered tasks older than ``delete_unresolved_after``."""
        return await self._make_runner().delete_orphans_once()

    def _make_runner(self) -> Runner:
        # a config made before a fork carries the parent's default name: take this process's
        self.config = for_this_process(self.config)
        return Runner(
            engine=self.engine,
            table=self.table,
            tasks=self._tasks,
            config=self.config,
            clock=self.clock,
            listeners=self.listeners,
            interceptors=self.interceptors,
            sessions=self.session_factory,
        )

    def __repr__(self) -> str:
        return (
            f"<Scheduler {self.config.scheduler_name!r} table={self.table.fullname!r} "
            f"tasks={sorted(self._tasks)}>"
        )


def _check_engine(engine: object) -> Engine | AsyncEngine:
    if not isinstance(engine, (Engine, AsyncEngine)):
        raise TypeError(
            f"Scheduler needs a sqlalchemy Engine or AsyncEngine, got {type(engine).__name__}"
        )
    return engine


def _registry(tasks: Iterable[Task[Any]]) -> dict[str, Task[Any]]:
    """The tasks by name; each must be a task definition, and each name used once."""
    registry: dict[str, Task[Any]] = {}
    for task in tasks:
        if not isinstance(task, Task):
            raise TypeError(f"tasks must be task definitions, got {task!r}")
        if task.name in registry:
            raise TaskDefinitionError(f"task {task.name!r} is registered twice")
        registry[task.name] = task
    return registry


def _check_instance(instance: object) -> None:
    if not isinstance(instance, TaskInstance):
        raise TypeError(f"expected a TaskInstance (made by task.instance(...)), got {instance!r}")


def _default_clock(engine: Engine | AsyncEngine) -> Clock:
    """The database's clock where it is the cluster's (``Backend.shared_clock``: see
    ``DatabaseClock``), else the machine's."""
    backend = known_backend(engine.dialect)
    if backend is not None and backend.shared_clock:
        return DatabaseClock()
    return SystemClock()
