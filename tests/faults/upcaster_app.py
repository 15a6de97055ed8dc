"""The application of ``test_worker_survives_upcasters``: one task at payload version 2
whose upcaster raises ``SystemExit(0)`` on a payload that asks for it; each run of its
handler appends the instance id to the file ``RUNS_FILE``. ``upcaster_app:scheduler`` is
built from the environment (``DATABASE_URL``, ``WORKER_NAME``) on first access."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, SchedulerConfig, configure_sqlite, one_time


def upcast(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("exit"):
        raise SystemExit(0)  # what a careless upcaster (or a library it calls) may do
    return {**data, "version": 2}


def record(ctx: ExecutionContext[dict[str, Any]]) -> None:
    with open(os.environ["RUNS_FILE"], "a") as runs:
        runs.write(f"{ctx.instance_id}\n")


def build(url: str, name: str) -> Scheduler:
    engine = configure_sqlite(create_engine(url))
    task = one_time("versioned", payload_version=2, upcasters={1: upcast})(record)
    config = SchedulerConfig(
        scheduler_name=name,
        concurrency=2,
        polling_interval=timedelta(milliseconds=100),
        shutdown_max_wait=timedelta(seconds=5),
    )
    return Scheduler(engine, [task], config)


def __getattr__(name: str) -> Any:
    if name == "scheduler":
        built = globals()["scheduler"] = build(
            os.environ["DATABASE_URL"], os.environ.get("WORKER_NAME", "worker")
        )
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
