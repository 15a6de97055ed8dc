"""What a test holds its database by: the ``Harness`` over a sync or an async engine, and
the services of a scheduler's loop."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sqla_scheduler import Clock, Scheduler, SchedulerConfig
from sqla_scheduler._dialects import backend_for, sync_url
from sqla_scheduler._runner import Runner
from sqla_scheduler.models import table_for

__all__ = ["Harness", "services"]


class Harness:
    """One test's database, reached through a sync or an async engine.

    ``engine`` is what the code under test gets; ``sync_engine`` is a separate sync engine
    the test uses to look at the table. :meth:`resolve` awaits a result when the code
    under test returned an awaitable, so one test body covers both modes.
    """

    def __init__(
        self,
        mode: str,
        url: str,
        connect_args: dict[str, Any] | None = None,
        direct_url: str | None = None,
        look_url: str | None = None,
    ) -> None:
        self.mode = mode
        self.url = url
        #: The database without a pooler between: where a test LISTENs.
        self.direct_url = direct_url or url
        args = connect_args or {}
        #: ``look_url`` when given: the same database through a sync driver set up for the
        #: test's reads (PyMySQL's ``ssl_disabled``, which asyncmy's URL cannot carry and
        #: without which each connection builds a TLS context: ~0.1 s of CPU).
        self.sync_engine: Engine = create_engine(look_url or sync_url(url), connect_args=args)
        self.engine: Engine | AsyncEngine = (
            create_async_engine(url, connect_args=args)
            if mode == "async"
            else create_engine(url, connect_args=args)
        )
        self.backend: str = self.sync_engine.dialect.name
        #: The scheduler's table, for portable statements in tests.
        self.table = table_for()

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"

    @property
    def is_mariadb(self) -> bool:
        return self.backend in ("mysql", "mariadb")

    @property
    def notifies(self) -> bool:
        """Whether other processes hear of new work at once (LISTEN/NOTIFY: PostgreSQL)."""
        return backend_for(self.sync_engine.dialect).supports_notify

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

    def scheduler(self, tasks: list[Any], clock: Clock | None = None, **config: Any) -> Scheduler:
        """A Scheduler on this test's engine, named ``test-worker`` unless said otherwise."""
        config.setdefault("scheduler_name", "test-worker")
        return Scheduler(self.engine, tasks, SchedulerConfig(**config), clock=clock)

    def row(self, task: str, instance: str) -> dict[str, Any] | None:
        """The row as the model types it (aware datetimes, booleans), on any database."""
        t = self.table
        with self.sync_engine.connect() as conn:
            found = (
                conn.execute(select(t).where(t.c.task_name == task, t.c.task_instance == instance))
                .mappings()
                .one_or_none()
            )
        return dict(found) if found else None

    def put(self, **values: Any) -> None:
        """Insert a row of ``values`` into the table with a plain INSERT, committed: a row
        another program (or another version) wrote, which the scheduler must cope with."""
        with self.sync_engine.begin() as conn:
            conn.execute(insert(self.table), values)

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


@asynccontextmanager
async def services(scheduler: Scheduler) -> AsyncIterator[Runner]:
    """The services of ``scheduler``'s loop, built but not run."""
    runner = scheduler._make_runner()
    try:
        yield runner
    finally:
        await runner.close()
