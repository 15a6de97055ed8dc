"""How one scheduler's loop is run: in the caller's task group, as an async context
manager, or on a background thread; at most one ``Runner`` at a time."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal, start_blocking_portal
from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._bridge import check_backend
from sqla_scheduler._runner.loop import Runner

__all__ = ["Lifecycle"]


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
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal_future: Future[None] | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Run a loop until ``request_stop`` (or cancellation), then stop it gracefully."""
        if self.runner is not None:
            raise RuntimeError(f"{self._owner!r} is already running")
        runner = self.runner = self._make_runner()
        try:
            await runner.run(task_status=task_status)
        finally:
            self.runner = None

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
        self._portal_cm = start_blocking_portal(backend)
        self._portal = self._portal_cm.__enter__()
        try:
            self._portal_future, _ = self._portal.start_task(self._run_in_group)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            self._portal = self._portal_cm = None
            raise

    def stop(self) -> None:
        """Stop the loop ``start`` began, waiting for it to wind down; nothing if none."""
        portal, cm, future = self._portal, self._portal_cm, self._portal_future
        if portal is None or cm is None or future is None:
            return
        try:
            portal.call(self.request_stop)
            future.result()
        finally:
            self._portal = self._portal_cm = self._portal_future = None
            cm.__exit__(None, None, None)

    async def _run_in_group(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        await self.run(task_status=task_status)
