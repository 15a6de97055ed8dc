"""A small application for the worker-process tests.

``sqla-scheduler worker tests.concurrency.app:scheduler`` builds its scheduler from the
environment (see :func:`scheduler_from_env`); tests import :func:`build_scheduler` and the
table definitions directly. Handlers write what they did into ``runs``, each in a
transaction of its own, so a test can see every execution from outside the worker.

- ``record``: one row, phase ``done``.
- ``slow``: a row with phase ``started``, then waits (in the handler, polling) until a row
  exists in ``release``, then a row with phase ``finished``. It gives up with an error
  after ``deadline`` seconds.
- ``fault``: a row with phase ``started``, an optional pause (``FAULT_SLEEP_MS``), a row
  with phase ``finished`` (the fault tests: a re-run must follow a start by a killed pid).
- ``limited``: ``max_concurrency=LIMIT``; a row with phase ``started``, a pause
  (``LIMITED_SLEEP_MS``, default 50), a row with phase ``finished``.
- ``effect``: ``transactional=True``; a line in the file ``EFFECT_LOG`` names (a file, not
  a row: on SQLite the handler's transaction holds the write lock), then a row in
  ``effects`` through ``ctx.session``, then a pause (``EFFECT_SLEEP_MS``, default 20)
  before the scheduler commits the row with the outcome: a kill in that pause must leave
  no effect behind.
- ``gmember`` (``max_retries=3``): a member of a group; its payload says what it comes
  to: ``ok`` returns ``{"n": <instance>}``, ``flaky`` fails its first attempt and then
  returns so, ``abandon`` fails every attempt; each attempt pauses ``GROUP_SLEEP_MS``
  (default 5) and records phase ``done`` or ``failed``. ``gtyped`` takes a ``Point``
  payload: a member scheduled with another shape is undecodable.
- ``gcallback`` (``transactional=True``): a group's callback; in its outcome's
  transaction it writes a row in ``callbacks`` with its group, how many members its
  ``ctx.group`` lists, their outcomes as JSON, and whether the group had finished.
- ``rated``: only with ``RATE_LIMIT`` (its ``rate_limit``, e.g. ``20/s``); a row in
  ``rated_starts`` with the time the scheduler started it (``time.time()`` in the
  ``on_start`` listener, in microseconds).
- ``stuck`` (``max_retries=0``): fails; its ``on_abandon`` hook records phase ``hooked``,
  then waits (in its thread, polling) until a row exists in ``release``, for at most
  ``deadline`` seconds: an abandon whose commit waits on application code.
- ``stoppable`` (sync) and ``stoppable-async``: a row with phase ``started``, then they
  run until ``cancel`` stops them (the sync one polls ``ctx.cancelled``, the async one is
  cancelled), when each writes a row in ``stops`` with the time it saw the stop
  (``time.time()``, in microseconds), then ends; they give up after ``deadline`` seconds.
- ``poison``: an instance whose id starts with ``die`` kills the worker process
  (``os._exit``); one whose id starts with ``exit`` raises ``SystemExit(0)`` and one
  starting ``interrupt`` ``KeyboardInterrupt`` (each recording phase ``raised`` first);
  any other records phase ``done``.

``SKEW_S`` simulates a machine clock that many seconds off: the scheduler's clock is then
a :class:`DatabaseClock` over a skewed base (``DB_CLOCK=0`` leaves the skew uncorrected).
``STEP_FILE`` names a file that steps the machine clock by the seconds written in it,
when the test writes it (a :class:`DatabaseClock` over a :class:`SteppedClock`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    func,
    insert,
    select,
)
from sqlalchemy.ext.asyncio import create_async_engine

from sqla_scheduler import (
    Clock,
    DatabaseClock,
    ExecutionContext,
    OneTimeTask,
    Scheduler,
    SchedulerConfig,
    SchedulerListener,
    SystemClock,
    configure_sqlite,
    one_time,
)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task", String(50), nullable=False),
    Column("instance", String(255), nullable=False),
    Column("worker", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("phase", String(20), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

release = Table("release", metadata, Column("id", Integer, primary_key=True))

#: What the ``effect`` task writes in its outcome's transaction (no unique key: a second
#: write of one instance would show).
effects = Table(
    "effects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
)

#: What each group's callback saw, written in its outcome's transaction: a second run of
#: one callback would show as a second row.
callbacks = Table(
    "callbacks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance", String(255), nullable=False),
    Column("group_id", BigInteger, nullable=False),
    Column("members", Integer, nullable=False),
    Column("remaining", Integer, nullable=False),
    Column("outcomes", Text, nullable=False),
    Column("pid", Integer, nullable=False),
)


@dataclass
class Point:
    """``gtyped``'s payload."""

    x: int


