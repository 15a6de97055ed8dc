"""Databases for a test beside the ``db`` harness's own: SQLite copies of the migrated
template, empty databases on any server, and the asyncmy form of a MariaDB URL."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url

from sqla_scheduler import migrate
from tests.support.servers.mariadb import MariaDBServer
from tests.support.servers.postgres import PostgresCluster

__all__ = ["async_mariadb_url", "empty_databases", "migrated_url", "sqlite_file_url"]

_counter = itertools.count()


def async_mariadb_url(url: str) -> str:
    """The asyncmy URL of the database a PyMySQL ``url`` names."""
    parsed = make_url(url).set(drivername="mysql+asyncmy")
    return parsed.difference_update_query(["ssl_disabled"]).render_as_string(hide_password=False)


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


def migrated_url(request: pytest.FixtureRequest, directory: Path) -> str:
    """The URL of a migrated database for this test, of the database its parameter names
    (``sqlite``: a file made in ``directory``; ``postgresql`` and ``mariadb``: the test's
    ``pg_url`` or ``mariadb_url``)."""
    if request.param == "sqlite":
        url = f"sqlite:///{directory / 'app.db'}"
        migrate.upgrade(url)
        return url
    return str(request.getfixturevalue("mariadb_url" if request.param == "mariadb" else "pg_url"))
