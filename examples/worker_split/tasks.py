"""Tasks and the Scheduler, shared by the web processes and the worker.

Importing this module builds the engine from ``DATABASE_URL``; nothing runs until a
process runs the scheduler (``sqla-scheduler worker examples.worker_split.tasks:scheduler``).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timezone

from sqlalchemy import Column, DateTime, MetaData, String, Table, create_engine, insert

from sqla_scheduler import ExecutionContext, Scheduler, one_time

engine = create_engine(os.environ["DATABASE_URL"])

app_metadata = MetaData()
welcomes = Table(
    "welcomes",
    app_metadata,
    Column("username", String(100), primary_key=True),
    Column("sent_at", DateTime(timezone=True), nullable=False),
)


@dataclasses.dataclass
class Welcome:
    username: str


@one_time("send-welcome", payload_type=Welcome, max_retries=5)
def send_welcome(ctx: ExecutionContext[Welcome]) -> None:
    # idempotent, as handlers must be: a retried welcome is recorded once
    with engine.begin() as conn:
        sent = conn.execute(
            welcomes.select().where(welcomes.c.username == ctx.payload.username)
        ).first()
        if sent is None:
            conn.execute(
                insert(welcomes).values(
                    username=ctx.payload.username, sent_at=datetime.now(timezone.utc)
                )
            )


scheduler = Scheduler(engine, tasks=[send_welcome])
