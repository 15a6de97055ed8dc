"""Hooks into the life of executions.

Subclass [`SchedulerListener`][], override what you need, and pass instances as
``Scheduler(..., listeners=[...])``. Hooks run on the scheduler's event loop and must be
quick; an exception raised by a hook is logged and otherwise ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqla_scheduler._app_code import calling
from sqla_scheduler._execution import Execution
from sqla_scheduler.context import ExecutionContext

__all__ = ["SchedulerListener", "dispatch"]

log = logging.getLogger("sqla_scheduler")


class SchedulerListener:
    """Base class of listeners; every hook does nothing by default."""

    def on_start(self, context: ExecutionContext[Any]) -> None:
        """An execution is about to run its handler."""

    def on_success(self, context: ExecutionContext[Any], duration: timedelta) -> None:
        """An execution's handler returned and its outcome was committed."""

    def on_failure(
        self, context: ExecutionContext[Any], error: BaseException, duration: timedelta
    ) -> None:
        """An execution's handler raised (or returned something unusable); it will retry."""

    def on_abandon(self, context: ExecutionContext[Any], error: BaseException | None) -> None:
        """An execution ran out of retries and was removed, its ``on_abandon`` hook committed."""

    def on_dead_execution(self, execution: Execution) -> None:
        """A dead execution (stale heartbeat) was found and made due again."""


def dispatch(listeners: Sequence[SchedulerListener], hook: str, *args: Any) -> None:
    """Call ``hook`` on every listener in order; a listener that raises is logged and skipped."""
    for listener in listeners:
        try:
            with calling(None, hook, listener):  # SystemExit too: see there
                getattr(listener, hook)(*args)
        except Exception:
            log.exception("listener %r failed in %s", listener, hook)
