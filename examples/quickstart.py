"""A small, runnable tour of sqla-scheduler on a SQLite file.

An order and its confirmation task commit together; an order whose transaction rolls
back leaves no task behind. Run it with ``make demo`` or ``python examples/quickstart.py``.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from datetime import datetime, timedelta, timezone

from sqlalchemy import Integer, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_scheduler import (
    ExecutionContext,
    Scheduler,
    configure_sqlite,
    migrate,
    one_time,
    recurring,
)
from sqla_scheduler.testing import build_context


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer: Mapped[str] = mapped_column(String(100))


@dataclasses.dataclass
class Confirmation:
    order_id: int
    customer: str


@one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
    print(f"  -> emailing {ctx.payload.customer} about order {ctx.payload.order_id}")


@recurring("nightly-report", "DAILY|02:00|Europe/Rome")
def nightly_report(ctx: ExecutionContext[None]) -> None:
    print("  -> building the nightly report")


def place_order(session: Session, scheduler: Scheduler, order_id: int, customer: str) -> None:
    session.add(Order(id=order_id, customer=customer))
    scheduler.schedule(
        session,
        send_confirmation.instance(f"order-{order_id}", Confirmation(order_id, customer)),
    )


def main() -> None:
    path = os.environ.get("QUICKSTART_DB") or os.path.join(tempfile.mkdtemp(), "quickstart.db")
    url = f"sqlite:///{path}"
    print(f"database: {url}")
    migrate.upgrade(url)  # the same migrations `sqla-scheduler db upgrade` applies
    engine = configure_sqlite(create_engine(url))  # WAL and a busy timeout
    Base.metadata.create_all(engine)
    scheduler = Scheduler(engine, tasks=[send_confirmation, nightly_report])

    with Session(engine) as session, session.begin():
        place_order(session, scheduler, 1, "ada@example.com")
    print("order 1 committed, and its confirmation with it")

    with Session(engine) as session:
        place_order(session, scheduler, 2, "bob@example.com")
        session.rollback()
    print("order 2 rolled back, and its confirmation with it")

    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with Session(engine) as session, session.begin():
        place_order(session, scheduler, 3, "cy@example.com")
        scheduler.reschedule(session, "send-confirmation", "order-3", later)

    print("\nscheduled executions:")
    for execution in scheduler.executions(engine):
        when = f"{execution.execution_time:%H:%M:%S}"
        print(f"  {execution.task_name}/{execution.instance_id} at {when}")

    print("\nrunning what is due now, inline:")
    for execution in scheduler.executions(engine, "due"):
        task = scheduler.task(execution.task_name)
        task(
            build_context(
                task, task.codec.decode(execution.data), instance_id=execution.instance_id
            )
        )
        scheduler.cancel(engine, execution.task_name, execution.instance_id)

    left = [e.instance_id for e in scheduler.executions(engine)]
    print(f"\nstill scheduled: {left}")
    engine.dispose()


if __name__ == "__main__":
    main()
