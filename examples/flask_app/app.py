"""Flask with a sync engine: schedule in the request's transaction, run on a thread.

Run it from the repository's root:

    DATABASE_URL=sqlite:///shop.db flask --app examples.flask_app.app:create_application run
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone

from flask import Flask, abort, request
from sqlalchemy import DateTime, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_scheduler import ExecutionContext, Scheduler, configure_sqlite, migrate, one_time
from sqla_scheduler.integrations.flask import init_app


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer: Mapped[str] = mapped_column(String(100))
    confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


@dataclass
class Confirmation:
    order_id: int


def create_application() -> Flask:
    engine = configure_sqlite(create_engine(os.environ["DATABASE_URL"]))  # no-op elsewhere
    migrate.upgrade(engine)  # or run `sqla-scheduler db upgrade` when you deploy
    Base.metadata.create_all(engine)

    @one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
    def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
        # a real shop would send an email here; this one records that it did
        with Session(engine) as session, session.begin():
            order = session.get(Order, ctx.payload.order_id)
            if order is not None:
                order.confirmed_at = datetime.now(timezone.utc)

    scheduler = Scheduler(engine, tasks=[send_confirmation])
    app = Flask(__name__)

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
                abort(422)  # rolls back the order and its confirmation
        return {"id": body["id"]}, 201

    @app.get("/orders/<int:order_id>")
    def get_order(order_id: int) -> dict[str, object]:
        with Session(engine) as session:
            order = session.get(Order, order_id)
        if order is None:
            abort(404)
        return {"id": order.id, "confirmed": order.confirmed_at is not None}

    init_app(app, scheduler)  # runs it in the serving processes, from their first request
    return app
