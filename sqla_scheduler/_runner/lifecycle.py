"""How one scheduler's loop is run: in the caller's task group, as an async context
manager, or on a background thread; at most one ``Runner`` at a time."""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal
from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._bridge import check_backend
from sqla_scheduler._runner.loop import Runner
from sqla_scheduler._runner.workers import STOP_GRACE

__all__ = ["Lifecycle"]

log = logging.getLogger("sqla_scheduler")


class Lifecycle:
    """The running state of one scheduler (``owner``, named in errors).

    ``make_runner`` builds a fresh ``Runner`` for each run, so a scheduler can be run again
    after it stopped.
    """

    def __init__(
        self, owner: object, engine: Engine | AsyncEngine, make_runner: Callable[[], Runner]
    ) -> None:
        self._owner = owner
        self._engine = engine
        self._make_runner = make_runner
        #: The runner of the loop running now, if any.
        self.runner: Runner | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._portal: BlockingPortal | None = None
        self._portal_future: Future[None] | None = None
        self._thread: threading.Thread | None = None
        #: Set by ``stop``: the stopper thread ``start`` began then asks the loop to stop.
        self._stop_asked = threading.Event()
        #: The executions whose handlers ignored their cancellation and were left running
        #: when the last run stopped (``task/instance``; see ``Workers.left_running``).
        self.left_running: list[str] = []

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Run a loop until ``request_stop`` (or cancellation), then stop it gracefully."""
        if self.runner is not None:
            raise RuntimeError(f"{self._owner!r} is already running")
        runner = self.runner = self._make_runner()
        self.left_running = []
        try:
            await runner.run(task_status=task_status)
        finally:
            self.runner = None
            self.left_running = list(runner.workers.left_running)

    def request_stop(self) -> None:
        """Ask the running loop, if any, to stop."""
        if self.runner is not None:
            self.runner.request_stop()

    async def enter(self) -> None:
        """Start a loop in a task group of this lifecycle's own; returns once it runs."""
        group = anyio.create_task_group()
        await group.__aenter__()
        try:
            await group.start(self._run_in_group)
        except BaseException:
            # The loop failed before it ran (a missing table, an unreachable database), and
            # it was the group's only task: leave the group as if nothing happened, so the
            # caller sees that one error rather than an exception group wrapping it.
            await group.__aexit__(None, None, None)
            raise
        self._group = group

    async def exit(self, *exc_info: Any) -> bool | None:
        """Stop the loop ``enter`` started and wait for it to wind down."""
        group, self._group = self._group, None
        self.request_stop()
        assert group is not None
        return await group.__aexit__(*exc_info)

    def start(self, backend: str) -> None:
        """Run a loop on a background thread with an event loop of ``backend``."""
        if self._portal is not None:
            raise RuntimeError(f"{self._owner!r} was already started")
        check_backend(self._engine, backend)
        portal, thread = _start_portal(backend)
        try:
            self._portal_future, _ = portal.start_task(self._run_in_group)
        except BaseException:
            _stop_portal(portal, thread, wait=True)
            raise
        self._portal, self._thread = portal, thread
        # The stopper waits for the event loop (as a portal's calls do, however they are
        # made), so it is a thread of its own, started now: from Python 3.12 ``stop`` may
        # start none, in the ``atexit`` callback where the Flask integration calls it.
        asked = self._stop_asked = threading.Event()
        threading.Thread(
            target=self._stop_when_asked,
            args=(portal, asked),
            name="sqla-scheduler-stop",
            daemon=True,
        ).start()

    def stop(self) -> None:
        """Stop the loop ``start`` began, waiting for it to wind down; nothing if none.

        Returns within ``shutdown_max_wait`` and twice ``STOP_GRACE`` whatever application
        code does: handlers that ignore their cancellation are left running, and so is an
        event loop that application code blocks (a listener, an interceptor or a
        ``payload_type`` that never returns); its thread is a daemon, which does not keep
        the process from exiting, and what it holds is revived once its heartbeats are
        stale.
        """
        portal, future, thread = self._portal, self._portal_future, self._thread
        if portal is None or future is None or thread is None:
            return
        runner = self.runner
        within = STOP_GRACE * 2
        if runner is not None:
            within += runner.config.shutdown_max_wait
        self._stop_asked.set()
        self._portal = self._portal_future = self._thread = None
        try:
            future.exception(timeout=within.total_seconds())
        except concurrent.futures.TimeoutError:
            _log_blocked(thread, within)
            return
        future.result()  # what the loop raised, if anything
        _stop_portal(portal, thread, wait=not self.left_running)

    def _stop_when_asked(self, portal: BlockingPortal, asked: threading.Event) -> None:
        asked.wait()
        with contextlib.suppress(BaseException):  # ``stop`` raises what the loop raised
            portal.call(self.request_stop)

    async def _run_in_group(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        await self.run(task_status=task_status)


def _log_blocked(thread: threading.Thread, within: timedelta) -> None:
    """Say that ``thread``'s event loop did not stop ``within``, and where it is stuck."""
    frame = sys._current_frames().get(thread.ident or 0)
    where = "".join(traceback.format_stack(frame, limit=6)) if frame is not None else ""
    log.error(
        "the scheduler's event loop did not stop within %ss: code running in it does not "
        "return (sync code in a listener, an interceptor, a payload_type or a custom "
        "schedule, or async code that never awaits); leaving it to its daemon thread, its "
        "executions picked until their heartbeats are stale (dead_after). It is at:\n%s",
        within.total_seconds(),
        where.rstrip() or "(unknown)",
    )


def _start_portal(backend: str) -> tuple[BlockingPortal, threading.Thread]:
    """An event loop of ``backend`` on a daemon thread, and its portal.

    Like ``anyio.from_thread.start_blocking_portal``, but the caller decides whether to
    wait for the thread to end: an event loop waits, as it closes, for every task still
    running, and a handler that ignores its cancellation never ends.
    """
    ready: Future[BlockingPortal] = Future()

    async def serve() -> None:
        async with BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(serve, backend=backend)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)

    thread = threading.Thread(target=run, name=f"sqla-scheduler-{backend}-loop", daemon=True)
    thread.start()
    return ready.result(), thread


def _stop_portal(portal: BlockingPortal, thread: threading.Thread, *, wait: bool) -> None:
    """Stop ``portal``'s event loop; with ``wait``, until its thread has ended."""
    with contextlib.suppress(RuntimeError):  # its event loop has ended already
        portal.call(portal.stop)
    if wait:
        thread.join()