#: When each handler of the ``rated`` task started, and in which worker.
rated_starts = Table(
    "rated_starts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance", String(255), nullable=False),
    Column("worker", String(255), nullable=False),
    Column("at_us", BigInteger, nullable=False),
)

#: When each ``stoppable`` handler saw its stop, and in which worker.
stops = Table(
    "stops",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance", String(255), nullable=False),
    Column("worker", String(255), nullable=False),
    Column("at_us", BigInteger, nullable=False),
)

#: The ``limited`` task's ``max_concurrency``.
LIMIT = 2


class SkewedClock(SystemClock):
    """A machine clock ``skew`` ahead (or, negative, behind) the true time."""

    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return super().now() + self.skew


class SteppedClock(SystemClock):
    """A machine clock that steps when told, as NTP or a resumed VM steps it: it runs the
    number of seconds written in the file ``path`` ahead (behind, negative) of the true
    time, and true while there is no such file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def now(self) -> datetime:
        try:
            with open(self.path) as step:
                seconds = float(step.read() or 0)
        except FileNotFoundError:
            seconds = 0.0
        return super().now() + timedelta(seconds=seconds)


def build_scheduler(
    url: str,
    *,
    name: str = "app",
    concurrency: int = 10,
    polling_interval: timedelta = timedelta(milliseconds=100),
    heartbeat_interval: timedelta = timedelta(seconds=5),
    missed_heartbeat_limit: int = 6,
    shutdown_max_wait: timedelta = timedelta(seconds=5),
    slow_deadline: float = 60.0,
    fault_sleep: float = 0.0,
    limited_sleep: float = 0.05,
    effect_sleep: float = 0.02,
    effect_log: str | None = None,
    max_retries: int | None = None,
    skew: float = 0.0,
    db_clock: bool = True,
    step_file: str | None = None,
    node_heartbeat_interval: timedelta = timedelta(seconds=30),
    prepare: bool = True,
    group_sleep: float = 0.005,
    rate_limit: str | None = None,
) -> Scheduler:
    """A scheduler on a sync engine (psycopg or pysqlite) with ``record`` and ``slow``.
    Without ``prepare`` (behind a pooler in transaction mode) psycopg prepares none of the
    app's own statements. With ``rate_limit``, ``rated`` too."""
    # The runner holds up to concurrency + 4 connections, and each handler one more.
    args: dict[str, Any] = {} if prepare else {"connect_args": {"prepare_threshold": None}}
    engine = configure_sqlite(
        create_engine(url, pool_size=2 * concurrency + 5, max_overflow=5, **args)
    )
    pid = os.getpid()

    def log_run(task: str, instance: str, phase: str) -> None:
        with engine.begin() as conn:
            conn.execute(
                insert(runs).values(task=task, instance=instance, worker=name, pid=pid, phase=phase)
            )

    @one_time("record")
    def record(ctx: ExecutionContext[Any]) -> None:
        log_run("record", ctx.instance_id, "done")

    @one_time("slow")
    def slow(ctx: ExecutionContext[Any]) -> None:
        log_run("slow", ctx.instance_id, "started")
        give_up = time.monotonic() + slow_deadline
        while not _released(engine):
            if time.monotonic() > give_up:
                raise TimeoutError(f"slow/{ctx.instance_id}: no release after {slow_deadline}s")
            time.sleep(0.02)
        log_run("slow", ctx.instance_id, "finished")

    @one_time("fault")
    def fault(ctx: ExecutionContext[Any]) -> None:
        log_run("fault", ctx.instance_id, "started")
        if fault_sleep:
            time.sleep(fault_sleep)
        log_run("fault", ctx.instance_id, "finished")

    @one_time("limited", max_concurrency=LIMIT)
    def limited(ctx: ExecutionContext[Any]) -> None:
        log_run("limited", ctx.instance_id, "started")
        time.sleep(limited_sleep)
        log_run("limited", ctx.instance_id, "finished")

    @one_time("effect", transactional=True)
    def effect(ctx: ExecutionContext[Any]) -> None:
        if effect_log is not None:
            with open(effect_log, "a") as started:  # one write(2): a kill cannot cut it
                started.write(f"{ctx.instance_id} {pid}\n")
        ctx.session.execute(insert(effects).values(instance=ctx.instance_id, pid=pid))
        ctx.session.flush()
        time.sleep(effect_sleep)  # written, not committed: a kill here must undo the write

    @one_time("gmember", max_retries=3)
    def gmember(ctx: ExecutionContext[Any]) -> dict[str, str]:
        time.sleep(group_sleep)
        if ctx.payload == "abandon" or (ctx.payload == "flaky" and ctx.consecutive_failures == 0):
            log_run("gmember", ctx.instance_id, "failed")
            raise RuntimeError(f"{ctx.instance_id}: {ctx.payload}")
        log_run("gmember", ctx.instance_id, "done")
        return {"n": ctx.instance_id}

    @one_time("gtyped", payload_type=Point)
    def gtyped(ctx: ExecutionContext[Point]) -> None:
        log_run("gtyped", ctx.instance_id, "done")

    @one_time("gcallback", transactional=True)
    def gcallback(ctx: ExecutionContext[Any]) -> None:
        group = ctx.group
        assert group is not None
        seen = {m.instance_id: m.outcome for m in group.members}
        ctx.session.execute(
            insert(callbacks).values(
                instance=ctx.instance_id,
                group_id=group.id,
                members=len(group.members),
                remaining=group.remaining,
                outcomes=json.dumps(seen, sort_keys=True),
                pid=pid,
            )
        )

    def log_stop(instance_id: str) -> None:
        at_us = round(time.time() * 1_000_000)  # first: the time it saw the stop
        with engine.begin() as conn:
            conn.execute(insert(stops).values(instance=instance_id, worker=name, at_us=at_us))

    @one_time("stoppable")
    def stoppable(ctx: ExecutionContext[Any]) -> None:
        log_run("stoppable", ctx.instance_id, "started")
        give_up = time.monotonic() + slow_deadline
        while not ctx.cancelled.wait(0.002):
            if time.monotonic() > give_up:
                raise TimeoutError(f"stoppable/{ctx.instance_id}: no stop after {slow_deadline}s")
        log_stop(ctx.instance_id)
        ctx.raise_if_cancelled()

    @one_time("stoppable-async")
    async def stoppable_async(ctx: ExecutionContext[Any]) -> None:
        log_run("stoppable-async", ctx.instance_id, "started")
        try:
            await anyio.sleep(slow_deadline)
        except anyio.get_cancelled_exc_class():
            log_stop(ctx.instance_id)  # in the loop's thread: a moment, then the raise
            raise
        raise TimeoutError(f"stoppable-async/{ctx.instance_id}: no stop after {slow_deadline}s")

    @one_time("poison")
    def poison(ctx: ExecutionContext[Any]) -> None:
        if ctx.instance_id.startswith("die"):
            log_run("poison", ctx.instance_id, "crashed")
            os._exit(7)
        if ctx.instance_id.startswith(("exit", "interrupt")):
            log_run("poison", ctx.instance_id, "raised")
            raise SystemExit(0) if ctx.instance_id.startswith("exit") else KeyboardInterrupt
        log_run("poison", ctx.instance_id, "done")

    def hold_on(ctx: ExecutionContext[Any], session: Any) -> None:
        log_run("stuck", ctx.instance_id, "hooked")
        give_up = time.monotonic() + slow_deadline
        while not _released(engine) and time.monotonic() < give_up:
            time.sleep(0.02)

    @one_time("stuck", max_retries=0, on_abandon=hold_on)
    def stuck(ctx: ExecutionContext[Any]) -> None:
        raise RuntimeError(f"stuck/{ctx.instance_id}: its on_abandon hook waits for a release")

    tasks: list[OneTimeTask[Any]] = [record, slow, fault, limited, effect, poison, stuck]
    tasks += [gmember, gtyped, gcallback, stoppable, stoppable_async]
    listeners: list[SchedulerListener] = []
    if rate_limit is not None:
        started = _StartTimes()
        listeners.append(started)

        @one_time("rated", rate_limit=rate_limit)
        def rated(ctx: ExecutionContext[Any]) -> None:
            at = started.times.pop(ctx.instance_id)
            with engine.begin() as conn:
                conn.execute(
                    insert(rated_starts).values(
                        instance=ctx.instance_id, worker=name, at_us=round(at * 1_000_000)
                    )
                )

        tasks.append(rated)

    config = SchedulerConfig(
        scheduler_name=name,
        concurrency=concurrency,
        polling_interval=polling_interval,
        heartbeat_interval=heartbeat_interval,
        missed_heartbeat_limit=missed_heartbeat_limit,
        shutdown_max_wait=shutdown_max_wait,
        retry_base_delay=timedelta(seconds=1),
        max_retries=max_retries,
        node_heartbeat_interval=node_heartbeat_interval,
    )
    clock: Clock | None = None
    if skew or not db_clock:
        base = SkewedClock(timedelta(seconds=skew))
        clock = DatabaseClock(base) if db_clock else base
    if step_file is not None:
        clock = DatabaseClock(SteppedClock(step_file))
    return Scheduler(engine, tasks, config, clock=clock, listeners=listeners)


