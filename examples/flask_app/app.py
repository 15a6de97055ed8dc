"""Flask with a sync engine: schedule in the request's transaction, run on a thread.

``init_app`` runs the loop on a background thread in each process that serves the
application, from its first request (not in the reloader's parent process, not during
``flask routes`` or other commands), and stops it gracefully when the process exits. Run
it with::

    DATABASE_URL=sqlite:///shop.db flask --app examples.flask_app.app:create_application run
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timedelta, timezone

from flask import Flask, abort, request
from sqlalchemy import DateTime, Integer, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_scheduler import (
    ExecutionContext,
    Scheduler,
    SchedulerConfig,
    configure_sqlite,
    migrate,
    one_time,
)
from sqla_scheduler.integrations.flask import init_app


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer: Mapped[str] = mapped_column(String(100))
    confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


@dataclasses.dataclass
class Confirmation:
    order_id: int


def create_application(url: str | None = None) -> Flask:
    """The application; ``url`` defaults to ``DATABASE_URL``."""
    url = url or os.environ["DATABASE_URL"]
    migrate.upgrade(url)  # or run `sqla-scheduler db upgrade` when you deploy
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":
        configure_sqlite(engine)
    Base.metadata.create_all(engine)

    @one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
    def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
        with Session(engine) as session, session.begin():
            order = session.get(Order, ctx.payload.order_id)
            if order is not None:
                order.confirmed_at = datetime.now(timezone.utc)

    # SQLite has no LISTEN/NOTIFY: other processes' schedules are seen at the next poll
    config = SchedulerConfig(polling_interval=timedelta(milliseconds=200))
    scheduler = Scheduler(engine, tasks=[send_confirmation], config=config)

    app = Flask(__name__)
    init_app(app, scheduler)  # app.extensions["sqla_scheduler"] is the scheduler

    @app.post("/orders")
    def place_order() -> tuple[dict[str, object], int]:
        body = request.get_json()
        with Session(engine) as session, session.begin():
            session.add(Order(id=body["id"], customer=body["customer"]))
            scheduler.schedule(
                session,
                send_confirmation.instance(f"order-{body['id']}", Confirmation(body["id"])),
            )
            if body["customer"].endswith("@blocked.example"):
                abort(422)  # the exception rolls back the order and its confirmation
        return {"id": body["id"]}, 201

    @app.get("/orders/<int:order_id>")
    def get_order(order_id: int) -> dict[str, object]:
        with Session(engine) as session:
            order = session.get(Order, order_id)
            if order is None:
                abort(404)
            return {"id": order.id, "confirmed": order.confirmed_at is not None}

    return app
