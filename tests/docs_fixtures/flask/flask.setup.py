"""Before the excerpt: the rest of its module (the order model, the payload, the task) and
the environment it reads."""

import os
import threading
from dataclasses import dataclass

from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_scheduler import ExecutionContext, one_time

os.environ["DATABASE_URL"] = "sqlite:///app.db"


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer: Mapped[str] = mapped_column(String(100))


Base.metadata.create_all(create_engine(os.environ["DATABASE_URL"]))


@dataclass
class Confirmation:
    order_id: int


sent: list[int] = []
confirmed = threading.Event()


@one_time("send-confirmation", payload_type=Confirmation, max_retries=3)
def send_confirmation(ctx: ExecutionContext[Confirmation]) -> None:
    sent.append(ctx.payload.order_id)
    confirmed.set()
