"""The fixtures of the concurrency tests: the database the worker processes share, the
processes (``tests.support.workers``), and the app's tables on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine

from tests.concurrency.app import metadata
from tests.support import sqlite_file_url
from tests.support.workers import Workers


@pytest.fixture(params=["postgresql", "sqlite", "mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    """The database a test that asks for it runs on: each in turn."""
    return str(request.param)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The database this test's workers share: PostgreSQL, or each of ``backend``'s in
    turn for a test that asks for ``backend`` too."""
    backend = request.getfixturevalue("backend") if "backend" in request.fixturenames else None
    if backend == "sqlite":
        return sqlite_file_url(request.getfixturevalue("sqlite_template"), tmp_path)
    if backend == "mariadb":
        return str(request.getfixturevalue("mariadb_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def workers(db_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Worker processes on this test's database, killed at teardown whatever happened."""
    started = Workers(db_url, tmp_path)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def app_db(db_url: str) -> Iterator[Engine]:
    """A sync engine on this test's database, with the app's ``runs`` and ``release``."""
    engine = create_engine(db_url)
    metadata.create_all(engine)
    try:
        yield engine
    finally:
        engine.dispose()
