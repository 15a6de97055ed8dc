"""What the scheduler's client methods work with, shared by its facets.

A ``Scheduler`` holds three facets, each built with one ``Client`` and what it alone
needs: ``_observing.Observing`` (listings, history, nodes), ``_control.Control``
(reschedule, cancel, run now, pause) and ``_composing.Composing`` (results, groups).
The client is the scheduler's table and tasks, the clock and config it has at each call,
and the way to tell its running loop of new work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Table

from sqla_scheduler.clock import Clock
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.interceptors import ExecutionInterceptor, capture
from sqla_scheduler.tasks import Task

__all__ = ["Client", "Settings"]


class Settings(Protocol):
    """The scheduler's clock and config as they are now: read at each call, since a
    worker replaces the config with its environment's after the scheduler was made."""

    @property
    def clock(self) -> Clock: ...

    @property
    def config(self) -> SchedulerConfig: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Client:
    """The table, the registered tasks and the settings of one scheduler, and
    ``wake_on_commit``: given the caller's connection, what tells the scheduler's running
    loop of the earliest time it wrote once the transaction commits (``None`` when no loop
    runs in this process)."""

    table: Table
    tasks: Mapping[str, Task[Any]]
    settings: Settings
    capturing: Sequence[ExecutionInterceptor]
    wake_on_commit: Callable[[Connection], Callable[[datetime], None] | None]

    @property
    def clock(self) -> Clock:
        return self.settings.clock

    @property
    def config(self) -> SchedulerConfig:
        return self.settings.config

    def now(self) -> datetime:
        return self.settings.clock.now()

    def trace_context(self) -> dict[str, str] | None:
        """What the interceptors that capture a context capture now; with none of them
        (``capturing`` is empty), scheduling asks nothing and costs nothing."""
        return capture(self.capturing) if self.capturing else None
