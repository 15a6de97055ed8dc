"""A worker application whose one task swallows its cancellation forever, for the test
that a worker stops all the same: ``sqla-scheduler worker
tests.concurrency.stubborn_app:scheduler`` with ``DATABASE_URL`` set. The handler prints
``stubborn started`` when it starts."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import anyio
from sqlalchemy import create_engine

from sqla_scheduler import Scheduler, SchedulerConfig, one_time


@one_time("stubborn")
async def stubborn(ctx: Any) -> None:
    print("stubborn started", flush=True)
    while True:
        try:
            await anyio.sleep(1)
        except anyio.get_cancelled_exc_class():
            pass


def build() -> Scheduler:
    config = SchedulerConfig(
        scheduler_name="stubborn-worker",
        polling_interval=timedelta(milliseconds=50),
        shutdown_max_wait=timedelta(milliseconds=300),
    )
    return Scheduler(create_engine(os.environ["DATABASE_URL"]), [stubborn], config)


def __getattr__(name: str) -> Any:
    # built on first access, so that importing needs no DATABASE_URL
    if name == "scheduler":
        built = globals()["scheduler"] = build()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
