"""Before "More calls": the page's task, a scheduler, and a session in a transaction."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from sqla_scheduler import ExecutionContext, Scheduler, one_time


@dataclass
class Confirmation:
    order_id: int
    email: str


@one_time("send-confirmation", payload_type=Confirmation, max_retries=5)
async def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None: ...


engine = create_engine("sqlite:///app.db")
scheduler = Scheduler(engine, tasks=[send_confirmation])
instances = [
    send_confirmation.instance(f"order-{n}", Confirmation(n, f"customer-{n}@example.com"))
    for n in range(1, 11)
]
at = datetime.now(timezone.utc) + timedelta(days=1)
confirmation = Confirmation(7, "new-address@example.com")
session = Session(engine)
session.begin()
