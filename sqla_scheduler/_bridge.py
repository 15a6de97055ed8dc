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
import logging
import random
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from types import CoroutineType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast, overload
from weakref import WeakSet

import anyio
import anyio.from_thread
import anyio.to_thread
import sniffio
from sqlalchemy import URL, Connection, Engine, Table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_scoped_session,
    async_sessionmaker,
)
from sqlalchemy.orm import Session, scoped_session, sessionmaker
from sqlalchemy.util import greenlet_spawn

from sqla_scheduler._commit_hooks import note_session, own_commit, refuse_commit
from sqla_scheduler._dialects import backend_for, known_backend
from sqla_scheduler._pool import Budget
from sqla_scheduler.exceptions import TaskDefinitionError

if TYPE_CHECKING:
    from sqla_scheduler._execution import TaskInstance
    from sqla_scheduler.context import ExecutionContext
    from sqla_scheduler.tasks import Task

#: How many times in all a unit of the scheduler's own that lost a conflict with another
#: transaction is run (``Database.run``).
CONFLICT_ATTEMPTS = 5

__all__ = [
    "AsyncTarget",
    "Database",
    "SessionFactory",
    "SyncTarget",
    "Target",
    "Transaction",
    "batch_named",
    "call",
    "check_backend",
    "check_sessions",
    "driver_connect_args",
    "named",
]

log = logging.getLogger("sqla_scheduler")
T = TypeVar("T")

#: Where a sync caller's work happens: its session, connection, or an engine.
SyncTarget: TypeAlias = "Session | scoped_session[Any] | Connection | Engine"
#: The async counterparts; with these, the library's methods return awaitables.
AsyncTarget: TypeAlias = "AsyncSession | async_scoped_session[Any] | AsyncConnection | AsyncEngine"
Target: TypeAlias = "SyncTarget | AsyncTarget"
#: What makes the session of a transaction of the library's own (see ``Database.transaction``).
SessionFactory: TypeAlias = "sessionmaker[Any] | async_sessionmaker[Any]"


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
    writes: str | None = None,
) -> T: ...
@overload
def call(
    target: AsyncTarget,
    table: Table,
    fn: Callable[[Connection], T],
    *,
    one_statement: bool = False,
    writes: str | None = None,
) -> Coroutine[Any, Any, T]: ...
def call(
    target: Target,
    table: Table,
    fn: Callable[[Connection], T],
    *,
    one_statement: bool = False,
    writes: str | None = None,
) -> T | Coroutine[Any, Any, T]:
    """Run ``fn`` on ``target``'s connection, in ``target``'s transaction if it has one.

    An engine gets a transaction of the library's own. When ``fn`` runs exactly one
    statement (``one_statement``) on PostgreSQL, that statement is its own transaction: it
    commits or fails as a whole without BEGIN and COMMIT round trips around it. SQLite has
    no round trips to save, and an application's ``begin`` hook (SQLAlchemy's pysqlite
    recipe emits BEGIN there) would open a transaction that autocommit never ends.

    With an async session or connection the result is a coroutine, and nothing is written
    until it is awaited. ``writes`` names the public call and what it writes
    (``"schedule(task 'email', instance 'u1')"``): until the coroutine is awaited, the
    caller's transaction refuses to commit, saying so (``refuse_commit``), instead of
    committing the business write without the work, and the warning Python gives for a
    coroutine never awaited names the call.
    """
    if isinstance(target, Connection):
        return fn(target)
    if isinstance(target, scoped_session):
        target = target()
    if isinstance(target, Session):
        return fn(_session_connection(target, table))
    if isinstance(target, Engine):
        return _in_own_transaction(target, fn, one_statement)
    if isinstance(target, AsyncConnection):
        return _awaitable(target.sync_connection, partial(target.run_sync, fn), writes)
    if isinstance(target, async_scoped_session):
        target = target()
    if isinstance(target, AsyncSession):
        run = partial(target.run_sync, lambda session: fn(_session_connection(session, table)))
        return _awaitable(target.sync_session, run, writes)
    if isinstance(target, AsyncEngine):
        return _named(_in_own_async_transaction(target, fn, one_statement), writes)
    raise TypeError(
        "expected a Session, Connection, Engine, AsyncSession, AsyncConnection or "
        f"AsyncEngine, got {type(target).__name__}"
    )


