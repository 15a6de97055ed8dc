"""Shared fixtures: throwaway PostgreSQL and MariaDB servers and a fresh database per test.

Every database test gets a ``db`` harness, parametrized over a sync ``Engine`` and an
``AsyncEngine``, each on PostgreSQL (psycopg, a database cloned from a migrated template),
on SQLite (pysqlite or aiosqlite, a copy of a migrated template file in WAL mode) and on
MariaDB (PyMySQL or asyncmy, a database cloned from a migrated template): the conformance
suite every database passes. At teardown the harness asserts that no pooled connection
was leaked.

A test of behaviour only PostgreSQL has is marked ``@pytest.mark.postgres_only("why")``;
its other databases' cases are reported as skipped with that reason.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine, event, make_url, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sqla_scheduler import Clock, Scheduler, SchedulerConfig, migrate
from sqla_scheduler._dialects import backend_for, sync_url
from sqla_scheduler._runner import Runner
from sqla_scheduler.models import table_for
from tests._mariadb import MariaDBServer
from tests._mariadb_databases import DatabasePool as MariaDBPool
from tests._pg_databases import DatabasePool
from tests._pgbouncer import PgBouncer
from tests._postgres import PostgresCluster
from tests._replica import PostgresReplica

TEMPLATE_DB = "sqla_scheduler_template"
_counter = itertools.count()

#: The ``db`` harness's cases: engine mode x database.
DB_PARAMS = [
    pytest.param(("sync", "postgresql"), id="sync-postgresql"),
    pytest.param(("async", "postgresql"), id="async-postgresql"),
    pytest.param(("sync", "sqlite"), id="sync-sqlite"),
    pytest.param(("async", "sqlite"), id="async-sqlite"),
    pytest.param(("sync", "mariadb"), id="sync-mariadb"),
    pytest.param(("async", "mariadb"), id="async-mariadb"),
    pytest.param(("sync", "pgbouncer"), id="sync-pgbouncer"),
]
#: The modules whose ``db`` cases also run through PgBouncer in transaction mode (the
#: ``sync-pgbouncer`` case, given nothing but the bouncer's URL): the core of scheduling
#: and running, not every module again.
THROUGH_PGBOUNCER = frozenset(
    {"test_scheduling.py", "test_runner.py", "test_control.py", "test_history.py"}
)


#: The modules whose async ``db`` cases run on PostgreSQL alone: what they test runs in
#: the scheduler's own units of work, the same statements through ``run_sync`` as with a
#: sync engine, and every async driver is run by the other modules; on SQLite and
#: MariaDB their sync cases carry the database's differences (the suite's 8 minutes).
ASYNC_ON_POSTGRESQL_ONLY = frozenset(
    {
        "test_activity.py",
        "test_groups.py",
        "test_rate_limits.py",
        # the admin reads and acts through the same bridge with either engine; its SQL
        # (previews, counts, pages) is the same for a database's two drivers
        "test_admin_history.py",
        "test_admin_http.py",
        "test_admin_actions.py",
        "test_admin_nodes_and_pause.py",
        # starts at their times: the timer, the probe and the wake-ups are the runner's
        # own, whichever engine; test_wakeups keeps every async case (commit hooks)
        "test_on_time.py",
        # the bursts: how the pool and the threads are shared is the bridge's own, one
        # path for both kinds of engine; the async drivers' units run everywhere else
        "test_bursts.py",
        # a refused group's statements are the same for a database's two drivers
        "test_refused_chains.py",
    }
)
#: The modules whose ``db`` cases run on PostgreSQL alone: what they test is the runner's
#: handling of what a handler or listener raises, which no database takes part in (the
#: outcome each records is written by the statements every other module runs everywhere).
ON_POSTGRESQL_ONLY = frozenset({"test_handlers_cannot_stop_it.py"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the SQLite cases of ``postgres_only`` tests, saying why; drop trio with an AsyncEngine;
    put the ``slow`` tests first.

    Modules that run under trio as well (``anyio_backend`` parametrized with "trio") do so
    with sync engines only: SQLAlchemy's AsyncEngine runs on asyncio alone, so that pair is
    not a case at all (the scheduler's refusal of it has tests of its own).

    A test marked ``slow`` must say in its docstring what only a slow run proves. Slow
    tests run first, so that pytest-xdist hands them out to its workers at the start
    instead of leaving one of them to end the run alone.
    """
    deselected = [
        item
        for item in items
        if _trio_with_async_engine(item) or _pgbouncer_elsewhere(item) or _async_elsewhere(item)
    ]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]
    for item in items:
        if item.get_closest_marker("slow") is not None and not _docstring(item):
            raise pytest.UsageError(
                f"{item.nodeid}: a slow test says in its docstring what only a slow run proves"
            )
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable
    for item in items:
        marker = item.get_closest_marker("postgres_only")
        if marker is None:
            continue
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
        if not reason:
            raise pytest.UsageError(f"{item.nodeid}: postgres_only needs a reason")
        callspec = getattr(item, "callspec", None)
        backend = None
        if callspec is not None:
            backend = callspec.params.get("db", (None, None))[1] or callspec.params.get("backend")
        if backend in ("sqlite", "mariadb"):
            item.add_marker(pytest.mark.skip(reason=f"PostgreSQL only: {reason}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Escape lone surrogates in a report's captured output and logs.

    Some tests make the scheduler log such text on purpose (an error message no text
    column can hold); pytest-xdist sends reports between processes as UTF-8, which
    refuses them, and the whole run would end with an internal error.
    """
    report: pytest.TestReport = yield
    report.sections = [
        (title, content.encode("utf-8", "backslashreplace").decode("utf-8"))
        for title, content in report.sections
    ]
    return report


def _docstring(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    if function is None:
        return ""
    return inspect.getdoc(function) or ""


def _pgbouncer_elsewhere(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    through = params.get("db", ("", ""))[1] == "pgbouncer"
    return through and item.path.name not in THROUGH_PGBOUNCER


def _async_elsewhere(item: pytest.Item) -> bool:
    mode, backend = getattr(getattr(item, "callspec", None), "params", {}).get("db", ("", ""))
    if backend in ("", "postgresql"):
        return False
    if item.path.name in ON_POSTGRESQL_ONLY:
        return True
    return mode == "async" and item.path.name in ASYNC_ON_POSTGRESQL_ONLY


def _trio_with_async_engine(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("anyio_backend") == "trio" and params.get("db", ("",))[0] == "async"


async def wait_for(condition: Callable[[], bool], deadline: float = 20) -> None:
    """Poll ``condition`` until it holds; fail after ``deadline`` seconds."""
    with anyio.fail_after(deadline):
        while not condition():  # noqa: ASYNC110 - the condition is a database query
            await anyio.sleep(0.01)


#: What MariaDB was sent with a RETURNING clause in the running test, by any engine of
#: this process: nothing may be, so that every statement MariaDB runs here is one MySQL,
#: which has no RETURNING, can run too (MySQL itself is not in the tests). SQLAlchemy's
#: own implicit RETURNING of a new key (Alembic's version row) it leaves out on MySQL.
_returning_on_mysql: list[str] = []
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


@event.listens_for(Engine, "before_cursor_execute")
def _note_returning(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    if getattr(getattr(context, "compiled", None), "implicit_returning", None):
        return
    if conn.dialect.name == "mysql" and _RETURNING.search(statement):
        _returning_on_mysql.append(statement)


@pytest.fixture(autouse=True)
def _nothing_mysql_cannot_run() -> Iterator[None]:
    yield
    sent = list(_returning_on_mysql)
    _returning_on_mysql.clear()
    assert not sent, f"sent MariaDB a RETURNING, which MySQL has not: {sent[0][:300]}"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def pg_template(pg_cluster: PostgresCluster) -> str:
    """A database migrated to head, cloned for each test."""
    pg_cluster.create_database(TEMPLATE_DB)
    migrate.upgrade(pg_cluster.url(TEMPLATE_DB))
    return TEMPLATE_DB


@pytest.fixture(scope="session")
def pg_databases(pg_cluster: PostgresCluster, pg_template: str) -> DatabasePool:
    """The template's clones: wiped and reused when a test left the schema alone."""
    return DatabasePool(pg_cluster, pg_template)


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster, pg_databases: DatabasePool) -> Iterator[str]:
    """URL of a fresh, migrated database for this test alone."""
    name, since = pg_databases.take()
    try:
        yield pg_cluster.url(name)
    finally:
        pg_databases.give_back(name, since)


@pytest.fixture(scope="session")
def pgbouncer(pg_cluster: PostgresCluster) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction pooling mode in front of ``pg_cluster``."""
    with PgBouncer(pg_cluster) as bouncer:
        yield bouncer


@pytest.fixture
def pgbouncer_url(pgbouncer: PgBouncer, pg_databases: DatabasePool) -> Iterator[str]:
    """URL of a fresh, migrated database for this test alone, through ``pgbouncer``."""
    name, since = pg_databases.take()
    try:
        yield pgbouncer.url(name)
    finally:
        pgbouncer.release(name)  # its pooled sessions would have the database dropped
        pg_databases.give_back(name, since)


@pytest.fixture(scope="session")
def pg_replica(pg_cluster: PostgresCluster) -> Iterator[PostgresReplica]:
    """A hot standby streaming from ``pg_cluster``: its databases, read-only."""
    with PostgresReplica(pg_cluster) as replica:
        yield replica


@pytest.fixture
def replica_urls(
    pg_cluster: PostgresCluster, pg_databases: DatabasePool, pg_replica: PostgresReplica
) -> Iterator[tuple[str, str]]:
    """URLs of a fresh, migrated database for this test alone: on ``pg_cluster``, and on
    ``pg_replica``, which has it by the time the test starts."""
    name, since = pg_databases.take()
    try:
        pg_replica.wait_caught_up()
        yield pg_cluster.url(name), pg_replica.url(name)
    finally:
        pg_replica.release(name)  # its sessions would hold up the replay of the wipe
        pg_databases.give_back(name, since)


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as server:
        yield server


@pytest.fixture(scope="session")
def mariadb_databases(mariadb_server: MariaDBServer) -> MariaDBPool:
    """Clones of a database migrated to head: wiped and reused when a test left the schema
    alone."""
    mariadb_server.create_database(TEMPLATE_DB)
    migrate.upgrade(mariadb_server.url(TEMPLATE_DB))
    return MariaDBPool(mariadb_server, TEMPLATE_DB)


@pytest.fixture
def mariadb_url(mariadb_server: MariaDBServer, mariadb_databases: MariaDBPool) -> Iterator[str]:
    """URL (PyMySQL) of a fresh, migrated MariaDB database for this test alone."""
    name = mariadb_databases.take()
    try:
        yield mariadb_server.url(name)
    finally:
        mariadb_databases.give_back(name)


def async_mariadb_url(url: str) -> str:
    """The asyncmy URL of the database a PyMySQL ``url`` names."""
    parsed = make_url(url).set(drivername="mysql+asyncmy")
    return parsed.difference_update_query(["ssl_disabled"]).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head, in WAL mode, copied for each test."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode = WAL")  # stored in the file
        migrate.upgrade(engine)
    finally:
        engine.dispose()  # the last connection to close checkpoints the WAL into the file
    return path


@contextmanager
def empty_databases(
    request: pytest.FixtureRequest, backend: str, directory: Path, *, sqlite_file: bool = False
) -> Iterator[Callable[[], str]]:
    """A maker of empty databases of ``backend`` (``postgresql``, ``mariadb`` or
    ``sqlite``), each dropped on leaving; it returns their URLs. A SQLite database is a
    file in ``directory``, made empty on the spot if ``sqlite_file``, else left for the
    first connection to create."""
    made: list[str] = []
    server: PostgresCluster | MariaDBServer | None = None
    if backend == "postgresql":
        server = request.getfixturevalue("pg_cluster")
    elif backend == "mariadb":
        server = request.getfixturevalue("mariadb_server")

    def make() -> str:
        name = f"empty_{os.getpid()}_{len(made)}_{id(made)}"
        made.append(name)
        if server is None:
            url = f"sqlite:///{directory / name}.db"
            if sqlite_file:
                create_engine(url).connect().close()
            return url
        server.create_database(name)
        return server.url(name)

    try:
        yield make
    finally:
        if server is not None:
            for name in made:
                server.drop_database(name)


def sqlite_file_url(template: Path, directory: Path, driver: str = "pysqlite") -> str:
    """URL of a fresh copy of ``template`` in ``directory``."""
    path = directory / f"t{next(_counter)}.db"
    shutil.copyfile(template, path)
    return f"sqlite+{driver}:///{path}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
    ) -> None:
        self.mode = mode
        self.url = url
        #: The database without a pooler between: where a test LISTENs.
        self.direct_url = direct_url or url
        args = connect_args or {}
        self.sync_engine: Engine = create_engine(sync_url(url), connect_args=args)
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


@pytest.fixture(params=DB_PARAMS)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    mode, backend = request.param
    connect_args = direct_url = None
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
    elif backend == "pgbouncer":  # the application's own statements, not prepared either
        url = request.getfixturevalue("pgbouncer_url")
        connect_args = {"prepare_threshold": None}
        cluster = request.getfixturevalue("pg_cluster")
        direct_url = cluster.url(str(make_url(url).database))
    elif backend == "mariadb":
        url = request.getfixturevalue("mariadb_url")
        if mode == "async":
            url = async_mariadb_url(url)
    else:
        template = request.getfixturevalue("sqlite_template")
        url = sqlite_file_url(template, tmp_path, "aiosqlite" if mode == "async" else "pysqlite")
    harness = Harness(mode, url, connect_args, direct_url)
    try:
        yield harness
        assert harness.checked_out() == 0, "the test leaked a pooled connection"
    finally:
        await harness.dispose()


@pytest.fixture
async def sqlite(sqlite_template: Path, tmp_path: Path) -> AsyncIterator[Harness]:
    """A SQLite file (copied from the migrated template) in a sync harness."""
    harness = Harness("sync", sqlite_file_url(sqlite_template, tmp_path))
    try:
        yield harness
    finally:
        await harness.dispose()


@asynccontextmanager
async def services(scheduler: Scheduler) -> AsyncIterator[Runner]:
    """The services of ``scheduler``'s loop, built but not run."""
    runner = scheduler._make_runner()
    try:
        yield runner
    finally:
        await runner.close()
