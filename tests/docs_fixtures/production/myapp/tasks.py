"""The application module the page's manifest runs: a scheduler on the script's ``app.db``,
with the page's ``shutdown_max_wait`` and ``heartbeat_interval``."""

from datetime import timedelta

from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, SchedulerConfig, one_time


@one_time("send-confirmation")
def send_confirmation(ctx: ExecutionContext[None]) -> None: ...


config = SchedulerConfig(
    shutdown_max_wait=timedelta(seconds=25), heartbeat_interval=timedelta(seconds=30)
)
scheduler = Scheduler(create_engine("sqlite:///app.db"), [send_confirmation], config)
