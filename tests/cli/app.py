"""A small application for the command-line tests: two tasks, its engine on DATABASE_URL."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, one_time


@one_time("send-email")
def send_email(ctx: ExecutionContext[Any]) -> None:
    """Nothing to do: the tests only list executions."""


@one_time("charge")
def charge(ctx: ExecutionContext[Any]) -> None:
    """Nothing to do: the tests only list executions."""


scheduler = Scheduler(create_engine(os.environ["DATABASE_URL"]), tasks=[send_email, charge])
