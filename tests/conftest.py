"""Shared fixtures: throwaway PostgreSQL and MariaDB servers and a fresh database per test.

Every database test gets a ``db`` harness, parametrized over a sync ``Engine`` and an
``AsyncEngine``, each on PostgreSQL (psycopg, a database cloned from a migrated template),
on SQLite (pysqlite or aiosqlite, a copy of a migrated template file in WAL mode) and on
MariaDB (PyMySQL or asyncmy, a database cloned from a migrated template): the conformance
suite every database passes. At teardown the harness asserts that no pooled connection
was leaked.

A module narrows the cases its tests run with ``pytest.mark.databases`` (the databases
all of them run on, those its async cases run on, whether it also runs through PgBouncer),
saying why beside it; the other cases are deselected. A test of behaviour only PostgreSQL
has is marked ``@pytest.mark.postgres_only("why")``; its other databases' cases are
reported as skipped with that reason.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, make_url

from sqla_scheduler import ManualClock, migrate
from tests.support import Harness, async_mariadb_url, manual_clock, sqlite_file_url
from tests.support.servers.mariadb import MariaDBServer
from tests.support.servers.mariadb_databases import DatabasePool as MariaDBPool
from tests.support.servers.pg_databases import DatabasePool
from tests.support.servers.pgbouncer import PgBouncer
from tests.support.servers.postgres import PostgresCluster
from tests.support.servers.replica import PostgresReplica

TEMPLATE_DB = "sqla_scheduler_template"

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
#: The databases a ``db`` case runs on unless its module's ``databases`` marker narrows them.
ALL_DATABASES = ("postgresql", "sqlite", "mariadb")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the SQLite cases of ``postgres_only`` tests, saying why; drop the ``db`` cases a
    module's ``databases`` marker leaves out, and trio with an AsyncEngine; put the ``slow``
    tests first.

    Modules that run under trio as well (``anyio_backend`` parametrized with "trio") do so
    with sync engines only: SQLAlchemy's AsyncEngine runs on asyncio alone, so that pair is
    not a case at all (the scheduler's refusal of it has tests of its own).

    A test marked ``slow`` must say in its docstring what only a slow run proves. Slow
    tests run first, so that pytest-xdist hands them out to its workers at the start
    instead of leaving one of them to end the run alone.
    """
    deselected = [
        item for item in items if _trio_with_async_engine(item) or _not_its_database(item)
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


def _not_its_database(item: pytest.Item) -> bool:
    """Whether ``item`` is a ``db`` case its module's ``databases`` marker leaves out."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "db" not in params:
        return False
    mode, backend = params["db"]
    marker = item.get_closest_marker("databases")
    args: tuple[str, ...] = marker.args if marker else ()
    kwargs: Mapping[str, Any] = marker.kwargs if marker else {}
    if backend == "pgbouncer":
        return not kwargs.get("pgbouncer", False)
    on = args or ALL_DATABASES
    if mode == "async" and kwargs.get("async_on") is not None:
        on = tuple(kwargs["async_on"])
    return backend not in on


def _trio_with_async_engine(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("anyio_backend") == "trio" and params.get("db", ("",))[0] == "async"


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
    with pg_databases.lent() as name:
        yield pg_cluster.url(name)


@pytest.fixture(scope="session")
def pgbouncer(pg_cluster: PostgresCluster) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction pooling mode in front of ``pg_cluster``."""
    with PgBouncer(pg_cluster) as bouncer:
        yield bouncer


@pytest.fixture
def pgbouncer_url(pgbouncer: PgBouncer, pg_databases: DatabasePool) -> Iterator[str]:
    """URL of a fresh, migrated database for this test alone, through ``pgbouncer``
    (whose pooled sessions are ended before it is given back: they would have it dropped)."""
    with pg_databases.lent(pgbouncer.release) as name:
        yield pgbouncer.url(name)


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
    # the replica's sessions are ended before it is given back: they would hold up the
    # replay of the wipe
    with pg_databases.lent(pg_replica.release) as name:
        pg_replica.wait_caught_up()
        yield pg_cluster.url(name), pg_replica.url(name)


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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock standing at ``NOW`` (``tests.support.clocks``) until the test moves it."""
    return manual_clock()


@pytest.fixture(params=DB_PARAMS)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    mode, backend = request.param
    connect_args = direct_url = look_url = None
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
    elif backend == "pgbouncer":  # the application's own statements, not prepared either
        url = request.getfixturevalue("pgbouncer_url")
        connect_args = {"prepare_threshold": None}
        cluster = request.getfixturevalue("pg_cluster")
        direct_url = cluster.url(str(make_url(url).database))
    elif backend == "mariadb":
        url = look_url = request.getfixturevalue("mariadb_url")
        if mode == "async":
            url = async_mariadb_url(url)
    else:
        template = request.getfixturevalue("sqlite_template")
        url = sqlite_file_url(template, tmp_path, "aiosqlite" if mode == "async" else "pysqlite")
    harness = Harness(mode, url, connect_args, direct_url, look_url)
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
