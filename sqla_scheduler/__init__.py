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

from sqla_scheduler.clock import Clock, DatabaseClock, ManualClock, SystemClock
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.context import ExecutionContext, ShutdownSignal
from sqla_scheduler.exceptions import (
    ConfigurationError,
    InvalidScheduleError,
    MissingTableError,
    PayloadError,
    SchedulerError,
    TaskDefinitionError,
    TaskTimeoutError,
    UnknownTaskError,
)
from sqla_scheduler.executions import Execution, ExecutionState
from sqla_scheduler.history import HistoryEntry
from sqla_scheduler.interceptors import ExecutionInterceptor
from sqla_scheduler.listeners import SchedulerListener
from sqla_scheduler.models import ScheduledTask, metadata
from sqla_scheduler.nodes import Node
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
    RecurringTask,
    Task,
    TaskInstance,
    custom,
    one_time,
    recurring,
)

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
    "ExecutionContext",
    "ExecutionInterceptor",
    "ExecutionState",
    "FixedDelay",
    "FixedRate",
    "HistoryEntry",
    "InvalidScheduleError",
    "ManualClock",
    "MissingTableError",
    "NextAt",
    "Node",
    "OneTimeTask",
    "PayloadError",
    "RecurringTask",
    "Schedule",
    "ScheduledTask",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerError",
    "SchedulerListener",
    "ShutdownSignal",
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
