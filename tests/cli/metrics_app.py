"""The command-line tests' application with ``SchedulerMetrics`` among its interceptors
(the default registry): the worker's ``--collect-metrics`` keeps its gauges current."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, configure_sqlite, one_time
from sqla_scheduler.integrations.prometheus import SchedulerMetrics


@one_time("report")
def report(ctx: ExecutionContext[Any]) -> None:
    """Nothing to do: the tests count executions."""


engine = configure_sqlite(create_engine(os.environ["DATABASE_URL"]))
scheduler = Scheduler(engine, tasks=[report], interceptors=[SchedulerMetrics()])
