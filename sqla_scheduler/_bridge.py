"""One code path for sync and async callers.

Every database operation is a sync function of a ``Connection``. ``call`` runs it on
whatever the caller handed us: directly on a ``Connection``, on a ``Session``'s connection,
in a transaction of its own for an ``Engine``, and through ``run_sync`` for the async
counterparts (which makes the result a coroutine to await).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeAlias, TypeVar, overload

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_scoped_session,
)
from sqlalchemy.orm import Session, scoped_session

__all__ = ["AsyncTarget", "SyncTarget", "Target", "call"]

T = TypeVar("T")

#: Where a sync caller's work happens: its session, connection, or an engine.
SyncTarget: TypeAlias = "Session | scoped_session[Any] | Connection | Engine"
#: The async counterparts; with these, the library's methods return awaitables.
AsyncTarget: TypeAlias = "AsyncSession | async_scoped_session[Any] | AsyncConnection | AsyncEngine"
Target: TypeAlias = "SyncTarget | AsyncTarget"


def _session_connection(session: Session, table: Table) -> Connection:
    # Resolve the bind the way the ORM would for this table, so a session with several
    # binds writes to the database the table lives in.
    return session.connection(bind_arguments={"clause": table.select()})


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
        with target.begin() as conn:
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
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await conn.run_sync(fn)
    async with engine.begin() as conn:
        return await conn.run_sync(fn)