def named(task_name: str, instance_id: str | None = None) -> str:
    """``task 'email', instance 'u1'``: what a call's ``writes`` says it is about."""
    about = f"task {task_name!r}"
    return about if instance_id is None else f"{about}, instance {instance_id!r}"


def batch_named(batch: Sequence[TaskInstance[Any]]) -> str:
    """``writes`` for a batch: its first instance, and how many there are in all."""
    if not batch:
        return "no instances"
    first = named(batch[0].task_name, batch[0].instance_id)
    return first if len(batch) == 1 else f"{first} and {len(batch) - 1} more"


def _awaitable(
    owner: Session | Connection | None,
    run: Callable[[], Coroutine[Any, Any, T]],
    writes: str | None,
) -> Coroutine[Any, Any, T]:
    """``run()`` as a coroutine whose caller's transaction (``owner``'s) refuses to commit
    until it is awaited, when the call ``writes``."""
    release = None
    if writes is not None and owner is not None:
        release = refuse_commit(
            owner,
            f"the transaction was about to commit without {writes}: with an AsyncSession or "
            f"AsyncConnection, scheduler.{writes.partition('(')[0]}(...) returns an awaitable "
            "that does the work, and it was never awaited (did you forget await?)",
        )

    async def awaited() -> T:
        if release is not None:
            release()
        return await run()

    return _named(awaited(), writes)


def _named(coroutine: Coroutine[Any, Any, T], writes: str | None) -> Coroutine[Any, Any, T]:
    """``coroutine``, named after the public call that ``writes`` (``Scheduler.schedule``)
    in the warning Python gives when it is never awaited."""
    if writes is not None:
        named = cast("CoroutineType[Any, Any, T]", coroutine)
        named.__name__ = named.__qualname__ = f"Scheduler.{writes.partition('(')[0]}"
    return coroutine


def _autocommits(engine: Engine | AsyncEngine) -> bool:
    """Whether one statement on ``engine`` can run in autocommit, its own transaction
    (``Backend.autocommit_statements``)."""
    backend = known_backend(engine.dialect)
    return backend is not None and backend.autocommit_statements


def _in_own_transaction(engine: Engine, fn: Callable[[Connection], T], one_statement: bool) -> T:
    """``fn`` on a connection of ``engine`` in a transaction of its own, or in autocommit
    when it runs ``one_statement`` where that is its own transaction."""
    if one_statement and _autocommits(engine):
        with engine.connect() as conn:
            return fn(conn.execution_options(isolation_level="AUTOCOMMIT"))
    with engine.connect() as conn, own_commit(conn), conn.begin():
        return fn(conn)


async def _in_own_async_transaction(
    engine: AsyncEngine, fn: Callable[[Connection], T], one_statement: bool
) -> T:
    """``_in_own_transaction`` on an ``AsyncEngine``'s sync engine, in one greenlet: the
    checkout, the statements, the commit and the checkin in one trip through SQLAlchemy's
    greenlet bridge, where the async connection's API would make one for each (a third
    of what ``schedule`` costs the caller beyond the database's own work)."""
    return await greenlet_spawn(_in_own_transaction, engine.sync_engine, fn, one_statement)


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


def check_sessions(
    engine: Engine | AsyncEngine, tasks: Iterable[Task[Any]], sessions: object
) -> SessionFactory | None:
    """Fail at once when a transactional handler or ``sessions`` does not pair with
    ``engine``: a sync handler's session is a ``Session`` on a sync ``Engine``, an async
    one's an ``AsyncSession`` on an ``AsyncEngine``. Returns ``sessions``."""
    is_async = isinstance(engine, AsyncEngine)
    has = "an AsyncEngine" if is_async else "a sync Engine"
    for task in tasks:
        if task.transactional and task.is_async != is_async:
            handler = "an async" if task.is_async else "a sync"
            raise TaskDefinitionError(
                f"task {task.name!r}: transactional=True pairs a sync handler with a sync "
                f"Engine (ctx.session is a Session) or an async handler with an AsyncEngine "
                f"(an AsyncSession); this task has {handler} handler and the scheduler {has}"
            )
    wanted = async_sessionmaker if is_async else sessionmaker
    if sessions is not None and not isinstance(sessions, wanted):
        raise TypeError(f"session_factory must be a {wanted.__name__} with {has}, got {sessions!r}")
    return sessions


