"""FastAPI with an async engine: schedule in the request's transaction, run in the lifespan.

Run it from the repository's root:

    DATABASE_URL=sqlite+aiosqlite:///shop.db ADMIN_PASSWORD=secret \\
        uvicorn examples.fastapi_app.app:app
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import DateTime, String
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_scheduler import ExecutionContext, Scheduler, configure_sqlite, migrate, one_time
from sqla_scheduler.admin import create_app

engine = configure_sqlite(create_async_engine(os.environ["DATABASE_URL"]))  # no-op elsewhere


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


class NewOrder(BaseModel):
    id: int
    customer: str


@one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
async def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
    # a real shop would send an email here; this one records that it did
    async with AsyncSession(engine) as session, session.begin():
        order = await session.get(Order, ctx.payload.order_id)
        if order is not None:
            order.confirmed_at = datetime.now(timezone.utc)


scheduler = Scheduler(engine, tasks=[send_confirmation])


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with engine.begin() as conn:
        await conn.run_sync(migrate.upgrade)  # or `sqla-scheduler db upgrade` when you deploy
        await conn.run_sync(Base.metadata.create_all)
    async with scheduler:  # the loop runs while the application serves
        yield
    await engine.dispose()


app = FastAPI(lifespan=lifespan)
app.mount("/admin/jobs", create_app(scheduler, password=os.environ["ADMIN_PASSWORD"]))


@app.post("/orders", status_code=201)
async def place_order(new: NewOrder) -> dict[str, object]:
    async with AsyncSession(engine) as session, session.begin():
        session.add(Order(id=new.id, customer=new.customer))
        await scheduler.schedule(
            session, send_confirmation.instance(f"order-{new.id}", Confirmation(new.id))
        )
        if new.customer.endswith("@blocked.example"):
            raise HTTPException(422)  # rolls back the order and its confirmation
    return {"id": new.id}


@app.get("/orders/{order_id}")
async def get_order(order_id: int) -> dict[str, object]:
    async with AsyncSession(engine) as session:
        order = await session.get(Order, order_id)
    if order is None:
        raise HTTPException(404)
    return {"id": order.id, "confirmed": order.confirmed_at is not None}
