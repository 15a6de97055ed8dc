"""Before the background-thread fragment: its URL, its tasks, a due execution, and `app`.

`app` stands in for a sync web application: its `run()` returns once the confirmation has
been sent, as a server's returns when it is stopped.
"""

import time

from sqlalchemy import create_engine

from sqla_scheduler import Cron, ExecutionContext, Scheduler, one_time, recurring

url = "sqlite:///app.db"
sent: list[str] = []


@one_time("send-confirmation", payload_type=str)
def send_confirmation(ctx: ExecutionContext[str]) -> None:
    sent.append(ctx.payload)


@recurring("purge-carts", Cron("0 0 3 * * ?", tz="Europe/Rome"))
def purge_carts(ctx: ExecutionContext[None]) -> None: ...


web = Scheduler(create_engine(url), tasks=[send_confirmation])
web.schedule(web.engine, send_confirmation.instance("order-1", "ada@example.com"))


class Application:
    def run(self) -> None:
        deadline = time.monotonic() + 30
        while not sent and time.monotonic() < deadline:
            time.sleep(0.02)


app = Application()