def _isolated(level: str, conn: Connection) -> None:
    conn.execution_options(isolation_level=level)  # in place: the async wrapper's too


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
        connections: int | None = None,
    ) -> None:
        self.engine = engine
        #: Bounds the worker threads of a sync engine; ``None`` shares anyio's default.
        self._limiter = anyio.CapacityLimiter(threads) if threads is not None else None
        #: Bounds the connections out at once (see ``_pool``), and those that count.
        self._budget = Budget(connections) if connections is not None else None
        self._budgeted: set[Connection | AsyncConnection] = set()
        self._prepared = prepared_statements
        self._lanes: dict[str, Connection | AsyncConnection] = {}
        #: The engine's database, as the seam knows it (``_dialects``).
        self.backend = backend = backend_for(engine.dialect)
        #: Whether ``plan_once`` may apply: a database that can plan once
        #: (``Backend.plans_once``) with prepared statements.
        self._may_plan_once = prepared_statements and backend.plans_once
        #: Whether it applies: once ``sessions_kept`` says the engine's connections keep
        #: their sessions (a pooler in transaction mode would pass the setting on to other
        #: clients).
        self._plans_once = False
        #: Lane connections whose ``plan_cache_mode`` and ``jit`` are set, to reset before closing.
        self._planning_once: WeakSet[Connection | AsyncConnection] = WeakSet()
        self._unit_of_work = backend.unit_of_work
        self._conflicted = backend.conflicted
        self._prepared_lost = backend.prepared_lost
        self._isolation = backend.isolation_level

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
        except a ``read_only`` one, which needs no write lock. On MariaDB every unit is a
        transaction at READ COMMITTED (``Backend.isolation_level``), set once on each
        connection taken from the pool (a lane's, once for its life).

        ``plan_once`` (with a ``lane``, on PostgreSQL with prepared statements, once
        ``sessions_kept`` has said that the engine's connections keep their sessions) has the
        lane's connection plan each prepared statement once for all its runs
        (``plan_cache_mode``), instead of again for each run, which PostgreSQL does for the
        pick's statement whatever it is bound to: most of a millisecond from idle. It also
        turns JIT compilation off on that connection: a generic plan is costed for an
        unknown ``LIMIT`` and time, which on a large table passes ``jit_above_cost``, and
        compiling then took 270 ms of a pick that runs in 1 ms. Both settings are reset
        before the connection goes back to the pool.

        A unit that lost a conflict with another transaction (``Backend.conflicted``: a
        deadlock, a lock wait that timed out) is rolled back and run again, up to
        ``CONFLICT_ATTEMPTS`` times in all, after a short random pause.

        With a budget of ``connections``, a unit waits for its turn before it takes a
        connection (in the event loop, holding nothing), and a lane keeps its connection
        only while no other unit waits for one (see ``_pool``).
        """
        if not read_only:
            fn = self._unit_of_work(fn)
        planned = plan_once and lane is not None
        for attempt in range(1, CONFLICT_ATTEMPTS):
            try:
                return await self._run_once(fn, autocommit, lane, planned and self._plans_once)
            except DBAPIError as exc:
                if self._prepared_lost(exc):
                    self._stop_preparing(exc)
                    continue  # on a fresh connection, which prepares nothing
                if not self._conflicted(exc):
                    raise
            await anyio.sleep(random.uniform(0, 0.002 * attempt))
        # the last: whatever it raises
        return await self._run_once(fn, autocommit, lane, planned and self._plans_once)

    def sessions_kept(self) -> None:
        """The engine's connections keep their sessions (a LISTEN through its URL heard
        the NOTIFY it sent itself): lanes that ask to plan once do so from now on."""
        self._plans_once = self._may_plan_once and self._prepared

    def _stop_preparing(self, error: DBAPIError) -> None:
        """Prepare nothing more on the scheduler's connections, saying so once: the server
        lost or already had a statement the driver prepared, which happens when a pooler
        in transaction mode shares server connections between clients."""
        if not self._prepared:
            return
        self._prepared = self._plans_once = self._may_plan_once = False
        log.warning(
            "PostgreSQL refused a prepared statement of the scheduler's (%s): a connection "
            "pooler in transaction mode (PgBouncer before 1.21 or without "
            "max_prepared_statements) shares server connections between clients. The "
            "scheduler's connections prepare nothing from now on; set "
            "prepared_statements=False (SQLA_SCHEDULER_PREPARED_STATEMENTS=false) to start "
            "that way",
            str(error.orig).strip().splitlines()[0],
        )

    async def _run_once(
        self, fn: Callable[[Connection], T], autocommit: bool, lane: str | None, plan_once: bool
    ) -> T:
        conn = self._lanes.pop(lane, None) if lane is not None else None
        fresh = conn is None
        if conn is None:
            conn = await self._connect()
        # the lane's first unit since planning once applies sets it up
        configure = plan_once and conn not in self._planning_once
        if configure:
            self._planning_once.add(conn)
        unit = partial(self._unit, fn, autocommit, configure)
        try:
            result = await self._call(conn, partial(unit, fresh))
        except BaseException:
            await self._close(conn)  # a lane whose unit failed starts afresh next time
            raise
        crowded = self._budget is not None and self._budget.awaited  # a lane gives way
        if lane is None or crowded or self._lanes.setdefault(lane, conn) is not conn:
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
        """``fn(conn)``, committed; a connection fresh from the pool is configured first,
        and with ``plan_once`` set to plan once (``run``)."""
        if fresh:
            if self._isolation is not None:
                conn.execution_options(isolation_level=self._isolation)
            elif autocommit:
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

    async def _connect(self, budgeted: bool = True) -> Connection | AsyncConnection:
        """A connection of the pool; ``budgeted``, once the budget has one (an idle lane's)."""
        budget = self._budget if budgeted else None
        if budget is not None:
            while budget.exhausted and self._lanes:
                _, idle = self._lanes.popitem()
                await self._close(idle)
            await budget.take()
        try:
            conn: Connection | AsyncConnection
            if isinstance(self.engine, AsyncEngine):
                conn = await self.engine.connect()
            else:
                conn = await anyio.to_thread.run_sync(self.engine.connect, limiter=self._limiter)
        except BaseException:
            if budget is not None:
                budget.give_back()
            raise
        if budget is not None:
            self._budgeted.add(conn)
        return conn

    def _given_back(self, conn: Connection | AsyncConnection) -> None:
        """``conn`` is closed: its place in the budget is free."""
        if conn in self._budgeted:
            self._budgeted.discard(conn)
            assert self._budget is not None
            self._budget.give_back()

    async def _call(self, conn: Connection | AsyncConnection, fn: Callable[[Connection], T]) -> T:
        if isinstance(conn, AsyncConnection):
            return await conn.run_sync(fn)
        return await anyio.to_thread.run_sync(fn, conn, limiter=self._limiter)

    async def _close(self, conn: Connection | AsyncConnection) -> None:
        with anyio.CancelScope(shield=True):
            reset = conn in self._planning_once
            self._planning_once.discard(conn)
            try:
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
            finally:
                self._given_back(conn)

    @asynccontextmanager
    async def transaction(
        self, sessions: SessionFactory | None = None, *, budgeted: bool = True
    ) -> AsyncIterator[Transaction]:
        """A transaction of the library's own, open across awaits, with a session joined
        to it: made by ``sessions`` (the application's ``sessionmaker`` or
        ``async_sessionmaker``, bound here to the transaction's connection), else a plain
        ``Session`` on a sync engine and an ``AsyncSession`` on an async one. Nothing
        commits until ``Transaction.commit``; leaving without it rolls back. On SQLite the
        transaction holds the write lock from its start (``Backend.unit_of_work``).

        ``budgeted=False`` takes its connection outside the budget: a transactional
        handler's, of which there are at most ``concurrency`` (see ``_pool``)."""
        conn = await self._connect(budgeted)
        try:
            if not self._prepared:
                await self._call(conn, lambda c: _disable_prepare(c.connection.driver_connection))
            if self._isolation is not None:
                await self._call(conn, partial(_isolated, self._isolation))
            await self._call(conn, self._unit_of_work(_begin))
            factory: Any = sessions or (
                AsyncSession if isinstance(conn, AsyncConnection) else Session
            )
            session = factory(bind=conn)
        except BaseException:
            await self._close(conn)
            raise
        transaction = Transaction(self, conn, session)
        try:
            yield transaction
        finally:
            with anyio.CancelScope(shield=True):
                # rolls back what was not committed; a running sync handler's thread does
                # it when the handler returns (``Transaction.guard``)
                await transaction.close()

    async def remove_with_hook(
        self,
        remove: Callable[[Connection], bool],
        hook: Callable[[ExecutionContext[Any], Any], Any] | None,
        context: ExecutionContext[Any],
        sessions: SessionFactory | None = None,
    ) -> bool:
        """``remove`` and, when it removed the row, ``hook(context, session)``: one commit.

        The hook gets the session of a ``transaction``; if it raises, nothing is committed.
        """
        with anyio.CancelScope(shield=True):
            async with self.transaction(sessions) as transaction:
                if not await transaction.run(remove):
                    return False
                if hook is not None:
                    await transaction.call(hook, context, transaction.session)
                await transaction.commit()
        return True

    @property
    def url(self) -> URL:
        """The engine's URL."""
        return self.engine.url

    def connect_args(self, url: URL | None = None) -> dict[str, Any]:
        """Keyword arguments for a raw psycopg connection to the engine's database, or to
        the one ``url`` names (of the same database system)."""
        return driver_connect_args(self.engine, url)


def driver_connect_args(engine: Engine | AsyncEngine, url: URL | None = None) -> dict[str, Any]:
    """Keyword arguments for a raw psycopg connection to ``engine``'s database, or to the
    one ``url`` names (of the same database system): for LISTEN, which SQLAlchemy has no
    API for."""
    sync = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    args, kwargs = sync.dialect.create_connect_args(sync.url if url is None else url)
    kwargs = dict(kwargs)
    kwargs.pop("context", None)
    if args:
        kwargs["conninfo"] = args[0]
    return kwargs


class Transaction:
    """What ``Database.transaction`` yields: its ``session`` for the caller's code, and
    ``run`` for the library's statements in the same transaction. One user at a time:
    the session moves between threads only while nothing else uses it."""

    def __init__(
        self, db: Database, conn: Connection | AsyncConnection, session: Session | AsyncSession
    ) -> None:
        self._db = db
        self._conn = conn
        self.session: Any = session
        """A ``Session`` (sync engine) or an ``AsyncSession`` (async engine)."""
        #: Guards ``_in_thread`` and ``_orphaned`` (see ``guard``).
        self._state = threading.Lock()
        self._in_thread = False
        self._orphaned = False

    def guard(self, handler: Callable[[Any], T]) -> Callable[[Any], T]:
        """``handler`` for a handler thread, to run while the session is its own: should
        the transaction be closed before it returns (a stop cancelled the wait for it), the
        thread closes it when the handler is done, not the loop while it runs."""

        def guarded(arg: Any) -> T:
            with self._state:
                self._in_thread = True
            try:
                return handler(arg)
            finally:
                with self._state:
                    self._in_thread = False
                    orphaned = self._orphaned
                if orphaned:
                    _close_sync(self.session, self._conn)

        return guarded

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Flush the session's pending changes, then ``fn`` on the transaction's connection."""
        # an AsyncSession's sync session flushes inside the same trip through the greenlet
        # bridge as ``fn``: one trip, not two, for what each execution pays
        session: Session = (
            self.session.sync_session if isinstance(self.session, AsyncSession) else self.session
        )

        def flushed(conn: Connection) -> T:
            session.flush()
            return fn(conn)

        return await self._db._call(self._conn, flushed)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """The caller's ``fn(*args)``: a sync engine's in a worker thread (it may use the
        session there); what it returns is awaited when awaitable."""
        if isinstance(self.session, AsyncSession):
            result = fn(*args)
        else:
            result = await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._db._limiter)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def commit(self) -> None:
        """Flush the session and commit the transaction, its statements and the session's."""
        await self.commit_if(lambda _conn: True)

    async def commit_if(self, fn: Callable[[Connection], bool]) -> bool:
        """``run(fn)``, then commit if it returned true: one call (one trip to the worker
        thread or through the greenlet bridge), for what each execution pays."""

        def then_commit(conn: Connection) -> bool:
            done = fn(conn)
            if done:
                conn.commit()
            return done

        return await self.run(then_commit)

    async def close(self) -> None:
        """Close the session and give the connection back, rolling back what was not
        committed; left to the handler thread while one still runs (see ``guard``)."""
        with self._state:
            self._orphaned = self._in_thread
        if self._orphaned:
            return  # a handler's transaction, outside the budget (see ``Executor``)
        try:
            if isinstance(self._conn, AsyncConnection):
                await self.session.close()
                await self._conn.close()
            else:  # one trip to a worker thread for both
                await anyio.to_thread.run_sync(
                    _close_sync, self.session, self._conn, limiter=self._db._limiter
                )
        finally:
            self._db._given_back(self._conn)


def _close_sync(session: Session, conn: Any) -> None:
    session.close()
    conn.close()


def _begin(conn: Connection) -> None:
    if not conn.in_transaction():
        conn.begin()


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
