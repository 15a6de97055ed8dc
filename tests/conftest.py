"""Shared fixtures: a throwaway PostgreSQL cluster and a fresh database per test.

Every database test gets a ``db`` harness, parametrized over a sync ``Engine`` and an
``AsyncEngine`` (psycopg), on a database cloned from a migrated template. At teardown the
harness asserts that no pooled connection was leaked.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sqla_scheduler import migrate
from tests._postgres import PostgresCluster

TEMPLATE_DB = "sqla_scheduler_template"
_counter = itertools.count()


async def wait_for(condition: Callable[[], bool], deadline: float = 20) -> None:
    """Poll ``condition`` until it holds; fail after ``deadline`` seconds."""
    with anyio.fail_after(deadline):
        while not condition():  # noqa: ASYNC110 - the condition is a database query
            await anyio.sleep(0.01)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_template(pg_cluster: PostgresCluster) -> str:
    """A database migrated to head, cloned for each test."""
    pg_cluster.create_database(TEMPLATE_DB)
    migrate.upgrade(pg_cluster.url(TEMPLATE_DB))
    return TEMPLATE_DB


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster, pg_template: str) -> Iterator[str]:
    """URL of a fresh, migrated database for this test alone."""
    name = f"t{next(_counter)}"
    pg_cluster.create_database(name, template=pg_template)
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Harness:
    """One test's database, reached through a sync or an async engine.

    ``engine`` is what the code under test gets; ``sync_engine`` is a separate sync engine
    the test uses to look at the table. :meth:`resolve` awaits a result when the code
    under test returned an awaitable, so one test body covers both modes.
    """

    def __init__(self, mode: str, url: str) -> None:
        self.mode = mode
        self.url = url
        self.sync_engine: Engine = create_engine(url)
        self.engine: Engine | AsyncEngine = (
            create_async_engine(url) if mode == "async" else create_engine(url)
        )

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    @staticmethod
    async def resolve(value: Any) -> Any:
        return await value if inspect.isawaitable(value) else value

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session | AsyncSession]:
        """A session in a transaction that the test commits or rolls back itself."""
        if isinstance(self.engine, AsyncEngine):
            async with AsyncSession(self.engine) as async_session:
                yield async_session
        else:
            with Session(self.engine) as session:
                yield session

    async def commit(self, session: Session | AsyncSession) -> None:
        await self.resolve(session.commit())

    async def rollback(self, session: Session | AsyncSession) -> None:
        await self.resolve(session.rollback())

    def count(self, where: str = "true") -> int:
        with self.sync_engine.connect() as conn:
            return int(conn.scalar(text(f"select count(*) from scheduled_tasks where {where}")))

    def checked_out(self) -> int:
        pool = (
            self.engine.sync_engine.pool
            if isinstance(self.engine, AsyncEngine)
            else (self.engine.pool)
        )
        return int(pool.checkedout())  # type: ignore[attr-defined]

    async def dispose(self) -> None:
        await self.resolve(self.engine.dispose())
        self.sync_engine.dispose()


@pytest.fixture(params=["sync", "async"])
async def db(request: pytest.FixtureRequest, pg_url: str) -> AsyncIterator[Harness]:
    harness = Harness(request.param, pg_url)
    try:
        yield harness
        assert harness.checked_out() == 0, "the test leaked a pooled connection"
    finally:
        await harness.dispose()
