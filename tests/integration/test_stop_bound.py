"""Nothing a handler does keeps the scheduler from stopping: ``stop()`` and a cancelled
``run()`` return within ``shutdown_max_wait`` plus ``STOP_GRACE`` even when an async
handler swallows its cancellation forever and a sync one never returns; what is still
running then is named in the log; nor does an upcaster that hangs, nor sync application code
that holds the event loop itself (issue 46, item 4). (A worker process on SIGTERM:
tests/concurrency.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine, text

from sqla_scheduler import (
    ExecutionContext,
    Scheduler,
    SchedulerConfig,
    SchedulerListener,
    one_time,
)
from tests.support import sqlite_file_url

SHUTDOWN_MAX_WAIT = timedelta(milliseconds=500)
#: The grace a stop gives cancelled handlers (``STOP_GRACE``, documented in docs/loop.md).
STOP_GRACE = timedelta(seconds=2)
#: What the test allows beyond the bound for the machine's own delays.
MARGIN = 1.5
#: When the watchdog lets the stubborn handler go, so that a scheduler that does not
#: stop by itself (the failure this tests) stops at all.
WATCHDOG = 10.0


@pytest.fixture
def engine(sqlite_template: Path, tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(sqlite_file_url(sqlite_template, tmp_path))
    try:
        yield engine
    finally:
        engine.dispose()


class Stubborn:
    """An async handler that swallows its cancellation until ``let_go`` (which only the
    test's end, or the watchdog, sets), and a sync one blocked on an event never set."""

    def __init__(self) -> None:
        self.let_go = threading.Event()
        self.started: set[str] = set()
        self.watchdog = threading.Timer(WATCHDOG, self.let_go.set)

        @one_time("stubborn")
        async def stubborn(ctx: Any) -> None:
            self.started.add("stubborn")
            while not self.let_go.is_set():
                try:
                    await anyio.sleep(0.05)
                except anyio.get_cancelled_exc_class():
                    pass

        @one_time("blocked")
        def blocked(ctx: Any) -> None:
            self.started.add("blocked")
            threading.Event().wait()  # never set: the thread is a daemon

        self.tasks = [stubborn, blocked]

    def scheduler(self, engine: Engine) -> Scheduler:
        config = SchedulerConfig(
            polling_interval=timedelta(milliseconds=20),
            shutdown_max_wait=SHUTDOWN_MAX_WAIT,
        )
        scheduler = Scheduler(engine, self.tasks, config)
        scheduler.schedule_batch(engine, [task.instance("x") for task in self.tasks])
        return scheduler


def _left_running(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "left running" in r.getMessage()]


def test_stop_returns_within_its_bound_whatever_handlers_do(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    handlers = Stubborn()
    scheduler = handlers.scheduler(engine)
    scheduler.start()
    handlers.watchdog.start()
    try:
        deadline = time.monotonic() + 20
        while handlers.started != {"stubborn", "blocked"}:
            assert time.monotonic() < deadline, handlers.started
            time.sleep(0.01)
        stopping = time.monotonic()
        scheduler.stop()
        took = time.monotonic() - stopping
        with engine.connect() as conn:
            picked = dict(conn.execute(text("select task_name, picked from scheduled_tasks")).all())
    finally:
        handlers.let_go.set()
        handlers.watchdog.cancel()
    assert took < (SHUTDOWN_MAX_WAIT + STOP_GRACE).total_seconds() + MARGIN, took
    (left,) = _left_running(caplog)
    assert "stubborn/x" in left
    assert "blocked/x" not in left  # its waiter was cancelled: it was released
    assert picked == {"stubborn": True, "blocked": False}  # the one left running, to revival


@pytest.mark.anyio
async def test_a_cancelled_run_returns_within_the_grace(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    handlers = Stubborn()
    scheduler = handlers.scheduler(engine)
    handlers.watchdog.start()
    try:
        async with anyio.create_task_group() as group:
            await group.start(scheduler.run)
            while handlers.started != {"stubborn", "blocked"}:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            stopping = time.monotonic()
            group.cancel_scope.cancel()  # no shutdown_max_wait: cancelled at once
        took = time.monotonic() - stopping
    finally:
        handlers.let_go.set()
        handlers.watchdog.cancel()
    assert took < STOP_GRACE.total_seconds() + MARGIN, took
    (left,) = _left_running(caplog)
    assert "stubborn/x" in left


def _wait_for(event: threading.Event) -> None:
    assert event.wait(20), "the application code was never called"


def _timed_stop(scheduler: Scheduler) -> float:
    """How long ``scheduler.stop()`` took; it is given 20 s before the test fails."""
    stopping = time.monotonic()
    stop = threading.Thread(target=scheduler.stop, daemon=True)
    stop.start()
    stop.join(20)
    assert not stop.is_alive(), "stop() has not returned after 20 s"
    return time.monotonic() - stopping


def test_an_upcaster_that_never_returns_blocks_neither_the_loop_nor_the_stop(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Upcasting runs in a handler thread: while it hangs, other executions run, and a
    stop releases its execution as it would a handler's."""
    entered, let_go = threading.Event(), threading.Event()

    def upcast(data: Any) -> Any:
        entered.set()
        let_go.wait()
        return data

    ran = threading.Event()
    old = one_time("versioned")(lambda ctx: None)  # what the previous deploy wrote
    versioned = one_time("versioned", payload_version=2, upcasters={1: upcast})(lambda ctx: None)
    other = one_time("other")(lambda ctx: ran.set())
    config = SchedulerConfig(
        polling_interval=timedelta(milliseconds=20), shutdown_max_wait=SHUTDOWN_MAX_WAIT
    )
    scheduler = Scheduler(engine, [versioned, other], config)
    scheduler.schedule(engine, old.instance("x"))
    scheduler.start()
    try:
        _wait_for(entered)
        scheduler.schedule(engine, other.instance("y"))
        _wait_for(ran)  # the loop went on while the upcaster hangs
        took = _timed_stop(scheduler)
    finally:
        let_go.set()
    assert took < (SHUTDOWN_MAX_WAIT + STOP_GRACE).total_seconds() + MARGIN, took
    assert "releasing versioned/x: still running after shutdown_max_wait" in caplog.messages
    with engine.connect() as conn:
        picked = conn.execute(text("select picked from scheduled_tasks")).scalars().all()
    assert picked == [False]  # handed back: the next scheduler upcasts it again


def test_stop_returns_when_application_code_blocks_the_event_loop(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Sync application code the loop calls itself (a listener here) can hold the loop:
    ``stop()`` returns all the same, and its log says where the loop is."""
    entered, let_go = threading.Event(), threading.Event()

    class Blocking(SchedulerListener):
        def on_start(self, context: ExecutionContext[Any]) -> None:
            entered.set()
            let_go.wait()

    task = one_time("listened")(lambda ctx: None)
    config = SchedulerConfig(
        polling_interval=timedelta(milliseconds=20), shutdown_max_wait=SHUTDOWN_MAX_WAIT
    )
    scheduler = Scheduler(engine, [task], config, listeners=[Blocking()])
    scheduler.schedule(engine, task.instance("x"))
    scheduler.start()
    try:
        _wait_for(entered)
        took = _timed_stop(scheduler)
    finally:
        let_go.set()
    assert took < (SHUTDOWN_MAX_WAIT + 2 * STOP_GRACE).total_seconds() + MARGIN, took
    (blocked,) = [m for m in caplog.messages if "event loop did not stop" in m]
    assert "in on_start" in blocked
    assert "let_go.wait()" in blocked
