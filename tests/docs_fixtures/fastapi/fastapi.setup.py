"""Before the excerpt: the rest of its module (the order model, the payload, the request
body, the task) and the environment it reads."""

import os
from dataclasses import dataclass

from pydantic import BaseModel
from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_scheduler import ExecutionContext, one_time

PASSWORD = "correct horse battery staple"
os.environ["DATABASE_URL"] = "sqlite+aiosqlite:///app.db"
os.environ["ADMIN_PASSWORD"] = PASSWORD


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer: Mapped[str] = mapped_column(String(100))


Base.metadata.create_all(create_engine("sqlite:///app.db"))


@dataclass
class Confirmation:
    order_id: int


class NewOrder(BaseModel):
    id: int
    customer: str


confirmed: list[int] = []


@one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
async def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
    confirmed.append(ctx.payload.order_id)