class _StartTimes(SchedulerListener):
    """When the scheduler started each execution (``on_start``, in its event loop, as it
    decides to run the handler): the moment a rate limit governs. The handler's own first
    line may come later in its thread, by as long as a busy machine takes to run it."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}

    def on_start(self, context: ExecutionContext[Any]) -> None:
        self.times[context.instance_id] = time.time()


def one_time_task(scheduler: Scheduler, name: str) -> OneTimeTask[Any]:
    """``scheduler``'s one-time task ``name`` (typed, to make instances of it)."""
    task = scheduler.task(name)
    assert isinstance(task, OneTimeTask)
    return task


def engine_of(scheduler: Scheduler) -> Engine:
    """The sync engine :func:`build_scheduler` gave ``scheduler``."""
    assert isinstance(scheduler.engine, Engine)
    return scheduler.engine


def _released(engine: Engine) -> bool:
    with engine.connect() as conn:
        return conn.scalar(select(release.c.id).limit(1)) is not None


def _ms(variable: str, default: int) -> timedelta:
    return timedelta(milliseconds=int(os.environ.get(variable, default)))


def _exit_with_parent(parent: int) -> None:
    """Die when the test run that started this worker is gone (even by SIGKILL)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(3)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def scheduler_from_env() -> Scheduler:
    """The scheduler the environment describes: ``DATABASE_URL`` (required),
    ``WORKER_NAME``, ``CONCURRENCY``, ``POLL_MS``, ``HEARTBEAT_MS``, ``MISSED_LIMIT``,
    ``SHUTDOWN_WAIT_MS``, ``SLOW_DEADLINE_S``, ``FAULT_SLEEP_MS``, ``LIMITED_SLEEP_MS``,
    ``EFFECT_SLEEP_MS``, ``EFFECT_LOG``, ``MAX_RETRIES``, ``SKEW_S``, ``DB_CLOCK``,
    ``STEP_FILE``, ``PREPARE`` (``0``: behind a pooler), ``NODE_HEARTBEAT_MS``,
    ``GROUP_SLEEP_MS``, ``RATE_LIMIT`` and ``IMPORT_SLEEP_MS`` (a pause before it is
    built, as an application slow to import has, once the file ``IMPORT_MARK`` exists); with
    ``PARENT_PID``, the process exits when its parent does."""
    if "PARENT_PID" in os.environ:
        _exit_with_parent(int(os.environ["PARENT_PID"]))
    if "IMPORT_SLEEP_MS" in os.environ:  # an app slow to load, saying when it begins
        with open(os.environ["IMPORT_MARK"], "w"):
            pass
        time.sleep(int(os.environ["IMPORT_SLEEP_MS"]) / 1000)
    return build_scheduler(
        os.environ["DATABASE_URL"],
        name=os.environ.get("WORKER_NAME", f"worker-{os.getpid()}"),
        concurrency=int(os.environ.get("CONCURRENCY", 10)),
        polling_interval=_ms("POLL_MS", 100),
        heartbeat_interval=_ms("HEARTBEAT_MS", 5000),
        missed_heartbeat_limit=int(os.environ.get("MISSED_LIMIT", 6)),
        shutdown_max_wait=_ms("SHUTDOWN_WAIT_MS", 5000),
        slow_deadline=float(os.environ.get("SLOW_DEADLINE_S", 60)),
        fault_sleep=int(os.environ.get("FAULT_SLEEP_MS", 0)) / 1000,
        limited_sleep=int(os.environ.get("LIMITED_SLEEP_MS", 50)) / 1000,
        effect_sleep=int(os.environ.get("EFFECT_SLEEP_MS", 20)) / 1000,
        effect_log=os.environ.get("EFFECT_LOG"),
        max_retries=int(os.environ["MAX_RETRIES"]) if "MAX_RETRIES" in os.environ else None,
        skew=float(os.environ.get("SKEW_S", 0)),
        db_clock=os.environ.get("DB_CLOCK", "1") != "0",
        step_file=os.environ.get("STEP_FILE"),
        prepare=os.environ.get("PREPARE", "1") != "0",
        node_heartbeat_interval=_ms("NODE_HEARTBEAT_MS", 30_000),
        group_sleep=int(os.environ.get("GROUP_SLEEP_MS", 5)) / 1000,
        rate_limit=os.environ.get("RATE_LIMIT"),
    )


def async_scheduler_from_env() -> Scheduler:
    """A factory: a scheduler with no tasks on an ``AsyncEngine`` (``DATABASE_URL``)."""
    return Scheduler(create_async_engine(os.environ["DATABASE_URL"]))


def __getattr__(name: str) -> Any:
    # ``app:scheduler`` is built on first access, so tests can import this module
    # without a DATABASE_URL.
    if name == "scheduler":
        built = globals()["scheduler"] = scheduler_from_env()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
