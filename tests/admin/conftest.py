"""Fixtures for the admin page: a scheduler with one task of each kind, a table seeded with
executions in every state, and an HTTP client on the ASGI app (``tests.support.admin``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from sqla_scheduler import Scheduler
from sqla_scheduler.admin import create_app
from tests.admin._browser import browser, chromium  # noqa: F401  (the browser tests' fixtures)
from tests.support import Harness
from tests.support.admin import (
    PASSWORD,
    SECRET,
    USER,
    AppFactory,
    client_for,
    make_scheduler,
    seed,
)


@pytest.fixture
def scheduler(db: Harness) -> Scheduler:
    return make_scheduler(db.engine)


@pytest.fixture
def seeded(db: Harness) -> Harness:
    seed(db.sync_engine)
    return db


@pytest.fixture
def make_app(scheduler: Scheduler) -> AppFactory:
    def build(**options: Any) -> ASGIApp:
        return create_app(scheduler, username=USER, password=PASSWORD, **options)

    return build


@pytest.fixture
async def client(make_app: AppFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(make_app()) as c:
        yield c


@pytest.fixture
async def actions(seeded: Harness, make_app: AppFactory) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the seeded database's admin app with actions on (secret ``SECRET``)."""
    async with client_for(make_app(actions=True, secret=SECRET)) as c:
        yield c
