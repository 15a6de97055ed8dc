"""FastAPI with an async engine: schedule in the request's transaction, run in the lifespan.

``POST /orders`` inserts an order and schedules its confirmation in one transaction; a
request that fails rolls both back. The scheduler runs for as long as the application
(``async with scheduler`` in the lifespan) and its admin page is mounted at
``/admin/jobs``. Run it with::

    DATABASE_URL=postgresql+psycopg://app@localhost/app ADMIN_PASSWORD=secret \\
        uvicorn --factory examples.fastapi_app.app:create_application
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timezone

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import DateTime, Integer, String
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_scheduler import ExecutionContext, Scheduler, one_time
from sqla_scheduler.admin import create_app


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


class NewOrder(BaseModel):
    id: int
    customer: str


def create_application(url: str | None = None, admin_password: str | None = None) -> FastAPI:
    """The application; ``url`` and ``admin_password`` default to the environment."""
    engine: AsyncEngine = create_async_engine(url or os.environ["DATABASE_URL"])

    @one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
    async def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
        # a real shop would send an email here; this one records that it did
        async with AsyncSession(engine) as session, session.begin():
            order = await session.get(Order, ctx.payload.order_id)
            if order is not None:
                order.confirmed_at = datetime.now(timezone.utc)

    # on PostgreSQL a committed schedule wakes the loop at once (LISTEN/NOTIFY)
    scheduler = Scheduler(engine, tasks=[send_confirmation])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        async with scheduler:  # the loop runs while the application serves
            yield
        await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    app.state.scheduler = scheduler
    app.state.engine = engine

    @app.post("/orders", status_code=201)
    async def place_order(new: NewOrder) -> dict[str, object]:
        async with AsyncSession(engine) as session, session.begin():
            session.add(Order(id=new.id, customer=new.customer))
            await scheduler.schedule(
                session, send_confirmation.instance(f"order-{new.id}", Confirmation(new.id))
            )
            if new.customer.endswith("@blocked.example"):
                # raising inside the transaction rolls back the order *and* its confirmation
                raise HTTPException(status_code=422, detail="customer is blocked")
        return {"id": new.id, "confirmation": f"order-{new.id}"}

    @app.get("/orders/{order_id}")
    async def get_order(order_id: int) -> dict[str, object]:
        async with AsyncSession(engine) as session:
            order = await session.get(Order, order_id)
            if order is None:
                raise HTTPException(status_code=404)
            return {"id": order.id, "confirmed": order.confirmed_at is not None}

    password = admin_password or os.environ["ADMIN_PASSWORD"]
    app.mount("/admin/jobs", create_app(scheduler, password=password))
    return app
