"""Before the MariaDB lines: their imports and task. Nothing here needs a server."""

from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from sqla_scheduler import Scheduler, one_time


@one_time("send-confirmation")
def send_confirmation(ctx) -> None: ...
