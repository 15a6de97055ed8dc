"""The application module docs/flask.md imports: a scheduler on the script's ``app.db``."""

from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, one_time


@one_time("send-confirmation")
def send_confirmation(ctx: ExecutionContext[None]) -> None: ...


scheduler = Scheduler(create_engine("sqlite:///app.db"), tasks=[send_confirmation])
