"""sqla-scheduler: a persistent, cluster-safe task scheduler for SQLAlchemy applications.

One table, many scheduler processes, and a ``schedule`` that commits or rolls back with the
application's own transaction::

    from sqla_scheduler import Scheduler, one_time

    @one_time("send-welcome-email")
    def send_welcome_email(ctx):
        ...

    scheduler = Scheduler(engine, tasks=[send_welcome_email])
    with Session(engine) as session, session.begin():
        session.add(user)
        scheduler.schedule(session, send_welcome_email.instance(f"user-{user.id}", {"id": 1}))
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from sqla_scheduler.clock import Clock, DatabaseClock, ManualClock, SystemClock
    from sqla_scheduler.config import SchedulerConfig
    from sqla_scheduler.context import ExecutionContext, ShutdownSignal
    from sqla_scheduler.exceptions import (
        ConfigurationError,
        ExecutionCancelled,
        InvalidScheduleError,
        MissingTableError,
        NotAwaitedError,
        PayloadError,
        SchedulerError,
        Snooze,
        TaskDefinitionError,
        TaskTimeoutError,
        UnknownTaskError,
    )
    from sqla_scheduler.executions import Execution, ExecutionState
    from sqla_scheduler.groups import Group
    from sqla_scheduler.history import HistoryEntry
    from sqla_scheduler.interceptors import ExecutionInterceptor
    from sqla_scheduler.listeners import SchedulerListener
    from sqla_scheduler.models import ScheduledTask, metadata
    from sqla_scheduler.nodes import Node
    from sqla_scheduler.results import Result
    from sqla_scheduler.scheduler import Scheduler
    from sqla_scheduler.schedules import (
        Cron,
        Daily,
        Disabled,
        FixedDelay,
        FixedRate,
        Schedule,
        parse_schedule,
    )
    from sqla_scheduler.sqlite import configure_sqlite
    from sqla_scheduler.tasks import (
        KEEP,
        CustomTask,
        NextAt,
        OneTimeTask,
        RateLimit,
        RecurringTask,
        Task,
        TaskInstance,
        custom,
        one_time,
        recurring,
    )

#: Where each export lives: ``import sqla_scheduler`` imports none of them, the first use of a
#: name imports its module (PEP 562), so a command-line start pays only for what it uses.
_EXPORTS = {
    "Clock": "sqla_scheduler.clock",
    "DatabaseClock": "sqla_scheduler.clock",
    "ManualClock": "sqla_scheduler.clock",
    "SystemClock": "sqla_scheduler.clock",
    "SchedulerConfig": "sqla_scheduler.config",
    "ExecutionContext": "sqla_scheduler.context",
    "ShutdownSignal": "sqla_scheduler.context",
    "ConfigurationError": "sqla_scheduler.exceptions",
    "ExecutionCancelled": "sqla_scheduler.exceptions",
    "InvalidScheduleError": "sqla_scheduler.exceptions",
    "MissingTableError": "sqla_scheduler.exceptions",
    "NotAwaitedError": "sqla_scheduler.exceptions",
    "PayloadError": "sqla_scheduler.exceptions",
    "SchedulerError": "sqla_scheduler.exceptions",
    "Snooze": "sqla_scheduler.exceptions",
    "TaskDefinitionError": "sqla_scheduler.exceptions",
    "TaskTimeoutError": "sqla_scheduler.exceptions",
    "UnknownTaskError": "sqla_scheduler.exceptions",
    "Execution": "sqla_scheduler.executions",
    "ExecutionState": "sqla_scheduler.executions",
    "Group": "sqla_scheduler.groups",
    "HistoryEntry": "sqla_scheduler.history",
    "ExecutionInterceptor": "sqla_scheduler.interceptors",
    "SchedulerListener": "sqla_scheduler.listeners",
    "ScheduledTask": "sqla_scheduler.models",
    "metadata": "sqla_scheduler.models",
    "Node": "sqla_scheduler.nodes",
    "Result": "sqla_scheduler.results",
    "Scheduler": "sqla_scheduler.scheduler",
    "Cron": "sqla_scheduler.schedules",
    "Daily": "sqla_scheduler.schedules",
    "Disabled": "sqla_scheduler.schedules",
    "FixedDelay": "sqla_scheduler.schedules",
    "FixedRate": "sqla_scheduler.schedules",
    "Schedule": "sqla_scheduler.schedules",
    "parse_schedule": "sqla_scheduler.schedules",
    "configure_sqlite": "sqla_scheduler.sqlite",
    "KEEP": "sqla_scheduler.tasks",
    "CustomTask": "sqla_scheduler.tasks",
    "NextAt": "sqla_scheduler.tasks",
    "OneTimeTask": "sqla_scheduler.tasks",
    "RateLimit": "sqla_scheduler.tasks",
    "RecurringTask": "sqla_scheduler.tasks",
    "Task": "sqla_scheduler.tasks",
    "TaskInstance": "sqla_scheduler.tasks",
    "custom": "sqla_scheduler.tasks",
    "one_time": "sqla_scheduler.tasks",
    "recurring": "sqla_scheduler.tasks",
}

__all__ = [
    "KEEP",
    "Clock",
    "ConfigurationError",
    "Cron",
    "CustomTask",
    "Daily",
    "DatabaseClock",
    "Disabled",
    "Execution",
    "ExecutionCancelled",
    "ExecutionContext",
    "ExecutionInterceptor",
    "ExecutionState",
    "FixedDelay",
    "FixedRate",
    "Group",
    "HistoryEntry",
    "InvalidScheduleError",
    "ManualClock",
    "MissingTableError",
    "NextAt",
    "Node",
    "NotAwaitedError",
    "OneTimeTask",
    "PayloadError",
    "RateLimit",
    "RecurringTask",
    "Result",
    "Schedule",
    "ScheduledTask",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerError",
    "SchedulerListener",
    "ShutdownSignal",
    "Snooze",
    "SystemClock",
    "Task",
    "TaskDefinitionError",
    "TaskInstance",
    "TaskTimeoutError",
    "UnknownTaskError",
    "__version__",
    "configure_sqlite",
    "custom",
    "metadata",
    "one_time",
    "parse_schedule",
    "recurring",
]

__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sqla_scheduler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
