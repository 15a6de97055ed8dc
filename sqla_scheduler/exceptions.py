"""Errors raised by sqla-scheduler, and ``Snooze``, which a handler raises.

The hierarchy:

```text
SchedulerError                  base of everything raised here
├── ConfigurationError          (ValueError) a bad SchedulerConfig key or value
├── TaskDefinitionError         (ValueError) a task, instance or payload that cannot be defined
│   └── InvalidScheduleError    a schedule expression or value that cannot be used
├── PayloadError                (ValueError) a payload that cannot be encoded or decoded
├── UnknownTaskError            (LookupError) a task name this scheduler does not know
├── MissingTableError           the scheduler's table is not in the database (not migrated)
├── UnknownStepError            (LookupError) tables there, but no migration step known for them
├── NotAwaitedError             (RuntimeError) a commit without an async call never awaited
├── TaskTimeoutError            (TimeoutError) an attempt ran past its task's timeout
└── ExecutionCancelled          ctx.raise_if_cancelled(): cancel asked this execution to stop

Snooze                          (Exception) not an error: a handler's "run me again later"
```

Every message names the task, the field and the offending value where they exist.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqla_scheduler._durations import format_duration

__all__ = [
    "ConfigurationError",
    "ExecutionCancelled",
    "InvalidScheduleError",
    "MissingTableError",
    "NotAwaitedError",
    "PayloadError",
    "SchedulerError",
    "Snooze",
    "TaskDefinitionError",
    "TaskTimeoutError",
    "UnknownStepError",
    "UnknownTaskError",
]


class SchedulerError(Exception):
    """Base class of every error raised by sqla-scheduler."""


class ConfigurationError(SchedulerError, ValueError):
    """A configuration key is unknown or its value is invalid."""


class TaskDefinitionError(SchedulerError, ValueError):
    """A task definition, task instance or scheduling argument is invalid."""


class InvalidScheduleError(TaskDefinitionError):
    """A schedule expression, text form or schedule argument is invalid."""


class PayloadError(SchedulerError, ValueError):
    """A payload cannot be encoded to JSON or decoded into the task's payload type."""


class UnknownTaskError(SchedulerError, LookupError):
    """A task name is not registered with this scheduler."""


class MissingTableError(SchedulerError):
    """The scheduler's table does not exist in the database: its migrations were not applied.

    Apply them with ``sqla-scheduler db upgrade`` or the application's own Alembic project.
    """


class UnknownStepError(SchedulerError, LookupError):
    """The scheduler's tables are in the database, but neither a record of the migration
    step they are at nor a revision of the ``sqla_scheduler`` branch says which it is
    (tables made by hand, or with ``metadata.create_all``): the message says what to do.
    """


class NotAwaitedError(SchedulerError, RuntimeError):
    """A transaction was about to commit without the work of a scheduler call made with an
    ``AsyncSession`` or ``AsyncConnection`` whose awaitable was never awaited (a forgotten
    ``await``): the commit is refused, so the business write never commits without it."""


class TaskTimeoutError(SchedulerError, TimeoutError):
    """An attempt ran past its task's ``timeout``: the failure it is recorded as (the
    error text of the attempt, ``ctx.last_error`` of the next one). The retry policy
    applies as to any failure."""

    def __init__(self, task_name: str, limit: timedelta, what: str) -> None:
        super().__init__(f"task {task_name!r} timed out (timeout={format_duration(limit)}): {what}")


class ExecutionCancelled(SchedulerError):
    """Raised by ``ctx.raise_if_cancelled()`` in a handler whose execution ``cancel`` asked
    to stop. Let it propagate: the execution ends ``cancelled`` whatever its handler does
    once the stop was requested (a transactional handler's writes are rolled back), and no
    failure is counted."""


class Snooze(Exception):
    """Raised by a handler: run this execution again after ``delay``, with the same payload.

    ``delay`` is a ``timedelta``, a number of seconds, or an aware ``datetime`` to run
    at. A snooze is not a failure: ``consecutive_failures``, ``last_error`` and the
    retries left stay as they were, ``ctx.snoozes`` counts it, and history records it as
    ``snoozed`` when ``history="all"``. A transactional handler's writes are rolled back
    with it. A recurring task's run moves to then; its schedule is unchanged.

    ``delay`` is read when the handler has raised it: a naive ``datetime``, a negative
    delay or anything else makes the attempt a failure whose error names the task and
    the problem.

    ```python
    @one_time("poll-export")
    def poll_export(ctx):
        if not export_ready(ctx.payload["id"]):
            raise Snooze(timedelta(minutes=5))
    ```
    """

    def __init__(self, delay: timedelta | float | datetime) -> None:
        super().__init__(delay)
        self.delay = delay
        """How long to wait, or when to run again, as the handler gave it."""
