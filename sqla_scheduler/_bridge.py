"""One code path for sync and async callers, and the only way anything runs on an engine.

Every database operation is a sync function of a ``Connection``. Two ways run it:

- ``call`` runs it on whatever the *caller* handed us: directly on a ``Connection``, on a
  ``Session``'s connection, in a transaction of its own for an ``Engine``, and through
  ``run_sync`` for the async counterparts (which makes the result a coroutine to await);
- ``Database`` runs the library's *own* work on an engine from async code: the runner,
  the admin app and the Prometheus collector. A sync engine's work runs in a worker
  thread, an async engine's through ``run_sync``; nothing else differs.

``check_backend`` is the one place that decides whether an anyio backend can drive an
engine (SQLAlchemy's ``AsyncEngine`` runs on asyncio only).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload
from weakref import WeakSet

import anyio
import anyio.from_thread
import anyio.to_thread
import sniffio
from sqlalchemy import Connection, Engine, Table
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_scoped_session,
)
from sqlalchemy.orm import Session, scoped_session

from sqla_scheduler._commit_hooks import note_session, own_commit
from sqla_scheduler._dialects import backend_for

if TYPE_CHECKING:
    from sqla_scheduler.context import ExecutionContext

__all__ = ["AsyncTarget", "Database", "SyncTarget", "Target", "call", "check_backend"]

T = TypeVar("T")

#: Where a sync caller's work happens: its session, connection, or an engine.
SyncTarget: TypeAlias = "Session | scoped_session[Any] | Connection | Engine"
#: The async counterparts; with these, the library's methods return awaitables.
AsyncTarget: TypeAlias = "AsyncSession | async_scoped_session[Any] | AsyncConnection | AsyncEngine"
Target: TypeAlias = "SyncTarget | AsyncTarget"


def _session_connection(session: Session, table: Table) -> Connection:
    # Resolve the bind the way the ORM would for this table, so a session with several
    # binds writes to the database the table lives in. Hooks on the connection's commit
    # then wait for the session's, which is later (``_commit_hooks``).
    return note_session(session.connection(bind_arguments={"clause": table.select()}), session)


@overload
def call(
    target: SyncTarget,
    table: Table,
    fn: Callable[[Connection], T],
    *,
    one_statement: bool = False,
) -> T: ...
@overload
def call(
    target: AsyncTarget,
    table: Table,
    fn: Callable[[Connection], T],
    *,
    one_statement: bool = False,
) -> Coroutine[Any, Any, T]: ...
def call(
    target: Target,
    table: Table,
    fn: Callable[[Connection], T],
    *,
    one_statement: bool = False,
) -> T | Coroutine[Any, Any, T]:
    """Run ``fn`` on ``target``'s connection, in ``target``'s transaction if it has one.

    An engine gets a transaction of the library's own. When ``fn`` runs exactly one
    statement (``one_statement``) on PostgreSQL, that statement is its own transaction: it
    commits or fails as a whole without BEGIN and COMMIT round trips around it. SQLite has
    no round trips to save, and an application's ``begin`` hook (SQLAlchemy's pysqlite
    recipe emits BEGIN there) would open a transaction that autocommit never ends.
    """
    if isinstance(target, Connection):
        return fn(target)
    if isinstance(target, scoped_session):
        target = target()
    if isinstance(target, Session):
        return fn(_session_connection(target, table))
    if isinstance(target, Engine):
        if one_statement and target.dialect.name == "postgresql":
            with target.connect() as conn:
                return fn(conn.execution_options(isolation_level="AUTOCOMMIT"))
        with target.connect() as conn, own_commit(conn), conn.begin():
            return fn(conn)
    if isinstance(target, AsyncConnection):
        return target.run_sync(fn)
    if isinstance(target, async_scoped_session):
        target = target()
    if isinstance(target, AsyncSession):
        return target.run_sync(lambda session: fn(_session_connection(session, table)))
    if isinstance(target, AsyncEngine):
        return _in_own_transaction(target, fn, one_statement)
    raise TypeError(
        "expected a Session, Connection, Engine, AsyncSession, AsyncConnection or "
        f"AsyncEngine, got {type(target).__name__}"
    )


async def _in_own_transaction(
    engine: AsyncEngine, fn: Callable[[Connection], T], one_statement: bool
) -> T:
    if one_statement and engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            # set inside the one run_sync: each await of the async connection is a trip
            # through the greenlet bridge, as costly as the statement's own Python
            return await conn.run_sync(
                lambda sync: fn(sync.execution_options(isolation_level="AUTOCOMMIT"))
            )
    async with engine.connect() as conn:
        sync = conn.sync_connection
        assert sync is not None  # connected
        with own_commit(sync):
            async with conn.begin():
                return await conn.run_sync(fn)


def check_backend(engine: Engine | AsyncEngine, backend: str | None = None) -> None:
    """Fail at once when the anyio ``backend`` cannot drive ``engine``.

    ``backend`` is ``"asyncio"`` or ``"trio"``; ``None`` means the one running now. Trio
    must be installed (the error names the extra), and an ``AsyncEngine`` needs asyncio.
    """
    if backend is None:
        backend = sniffio.current_async_library()
    if backend == "trio":
        try:
            import trio  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "the trio backend needs trio: pip install 'sqla-scheduler[trio]'"
            ) from exc
    if isinstance(engine, AsyncEngine) and backend != "asyncio":
        raise RuntimeError(
            "SQLAlchemy's AsyncEngine only runs on asyncio; under trio, give the Scheduler a "
            "sync Engine (its database work then runs in worker threads)"
        )


async def _await(value: Awaitable[T]) -> T:
    return await value


class Database:
    """Runs units of work on the scheduler's engine, in a transaction each.

    One path serves both kinds of engine: a unit of work is a sync function of a
    ``Connection``, run through ``run_sync`` on an ``AsyncConnection`` or in a worker thread
    on a sync one; only connecting, calling and closing differ.
    """

    def __init__(
        self,
        engine: Engine | AsyncEngine,
        threads: int | None = None,
        *,
        prepared_statements: bool = True,
    ) -> None:
        self.engine = engine
        #: Bounds the worker threads of a sync engine; ``None`` shares anyio's default.
        self._limiter = anyio.CapacityLimiter(threads) if threads is not None else None
        self._prepared = prepared_statements
        self._lanes: dict[str, Connection | AsyncConnection] = {}
        #: Whether ``plan_once`` can apply: PostgreSQL with prepared statements (a pooler
        #: that shares server connections between clients would pass the setting on).
        self._plans_once = prepared_statements and engine.dialect.name == "postgresql"
        #: Lane connections whose ``plan_cache_mode`` and ``jit`` are set, to reset before closing.
        self._planning_once: WeakSet[Connection | AsyncConnection] = WeakSet()
        self._unit_of_work = backend_for(engine.dialect).unit_of_work

    async def run(
        self,
        fn: Callable[[Connection], T],
        *,
        autocommit: bool = False,
        lane: str | None = None,
        read_only: bool = False,
        plan_once: bool = False,
    ) -> T:
        """Run ``fn`` in a transaction of its own and commit.

        ``autocommit`` suits a unit of work of exactly one statement: the statement is its
        own transaction, which saves the BEGIN and COMMIT round trips. A ``lane`` names a
        connection kept open between calls for a service that runs one unit at a time
        (the picker, the completer), saving a pool checkout per call. On SQLite every unit,
        ``autocommit`` or not, is one ``BEGIN IMMEDIATE`` transaction (``Backend.unit_of_work``),
        except a ``read_only`` one, which needs no write lock.

        ``plan_once`` (with a ``lane``, on PostgreSQL with prepared statements) has the
        lane's connection plan each prepared statement once for all its runs
        (``plan_cache_mode``), instead of again for each run, which PostgreSQL does for the
        pick's statement whatever it is bound to: most of a millisecond from idle. It also
        turns JIT compilation off on that connection: a generic plan is costed for an
        unknown ``LIMIT`` and time, which on a large table passes ``jit_above_cost``, and
        compiling then took 270 ms of a pick that runs in 1 ms. Both settings are reset
        before the connection goes back to the pool.
        """
        if not read_only:
            fn = self._unit_of_work(fn)
        plan_once = plan_once and lane is not None and self._plans_once
        unit = partial(self._unit, fn, autocommit, plan_once)
        conn = self._lanes.pop(lane, None) if lane is not None else None
        fresh = conn is None
        if conn is None:
            conn = await self._connect()
            if plan_once:
                self._planning_once.add(conn)
        try:
            result = await self._call(conn, partial(unit, fresh))
        except BaseException:
            await self._close(conn)  # a lane whose unit failed starts afresh next time
            raise
        if lane is None or self._lanes.setdefault(lane, conn) is not conn:
            await self._close(conn)
        return result

    async def shielded(
        self,
        fn: Callable[[Connection], T],
        *,
        autocommit: bool = False,
        lane: str | None = None,
        plan_once: bool = False,
    ) -> T:
        """``run``, shielded from cancellation: a commit is never cut in half."""
        with anyio.CancelScope(shield=True):
            result = await self.run(fn, autocommit=autocommit, lane=lane, plan_once=plan_once)
        return result

    async def close(self) -> None:
        """Give the lanes' connections back to the pool."""
        lanes, self._lanes = list(self._lanes.values()), {}
        for conn in lanes:
            await self._close(conn)

    def _unit(
        self,
        fn: Callable[[Connection], T],
        autocommit: bool,
        plan_once: bool,
        fresh: bool,
        conn: Connection,
    ) -> T:
        """``fn(conn)``, committed; a connection fresh from the pool is configured first."""
        if fresh:
            if autocommit:
                conn.execution_options(isolation_level="AUTOCOMMIT")
            if not self._prepared:
                _disable_prepare(conn.connection.driver_connection)
            if plan_once:
                conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
                conn.exec_driver_sql("SET jit = off")
                conn.commit()
        with own_commit(conn):
            result = fn(conn)
            conn.commit()
        return result

    async def _connect(self) -> Connection | AsyncConnection:
        if isinstance(self.engine, AsyncEngine):
            return await self.engine.connect()
        return await anyio.to_thread.run_sync(self.engine.connect, limiter=self._limiter)

    async def _call(self, conn: Connection | AsyncConnection, fn: Callable[[Connection], T]) -> T:
        if isinstance(conn, AsyncConnection):
            return await conn.run_sync(fn)
        return await anyio.to_thread.run_sync(fn, conn, limiter=self._limiter)

    async def _close(self, conn: Connection | AsyncConnection) -> None:
        with anyio.CancelScope(shield=True):
            reset = conn in self._planning_once
            self._planning_once.discard(conn)
            if isinstance(conn, AsyncConnection):
                if reset:
                    await conn.run_sync(_reset_plan_cache_mode)
                await conn.close()
            else:
                if reset:
                    await anyio.to_thread.run_sync(
                        _reset_plan_cache_mode, conn, limiter=self._limiter
                    )
                await anyio.to_thread.run_sync(conn.close, limiter=self._limiter)

    async def remove_with_hook(
        self,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
    ) -> bool:
        """``remove`` and, when it removed the row, ``hook(context, session)``: one commit.

        The hook gets a sync ``Session`` for a sync engine and an ``AsyncSession`` for an
        async one, both joined to the transaction; if it raises, nothing is committed.
        """
        remove = self._unit_of_work(remove)
        with anyio.CancelScope(shield=True):
            if isinstance(self.engine, AsyncEngine):
                removed = await self._async_remove_with_hook(self.engine, remove, hook, context)
            else:
                removed = await anyio.to_thread.run_sync(
                    self._sync_remove_with_hook, remove, hook, context, limiter=self._limiter
                )
        return removed

    @staticmethod
    async def _async_remove_with_hook(
        engine: AsyncEngine,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
    ) -> bool:
        async with engine.begin() as conn:
            removed = await conn.run_sync(remove)
            if removed and hook is not None:
                async with AsyncSession(bind=conn) as session:
                    result = hook(context, session)
                    if inspect.isawaitable(result):
                        await result
                    await session.flush()
        return removed

    def _sync_remove_with_hook(
        self,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
    ) -> bool:
        assert isinstance(self.engine, Engine)
        with self.engine.begin() as conn:
            if not remove(conn):
                return False
            if hook is not None:
                with Session(bind=conn) as session:
                    result = hook(context, session)
                    if inspect.isawaitable(result):
                        anyio.from_thread.run(_await, result)
                    session.flush()
        return True

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments for a raw psycopg connection to the engine's database."""
        engine = self.engine.sync_engine if isinstance(self.engine, AsyncEngine) else self.engine
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        kwargs = dict(kwargs)
        kwargs.pop("context", None)
        if args:
            kwargs["conninfo"] = args[0]
        return kwargs


def _reset_plan_cache_mode(conn: Connection) -> None:
    """Undo ``plan_once`` before ``conn`` goes back to the pool; a connection that cannot
    be reset is discarded instead."""
    try:
        conn.rollback()  # a failed unit may have left a transaction open
        conn.exec_driver_sql("RESET plan_cache_mode")
        conn.exec_driver_sql("RESET jit")
        conn.commit()
    except Exception:
        conn.invalidate()


def _disable_prepare(driver_connection: Any) -> None:
    if hasattr(driver_connection, "prepare_threshold"):
        driver_connection.prepare_threshold = None
